/**
 * The pod's KEP-3698 network list, carried in the annotation `multinetwork.manifold.dev/networks`
 * until `Pod.spec.networks` exists: a JSON array of the KEP's `Network`,
 * `{name | attachmentName, interfaceName?, isDefaultGW?}`. `podNetworkName` /
 * `podNetworkAttachmentName` (the KEP's auto-population example, and Manifold before) are
 * accepted as aliases of `name` / `attachmentName`; a key and its alias together are refused.
 * Parsed once, here, with zod, with the KEP's static validations ("Static validations"):
 * exactly one of the two names, `interfaceName` Linux naming rules and unique, `isDefaultGW`
 * true at most once. Each failure names the field (`[1].interfaceName`), as the API server
 * would for `spec.networks[1].interfaceName`.
 *
 * @module
 */

import { z } from "zod";
import { checkJsonDepth, tuneZod } from "../../cni/decode.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { INTERFACE_RULE, isDns1123Subdomain, isValidInterfaceName } from "./network_reference.ts";
import { PODNETWORKS_ANNOTATION } from "../types.ts";
import { errorText } from "../../util/text.ts";

tuneZod(z);

/** Largest accepted number of entries (as the NPWG annotation). */
export const MAX_PODNETWORK_ENTRIES = 32;

/**
 * One entry of the list (KEP-3698 `Network`); exactly one of the two names is set. The fields
 * keep the unambiguous names (`name` → `podNetworkName`, `attachmentName` →
 * `podNetworkAttachmentName`).
 */
export interface PodNetworkEntry {
  /** A cluster-scoped PodNetwork (the KEP's `name`). */
  podNetworkName?: string;
  /** A PodNetworkAttachment in the pod's namespace (the KEP's `attachmentName`). */
  podNetworkAttachmentName?: string;
  /** Interface in the pod; automatic (`netN`) when absent. */
  interfaceName?: string;
  /** This attachment holds the pod's default route. */
  isDefaultGW: boolean;
}

function buildSchema() {
  const name = z.string().refine(isDns1123Subdomain, { error: "not a DNS-1123 subdomain" });
  return z.array(
    z.strictObject({
      name: name.optional(),
      attachmentName: name.optional(),
      podNetworkName: name.optional(),
      podNetworkAttachmentName: name.optional(),
      interfaceName: z.string().refine(isValidInterfaceName, { error: INTERFACE_RULE })
        .optional(),
      isDefaultGW: z.boolean().optional(),
    }).check((ctx) => {
      const e = ctx.value;
      const issue = (message: string, path: string) =>
        ctx.issues.push({ code: "custom", message, path: [path], input: e });
      if (e.name !== undefined && e.podNetworkName !== undefined) {
        issue("name and its alias podNetworkName are both set", "podNetworkName");
      }
      if (e.attachmentName !== undefined && e.podNetworkAttachmentName !== undefined) {
        issue(
          "attachmentName and its alias podNetworkAttachmentName are both set",
          "podNetworkAttachmentName",
        );
      }
      const network = e.name !== undefined || e.podNetworkName !== undefined;
      const attachment = e.attachmentName !== undefined ||
        e.podNetworkAttachmentName !== undefined;
      if (network === attachment) {
        issue("exactly one of name and attachmentName must be set", "name");
      }
    }),
  ).max(MAX_PODNETWORK_ENTRIES);
}

let schema: ReturnType<typeof buildSchema> | undefined;

/**
 * The Warning event a failed static check asks for (KEP-3698 puts these checks in the API
 * server, which would name `spec.networks[i].<field>`; here they fail the ADD, and the event
 * tells the pod's owner which field): `reason` `InvalidPodNetworks`.
 */
export interface PodNetworkListEvent {
  /** `"InvalidPodNetworks"`. */
  reason: string;
  /** `"multinetwork.manifold.dev/networks[1].interfaceName: …"`. */
  message: string;
}

