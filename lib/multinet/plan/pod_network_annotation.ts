/**
 * The pod's KEP-3698 network list, carried in the annotation `multinetwork.manifold.dev/networks`
 * until `Pod.spec.networks` exists: a JSON array of `{podNetworkName | podNetworkAttachmentName,
 * interfaceName?, isDefaultGW?}`. Parsed once, here, with zod, with the KEP's static
 * validations ("Static validations"): exactly one of the two names, `interfaceName` Linux
 * naming rules and unique, `isDefaultGW` true at most once.
 *
 * @module
 */

import { z } from "zod";
import { checkJsonDepth } from "../../cni/decode.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { INTERFACE_RULE, isDns1123Subdomain, isValidInterfaceName } from "./network_reference.ts";
import { PODNETWORKS_ANNOTATION } from "../types.ts";
import { errorText } from "../../util/text.ts";

/** Largest accepted number of entries (as the NPWG annotation). */
export const MAX_PODNETWORK_ENTRIES = 32;

/** One entry of the list (KEP-3698 `Network`); exactly one of the two names is set. */
export interface PodNetworkEntry {
  /** A cluster-scoped PodNetwork. */
  podNetworkName?: string;
  /** A PodNetworkAttachment in the pod's namespace. */
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
      podNetworkName: name.optional(),
      podNetworkAttachmentName: name.optional(),
      interfaceName: z.string().refine(isValidInterfaceName, { error: INTERFACE_RULE })
        .optional(),
      isDefaultGW: z.boolean().optional(),
    }).refine(
      (e) => (e.podNetworkName === undefined) !== (e.podNetworkAttachmentName === undefined),
      { error: "exactly one of podNetworkName and podNetworkAttachmentName must be set" },
    ),
  ).max(MAX_PODNETWORK_ENTRIES);
}

let schema: ReturnType<typeof buildSchema> | undefined;

/**
 * Parses the annotation's value.
 * @param text the annotation value (JSON).
 * @returns the entries in order (`isDefaultGW` false when absent).
 * @throws {CniError} code 7 when the value is not JSON, an entry is invalid (details: the
 *   prettified zod error), an `interfaceName` repeats, or `isDefaultGW` is true twice.
 * @example
 * ```ts
 * parsePodNetworkAnnotation('[{"podNetworkName":"dataplane","interfaceName":"net5","isDefaultGW":true}]');
 * // [{ podNetworkName: "dataplane", interfaceName: "net5", isDefaultGW: true }]
 * ```
 */
export function parsePodNetworkAnnotation(text: string): PodNetworkEntry[] {
  const invalid = (details: string) =>
    new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `invalid ${PODNETWORKS_ANNOTATION} annotation (KEP-3698 networks list)`,
      details,
    );
  let raw: unknown;
  try {
    raw = JSON.parse(text);
    checkJsonDepth(raw, `${PODNETWORKS_ANNOTATION} annotation`);
  } catch (e) {
    throw invalid(errorText(e));
  }
  const r = (schema ??= buildSchema()).safeParse(raw);
  if (!r.success) throw invalid(z.prettifyError(r.error));
  const seen = new Set<string>();
  let gw = -1;
  return r.data.map((e, i) => {
    if (e.interfaceName !== undefined) {
      if (seen.has(e.interfaceName)) {
        throw invalid(`[${i}]: interfaceName "${e.interfaceName}" is used twice`);
      }
      seen.add(e.interfaceName);
    }
    if (e.isDefaultGW) {
      if (gw >= 0) throw invalid(`[${i}]: isDefaultGW is already true on [${gw}]`);
      gw = i;
    }
    const out: PodNetworkEntry = { isDefaultGW: e.isDefaultGW === true };
    if (e.podNetworkName !== undefined) out.podNetworkName = e.podNetworkName;
    if (e.podNetworkAttachmentName !== undefined) {
      out.podNetworkAttachmentName = e.podNetworkAttachmentName;
    }
    if (e.interfaceName !== undefined) out.interfaceName = e.interfaceName;
    return out;
  });
}
