/**
 * A NetworkAttachmentDefinition's `spec.config` as untrusted input (NPWG v1.3 §3.4.1–§3.4.2):
 * size and depth limits, JSON decoding, `"name"` injection, parsing into a conflist.
 *
 * @module
 */

import { checkJsonDepth, MAX_JSON_DEPTH } from "../../cni/decode.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { isPlainObject, type NetworkConfigList, parseNetworkConfig } from "../../cni/netconf.ts";
import { errorText } from "../../util/text.ts";

/**
 * Largest accepted NAD `spec.config`, in bytes of UTF-8: 256 KiB (Manifold's limit; a
 * real delegate config is a few hundred bytes, and the selection annotation has the same
 * cap).
 */
export const MAX_NAD_CONFIG_BYTES = 256 * 1024;

const ENCODER = new TextEncoder();

/**
 * Refuses a `spec.config` larger than {@link MAX_NAD_CONFIG_BYTES}.
 * @param text the NAD's `spec.config`.
 * @throws {CniError} code 7 `spec.config is N bytes, more than the limit of 262144 bytes`.
 */
export function checkNadConfigSize(text: string): void {
  // UTF-8 bytes ≤ 3 × UTF-16 units: short configs need no encoding to be measured.
  if (text.length * 3 <= MAX_NAD_CONFIG_BYTES) return;
  const size = ENCODER.encode(text).length;
  if (size > MAX_NAD_CONFIG_BYTES) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `spec.config is ${size} bytes, more than the limit of ${MAX_NAD_CONFIG_BYTES} bytes`,
    );
  }
}

/**
 * Parses a NAD's spec.config, injecting `"name"` when it is missing or empty (§3.4.2);
 * at most `MAX_JSON_DEPTH` levels deep.
 * @param text the NAD's `spec.config`.
 * @param nadName the NAD's name (injected as `"name"` when the config has none).
 * @param source where it came from, for error details (`"nad:ns/name"`).
 * @returns the parsed conflist (a single conf wrapped), every original key kept.
 * @throws {CniError} code 6 not JSON; code 7 too deep or invalid; code 1 unsupported version.
 */
export function parseNadConfig(text: string, nadName: string, source: string): NetworkConfigList {
  let decoded: unknown;
  try {
    decoded = JSON.parse(text);
  } catch (err) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "spec.config is not valid JSON",
      errorText(err),
    );
  }
  checkJsonDepth(decoded, "spec.config", { maxDepth: MAX_JSON_DEPTH });
  if (isPlainObject(decoded) && (decoded.name === undefined || decoded.name === "")) {
    decoded = injectName(decoded, nadName);
  }
  return parseNetworkConfig(decoded as Record<string, unknown>, { source });
}

/** A copy of `conf` with `"name"` after `"cniVersion"` (or first), as in the §3.4.2.1 example. */
function injectName(conf: Record<string, unknown>, name: string): Record<string, unknown> {
  const entries = Object.entries(conf).filter(([k]) => k !== "name");
  const at = entries.findIndex(([k]) => k === "cniVersion") + 1;
  entries.splice(at, 0, ["name", name]);
  // Object.fromEntries defines own properties: a "__proto__" key stays data.
  return Object.fromEntries(entries);
}