/** A code-7 error of the list, carrying the event to post on the pod (`podEvent`). */
function listError(field: string, why: string): CniError & { podEvent: PodNetworkListEvent } {
  const err = new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `invalid ${PODNETWORKS_ANNOTATION} annotation (KEP-3698 networks list)`,
    field ? `${field}: ${why}` : why,
  );
  return Object.assign(err, {
    podEvent: {
      reason: "InvalidPodNetworks",
      message: `${PODNETWORKS_ANNOTATION}${field}: ${why} (KEP-3698 static validation of ` +
        `spec.networks${field}; the pod is not started until the list is fixed)`,
    },
  });
}

/** `[1].interfaceName` from a zod issue path. */
function fieldOf(path: PropertyKey[]): string {
  return path.map((p) => typeof p === "number" ? `[${p}]` : `.${String(p)}`).join("");
}

/**
 * The KEP's auto-population ("Auto-population": when `networks` is not set, it is
 * `[{podNetworkName: default}]`): an empty list — `networks: []` is "not set" under
 * `omitempty` — is the "default" PodNetwork alone; any other list is returned as is.
 * @param entries the parsed list.
 * @returns `entries`, or the one entry naming "default" when it is empty.
 * @example
 * ```ts
 * autoPopulated([]); // [{ podNetworkName: "default", isDefaultGW: false }]
 * ```
 */
export function autoPopulated(entries: PodNetworkEntry[]): PodNetworkEntry[] {
  return entries.length > 0 ? entries : [{ podNetworkName: "default", isDefaultGW: false }];
}

/**
 * Parses the annotation's value.
 * @param text the annotation value (JSON).
 * @returns the entries in order (`isDefaultGW` false when absent).
 * @throws {CniError} code 7 when the value is not JSON, an entry is invalid (details: the
 *   prettified zod error), a `name` or an `interfaceName` repeats, or `isDefaultGW` is true
 *   twice; the error carries `podEvent` ({@link PodNetworkListEvent}) naming the field.
 * @example
 * ```ts
 * parsePodNetworkAnnotation('[{"name":"dataplane","interfaceName":"net5","isDefaultGW":true}]');
 * // [{ podNetworkName: "dataplane", interfaceName: "net5", isDefaultGW: true }]
 * ```
 */
export function parsePodNetworkAnnotation(text: string): PodNetworkEntry[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
    checkJsonDepth(raw, `${PODNETWORKS_ANNOTATION} annotation`);
  } catch (e) {
    throw listError("", errorText(e));
  }
  const r = (schema ??= buildSchema()).safeParse(raw);
  if (!r.success) {
    const first = r.error.issues[0];
    const err = listError(fieldOf(first?.path ?? []), first?.message ?? "invalid");
    // details: every issue, as zod words them.
    throw Object.assign(
      new CniError(err.code, err.msg, z.prettifyError(r.error)),
      { podEvent: err.podEvent },
    );
  }
  const seen = new Set<string>();
  const networks = new Map<string, number>();
  let gw = -1;
  return r.data.map((e, i) => {
    if (e.interfaceName !== undefined) {
      if (seen.has(e.interfaceName)) {
        throw listError(`[${i}].interfaceName`, `"${e.interfaceName}" is used twice`);
      }
      seen.add(e.interfaceName);
    }
    if (e.isDefaultGW) {
      if (gw >= 0) throw listError(`[${i}].isDefaultGW`, `already true on [${gw}]`);
      gw = i;
    }
    const out: PodNetworkEntry = { isDefaultGW: e.isDefaultGW === true };
    const network = e.name ?? e.podNetworkName;
    const attachment = e.attachmentName ?? e.podNetworkAttachmentName;
    if (network !== undefined) {
      const first = networks.get(network);
      if (first !== undefined) {
        throw listError(
          `[${i}].name`,
          `PodNetwork "${network}" is already referenced by [${first}] (a pod references a PodNetwork once)`,
        );
      }
      networks.set(network, i);
    }
    if (network !== undefined) out.podNetworkName = network;
    if (attachment !== undefined) out.podNetworkAttachmentName = attachment;
    if (e.interfaceName !== undefined) out.interfaceName = e.interfaceName;
    return out;
  });
}
