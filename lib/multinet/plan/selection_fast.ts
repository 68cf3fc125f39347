/**
 * The fast check of one network selection element (NPWG v1.3 §4.1.2.1): the shapes of
 * lib/util/shape.ts that accept what the zod schema (lib/multinet/plan/selection_schema.ts)
 * accepts and return the same value, so lib/multinet/plan/selection_parse.ts validates a
 * usual element without loading zod (issue 30). Conservative: what it does not accept goes
 * to the zod schema, which decides.
 *
 * @module
 */

import { isDns1123Label, isDns1123Subdomain, isValidInterfaceName } from "./network_reference.ts";
import {
  array,
  fastCheck,
  int,
  ipAddress,
  ipPrefix,
  NOT_FAST,
  record,
  type Shape,
  strict,
  unknown,
} from "../../util/shape.ts";

/** A 6-byte MAC address, `:`-separated hex (NPWG v1.3 §4.1.2.1.5). */
export const MAC_48 = /^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$/;
/** An 8-byte InfiniBand GUID, `:`-separated hex (NPWG v1.3 §4.1.2.1.10). */
export const GUID_64 = /^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){7}$/;

/** `z.int().min(lo).max(hi)`. */
function intIn(lo: number, hi: number): Shape<number> {
  const check = int(lo);
  return (v) => check(v) <= hi ? v as number : fastCheckFails();
}

function fastCheckFails(): never {
  throw NOT_FAST;
}

/** A string the predicate accepts. */
function strWhere(ok: (s: string) => boolean): Shape<string> {
  return (v) => typeof v === "string" && ok(v) ? v : fastCheckFails();
}

const PORT = intIn(1, 65535);
const POSITIVE = int(1);
const PORT_MAPPING = strict({
  hostPort: PORT,
  containerPort: PORT,
  protocol: { optional: strWhere((p) => ["tcp", "udp", "sctp"].includes(p.toLowerCase())) },
  hostIP: { optional: strWhere((ip) => ip === "" || fastCheck(ipAddress, ip) !== undefined) },
});
const BANDWIDTH_KEYS = strict({
  ingressRate: { optional: POSITIVE },
  ingressBurst: { optional: POSITIVE },
  egressRate: { optional: POSITIVE },
  egressBurst: { optional: POSITIVE },
});
const BANDWIDTH: Shape<Record<string, unknown>> = (v) => {
  const b = BANDWIDTH_KEYS(v);
  if (Object.keys(b).length === 0) fastCheckFails();
  if (b.ingressBurst !== undefined && b.ingressRate === undefined) fastCheckFails();
  if (b.egressBurst !== undefined && b.egressRate === undefined) fastCheckFails();
  return b;
};
const nonEmpty = <T>(shape: Shape<T[]>): Shape<T[]> => (v) => {
  const a = shape(v);
  return a.length > 0 ? a : fastCheckFails();
};
const ELEMENT_KEYS = strict({
  name: strWhere((n) => n !== "" && isDns1123Subdomain(n)),
  namespace: { optional: strWhere((n) => n === "" || isDns1123Label(n)) },
  ips: { optional: nonEmpty(array((v) => fastCheck(ipAddress, v) ?? ipPrefix(v))) },
  mac: { optional: strWhere((m) => MAC_48.test(m)) },
  interface: { optional: strWhere(isValidInterfaceName) },
  "cni-args": { optional: record(unknown) },
  portMappings: { optional: nonEmpty(array(PORT_MAPPING)) },
  bandwidth: { optional: BANDWIDTH },
  "default-route": { optional: array(ipAddress) },
  "infiniband-guid": { optional: strWhere((g) => GUID_64.test(g)) },
  "ipam-claim-reference": { optional: strWhere(isDns1123Subdomain) },
});

/**
 * The fast twin of selection_schema.ts's element schema (conservative: lib/util/shape.ts);
 * the fuzz target `selectionshape` asserts zod accepts, with a deep-equal value, what it
 * accepts.
 */
export const FAST_ELEMENT: (value: unknown) => Record<string, unknown> = (
  v,
): Record<string, unknown> => {
  const e = ELEMENT_KEYS(v);
  if (e.ips !== undefined && e["ipam-claim-reference"] !== undefined) fastCheckFails();
  return e;
};
