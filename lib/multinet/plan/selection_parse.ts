/**
 * Parsing and validation of the pod's network selection annotation
 * `k8s.v1.cni.cncf.io/networks` (NPWG v1.3 §4.1) and of single network references
 * (`"name"`, `"ns/name"`, `"ns/name@ifname"`).
 *
 * The annotation is untrusted input: it is parsed once here, every key of
 * NPWG v1.3 §4.1.2.1 is validated, and any invalid element fails the whole annotation
 * with a {@link CniError} of code 7 ("the Network Attachment Selection Annotation shall
 * be invalid", §4.1.2.1.3–10).
 *
 * Without zod (issue 30): an element is checked by a fast check
 * (lib/multinet/plan/selection_fast.ts) that accepts what the zod schema
 * (lib/multinet/plan/selection_schema.ts) accepts and returns the same value, or asks
 * for the schema — which lib/multinet/plan/selection.ts (the door for everyone else) loads at
 * once, and the per-call path loads through {@link withSelectionSchema} only then. Without it,
 * such a call throws {@link SELECTION_SCHEMA_NEEDED}.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { checkJsonDepth, MAX_JSON_DEPTH, zodDetails } from "../../cni/decode.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { quote, splitReference } from "./network_reference.ts";
import { fastCheck } from "../../util/shape.ts";
import { FAST_ELEMENT } from "./selection_fast.ts";
import type { NetworkSelectionElement, PortMapping } from "../types.ts";

export {
  isDns1123Label,
  isDns1123Subdomain,
  isValidInterfaceName,
  type NetworkReference,
  parseNetworkReference,
} from "./network_reference.ts";
export { FAST_ELEMENT, GUID_64, MAC_48 } from "./selection_fast.ts";
import { errorText } from "../../util/text.ts";

/** Largest accepted annotation value, in bytes of UTF-8 (256 KiB; Kubernetes allows 256 KiB for all annotations together). */
export const MAX_SELECTION_ANNOTATION_BYTES = 256 * 1024;
/** Largest accepted number of elements in one annotation. */
export const MAX_SELECTION_ELEMENTS = 32;
/**
 * Deepest accepted nesting of arrays/objects in a JSON annotation, in levels (the list is
 * level 1, an element 2, so `cni-args` may nest 62 more): {@link MAX_JSON_DEPTH}, 64.
 */
export const MAX_SELECTION_DEPTH: number = MAX_JSON_DEPTH;

const ENCODER = new TextEncoder();

/** zod's `safeParse` result for one element, as the parser reads it (success and value, or issues). */
export type ZodElementResult =
  | { success: true; data: unknown }
  | {
    success: false;
    error: {
      issues: { code: string; path: PropertyKey[]; message: string; keys?: string[] }[];
    };
  };

let reference: ((spec: unknown) => ZodElementResult) | undefined;

/**
 * Registers the zod element check; lib/multinet/plan/selection_schema.ts calls it when it loads.
 * @param check zod's `safeParse` of one element's spec keys.
 */
export function registerSelectionReference(check: (spec: unknown) => ZodElementResult): void {
  reference = check;
}

/** Thrown when an element needs the zod schema and it is not loaded ({@link withSelectionSchema}). */
export const SELECTION_SCHEMA_NEEDED: unique symbol = Symbol("selection schema not loaded");

/**
 * Runs a pure, synchronous selection parse; when an element needs the zod schema, loads it
 * (lib/multinet/plan/selection_schema.ts) and runs the parse again.
 * @param op the parse (no side effects).
 * @returns what `op` returns.
 * @throws what `op` throws once the schema is loaded (CniError code 7).
 * @example
 * ```ts
 * const elements = await withSelectionSchema(() => parseNetworkSelection(text, "default"));
 * ```
 */
export async function withSelectionSchema<T>(op: () => T): Promise<T> {
  try {
    return op();
  } catch (e) {
    if (e !== SELECTION_SCHEMA_NEEDED) throw e;
  }
  await lazyImport<typeof import("./selection_schema.ts")>(
    "./selection_schema.ts",
    import.meta.url,
  );
  return op();
}

/** One element's spec keys as the checks return them (zod's output). */
interface ElementSpec {
  name: string;
  namespace?: string;
  ips?: string[];
  mac?: string;
  interface?: string;
  "cni-args"?: Record<string, unknown>;
  portMappings?: { hostPort: number; containerPort: number; protocol?: string; hostIP?: string }[];
  bandwidth?: NetworkSelectionElement["bandwidth"];
  "default-route"?: string[];
  "infiniband-guid"?: string;
  "ipam-claim-reference"?: string;
}

