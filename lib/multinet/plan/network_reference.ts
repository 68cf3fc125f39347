/**
 * Network references and the names in them (NPWG v1.3 §3.3, §4.1.1): DNS-1123 names,
 * Linux interface names, and the comma-format reference `"ns/name@ifname"` used by the
 * selection annotation, the `v1.multus-cni.io/default-network` annotation and the
 * `clusterNetwork` / `defaultNetworks` settings.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { interfaceNameProblem } from "../../cni/env.ts";

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * True when `value` is a DNS-1123 label: lower-case alphanumerics and `-`, starting and
 * ending alphanumerically, at most 63 characters (NPWG v1.3 §3.3; Kubernetes namespace names).
 *
 * @param value candidate name
 * @returns whether it is a valid label
 * @example
 * ```ts
 * isDns1123Label("net-a"); // true
 * isDns1123Label("Net_A"); // false
 * ```
 */
export function isDns1123Label(value: string): boolean {
  return value.length <= 63 && DNS1123_LABEL.test(value);
}

/**
 * True when `value` is made of `.`-separated DNS-1123 label units, at most 253 characters
 * in all and 63 per unit (NPWG v1.3 §3.3: NAD names "must be comprised of units of the
 * DNS-1123 label format"; the Kubernetes DNS-1123 subdomain rule).
 *
 * @param value candidate name
 * @returns whether it is a valid subdomain name
 * @example
 * ```ts
 * isDns1123Subdomain("vm123.tenantblue"); // true
 * isDns1123Subdomain("a..b"); // false
 * ```
 */
export function isDns1123Subdomain(value: string): boolean {
  return value.length >= 1 && value.length <= 253 && value.split(".").every(isDns1123Label);
}

/**
 * True when `value` is a valid Linux interface name, with the kernel's own rules
 * (`net/core/dev.c dev_valid_name`): 1–15 bytes (IFNAMSIZ − 1, counted in UTF-8 bytes),
 * not `"."` or `".."`, and no `/`, `:`, NUL or byte that the kernel's `isspace()` accepts
 * (0x09–0x0d, 0x20, 0xa0).
 *
 * @param value candidate name
 * @returns whether the kernel would accept it
 * @example
 * ```ts
 * isValidInterfaceName("net1"); // true
 * isValidInterfaceName("eth0:1"); // false
 * ```
 */
export function isValidInterfaceName(value: string): boolean {
  return interfaceNameProblem(value) === undefined;
}

/** The reference parsed by {@link parseNetworkReference}. */
export interface NetworkReference {
  /** NAD namespace; the pod's namespace when the reference has none. */
  namespace: string;
  /** NAD name (DNS-1123 subdomain). */
  name: string;
  /** Requested interface name (the Multus `@ifname` suffix), when given. */
  interface?: string;
}

/**
 * Parses one network reference of the comma-delimited format (NPWG v1.3 §4.1.1) with
 * Multus's `@ifname` suffix: `"name"`, `"ns/name"`, `"name@ifname"`, `"ns/name@ifname"`.
 * Surrounding whitespace of each part is ignored. Also used for the
 * `v1.multus-cni.io/default-network` annotation and for the `clusterNetwork` /
 * `defaultNetworks` names of the Manifold config.
 *
 * @param ref the reference text
 * @param podNamespace namespace used when `ref` has none
 * @returns `{namespace, name, interface?}`
 * @throws {CniError} code 7 (invalid network config) when there is more than one `/` or
 *   `@`, the name is not a DNS-1123 subdomain (≤ 253, units ≤ 63), the namespace is not a
 *   DNS-1123 label, or the interface name breaks the kernel's rules
 * @example
 * ```ts
 * parseNetworkReference("other/net-c@eth5", "default");
 * // {namespace: "other", name: "net-c", interface: "eth5"}
 * ```
 */
export function parseNetworkReference(ref: string, podNamespace: string): NetworkReference {
  const parsed = splitReference(ref, podNamespace);
  if (typeof parsed === "string") {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `invalid network reference ${quote(ref)}: ${parsed}`,
    );
  }
  return parsed;
}

/**
 * {@link parseNetworkReference} without throwing.
 * @param ref the reference text
 * @param podNamespace namespace used when `ref` has none
 * @returns the reference, or why it is invalid (a message fragment).
 */
export function splitReference(ref: string, podNamespace: string): NetworkReference | string {
  const slash = ref.split("/");
  if (slash.length > 2) return 'more than one "/"';
  const namespace = slash.length === 2 ? slash[0].trim() : podNamespace;
  const at = slash[slash.length - 1].split("@");
  if (at.length > 2) return 'more than one "@"';
  const name = at[0].trim();
  if (name === "") return "empty name";
  if (!isDns1123Subdomain(name)) return `name ${quote(name)}: ${NAME_RULE}`;
  if (!isDns1123Label(namespace)) return `namespace ${quote(namespace)}: ${NAMESPACE_RULE}`;
  if (at.length === 1) return { namespace, name };
  const ifName = at[1].trim();
  if (!isValidInterfaceName(ifName)) return `interface ${quote(ifName)}: ${INTERFACE_RULE}`;
  return { namespace, name, interface: ifName };
}

/** Why a NAD name is invalid (messages). */
export const NAME_RULE =
  'not a DNS-1123 subdomain name (lower-case alphanumerics, "-" and ".", at most 253 characters, units of at most 63)';
/** Why a namespace is invalid (messages). */
export const NAMESPACE_RULE =
  'not a DNS-1123 label (lower-case alphanumerics and "-", at most 63 characters)';
/** Why an interface name is invalid (messages). */
export const INTERFACE_RULE =
  'not a valid Linux interface name (1-15 bytes, not "." or "..", no "/", ":" or whitespace)';

/**
 * JSON-quotes `s` for messages, shortened to 80 characters.
 * @param s any text
 * @returns the quoted text
 * @example
 * ```ts
 * quote("net-a"); // "\"net-a\""
 * ```
 */
export function quote(s: string): string {
  return JSON.stringify(s.length > 80 ? `${s.slice(0, 77)}...` : s);
}