/**
 * Parses and validates the `k8s.v1.cni.cncf.io/networks` annotation (NPWG v1.3 §4.1).
 *
 * Formats:
 * - JSON list (§4.1.2) — chosen, like Multus, when the text contains `[`, `{` or `"`; it must
 *   then be a JSON array of objects.
 * - comma-delimited (§4.1.1) — `"net-a, ns/net-b, net-c@eth5"`; each item goes through
 *   {@link parseNetworkReference} (the `@ifname` suffix is Multus's extension). Empty
 *   items (`"a,,b"`, a trailing comma) are rejected rather than silently dropped.
 * - empty or whitespace-only → `[]`.
 *
 * Keys validated (§4.1.2.1): `name` (required, DNS-1123 subdomain: ≤ 253 characters, units
 * ≤ 63), `namespace` (DNS-1123 label; missing or `""` → `podNamespace`), `ips` (non-empty;
 * IPv4/IPv6 with optional `/prefix`), `mac` (6 bytes, `:`-separated hex), `interface`
 * (kernel rules, 1–15 bytes), `cni-args` (object), `portMappings` (non-empty;
 * `hostPort`/`containerPort` integers 1–65535; `protocol` TCP/UDP/SCTP case-insensitive,
 * returned lower-case, default `"tcp"`; optional `hostIP`), `bandwidth` (at least one of
 * `ingressRate`/`egressRate` in bits/s and `ingressBurst`/`egressBurst` in bits, positive
 * integers; a burst requires its rate), `default-route` (array of gateway IPs, may be
 * empty; at most ONE element of the list may carry the key, §4.1.2.1.9), `infiniband-guid`
 * (8 bytes, `:`-separated hex), `ipam-claim-reference` (IPAMClaim name; following spec v1.3
 * §4.1.2.1.11 it is an error together with `ips`, although NAD client v1.7.7 lifted that
 * rule). Other keys without a `.` are reserved by the spec and rejected; keys with a `.`
 * (reverse-DNS extensions) are kept verbatim in `extra`.
 *
 * @param annotation the annotation value (untrusted)
 * @param podNamespace the pod's namespace, used when an element has no namespace
 * @returns the elements in annotation order, with `namespace` always filled
 * @throws {CniError} code 7 (invalid network config) for any invalid element, naming its
 *   index, its name and the key, e.g.
 *   `invalid network selection element [1] ("macvlan-conf"): "mac": not a 6-byte MAC address (xx:xx:xx:xx:xx:xx)`,
 *   with `details` = the prettified zod error; also when the text is larger than
 *   {@link MAX_SELECTION_ANNOTATION_BYTES} or has more than {@link MAX_SELECTION_ELEMENTS}
 *   elements, is not valid JSON, or nests deeper than {@link MAX_SELECTION_DEPTH} levels
 *   (`"network selection annotation is nested more than 64 levels deep (limit 64)"`)
 * @example
 * ```ts
 * parseNetworkSelection("net-a, other/net-b@eth5", "default");
 * // [{name: "net-a", namespace: "default"},
 * //  {name: "net-b", namespace: "other", interface: "eth5"}]
 * parseNetworkSelection('[{"name":"net-b","mac":"02:23:45:67:89:01"}]', "ns1");
 * // [{name: "net-b", namespace: "ns1", mac: "02:23:45:67:89:01"}]
 * ```
 */
export function parseNetworkSelection(
  annotation: string,
  podNamespace: string,
): NetworkSelectionElement[] {
  // UTF-8 bytes ≤ 3 × UTF-16 units: short values need no encoding to be measured.
  if (annotation.length * 3 > MAX_SELECTION_ANNOTATION_BYTES) {
    const size = ENCODER.encode(annotation).length;
    if (size > MAX_SELECTION_ANNOTATION_BYTES) tooLarge(size);
  }
  const text = annotation.trim();
  if (text === "") return [];
  if (/[[{"]/.test(text)) return parseJsonList(text, podNamespace);
  return parseCommaList(text, podNamespace);
}

function tooLarge(size: number): never {
  throw new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `network selection annotation is ${size} bytes, more than the limit of ${MAX_SELECTION_ANNOTATION_BYTES} bytes`,
  );
}

function checkCount(count: number): void {
  if (count > MAX_SELECTION_ELEMENTS) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `network selection annotation has ${count} elements, more than the limit of ${MAX_SELECTION_ELEMENTS} elements`,
    );
  }
}

function parseCommaList(text: string, podNamespace: string): NetworkSelectionElement[] {
  const items = text.split(",");
  checkCount(items.length);
  return items.map((item, index) => {
    const ref = item.trim();
    const parsed = splitReference(ref, podNamespace);
    if (typeof parsed === "string") {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `invalid network selection element [${index}] (${quote(ref)}): ${
          ref === "" ? "empty item (stray comma?)" : parsed
        }`,
      );
    }
    const element: NetworkSelectionElement = { name: parsed.name, namespace: parsed.namespace };
    if (parsed.interface !== undefined) element.interface = parsed.interface;
    return element;
  });
}

function parseJsonList(text: string, podNamespace: string): NetworkSelectionElement[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      "network selection annotation is neither a comma-delimited list nor valid JSON",
      errorText(err),
    );
  }
  checkJsonDepth(raw, "network selection annotation", { maxDepth: MAX_SELECTION_DEPTH });
  if (!Array.isArray(raw)) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      "network selection annotation in JSON format must be a list of objects (NPWG v1.3 §4.1.2)",
    );
  }
  checkCount(raw.length);
  let defaultRouteAt = -1;
  return raw.map((item: unknown, index: number) => {
    const element = parseElement(item, index, podNamespace);
    if (element["default-route"] !== undefined) {
      if (defaultRouteAt >= 0) {
        throw new CniError(
          CniErrorCode.InvalidNetworkConfig,
          `${
            elementLabel(index, element.name)
          }: "default-route": may be set on only one element (already set on element [${defaultRouteAt}], NPWG v1.3 §4.1.2.1.9)`,
        );
      }
      defaultRouteAt = index;
    }
    return element;
  });
}

function elementLabel(index: number, name: unknown): string {
  const base = `invalid network selection element [${index}]`;
  return typeof name === "string" && name !== "" ? `${base} (${quote(name)})` : base;
}

function parseElement(item: unknown, index: number, podNamespace: string): NetworkSelectionElement {
  if (typeof item !== "object" || item === null || Array.isArray(item)) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `${elementLabel(index, undefined)}: not a JSON object`,
    );
  }
  // Object.fromEntries defines own properties, so a "__proto__" key stays a plain key.
  const entries = Object.entries(item);
  const spec = Object.fromEntries(entries.filter(([k]) => !k.includes(".")));
  const extension = entries.filter(([k]) => k.includes("."));
  const fast = fastCheck(FAST_ELEMENT, spec);
  const result: ZodElementResult = fast !== undefined
    ? { success: true, data: fast }
    : reference
    ? reference(spec)
    : (() => {
      throw SELECTION_SCHEMA_NEEDED;
    })();
  if (!result.success) {
    const issue = result.error.issues[0];
    const key = issue.code === "unrecognized_keys" ? [...issue.path, issue.keys![0]] : issue.path;
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `${elementLabel(index, spec.name)}: ${formatPath(key)}: ${issue.message}`,
      zodDetails(result.error),
    );
  }
  const e = result.data as ElementSpec;
  const out: NetworkSelectionElement = {
    name: e.name,
    namespace: e.namespace === undefined || e.namespace === "" ? podNamespace : e.namespace,
  };
  if (e.interface !== undefined) out.interface = e.interface;
  if (e.ips !== undefined) out.ips = e.ips;
  if (e.mac !== undefined) out.mac = e.mac;
  // The original object, not zod's rebuilt record (which would drop a "__proto__" key).
  if (e["cni-args"] !== undefined) out["cni-args"] = spec["cni-args"] as Record<string, unknown>;
  if (e.portMappings !== undefined) out.portMappings = e.portMappings.map(toPortMapping);
  if (e.bandwidth !== undefined) out.bandwidth = e.bandwidth;
  if (e["default-route"] !== undefined) out["default-route"] = e["default-route"];
  if (e["infiniband-guid"] !== undefined) out["infiniband-guid"] = e["infiniband-guid"];
  if (e["ipam-claim-reference"] !== undefined) {
    out["ipam-claim-reference"] = e["ipam-claim-reference"];
  }
  if (extension.length > 0) out.extra = Object.fromEntries(extension);
  return out;
}

function toPortMapping(
  pm: { hostPort: number; containerPort: number; protocol?: string; hostIP?: string },
): PortMapping {
  const out: PortMapping = {
    hostPort: pm.hostPort,
    containerPort: pm.containerPort,
    protocol: (pm.protocol ?? "tcp").toLowerCase(),
  };
  if (pm.hostIP !== undefined) out.hostIP = pm.hostIP;
  return out;
}

/** `["portMappings", 0, "hostPort"]` → `"portMappings"[0]."hostPort"`. */
function formatPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return "(element)";
  return path.map((p, i) =>
    typeof p === "number" ? `[${p}]` : `${i === 0 ? "" : "."}${quote(String(p))}`
  ).join("");
}
