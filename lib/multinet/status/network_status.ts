/**
 * Parsing the `k8s.v1.cni.cncf.io/network-status` annotation (NPWG v1.3 §5) with zod, for
 * CHECK, inspection, the daemon and tests; building and serialising it is
 * lib/multinet/status/network_status_build.ts (no zod: what an ADD runs), re-exported here.
 *
 * @module
 */

import { z } from "zod";
import { decodeJson, tuneZod } from "../../cni/decode.ts";
import type { NetworkStatus } from "../types.ts";
import { orderNetworkStatusKeys } from "./network_status_build.ts";

export {
  buildNetworkStatus,
  orderNetworkStatusKeys,
  serializeNetworkStatus,
  type StatusInput,
} from "./network_status_build.ts";

tuneZod(z);

/**
 * Builds the schema of {@link networkStatusListSchema}: a list of network-status entries
 * (NPWG v1.3 §5.3); reverse-DNS extension keys of an entry are kept.
 */
function buildNetworkStatusListSchema(): z.ZodType<NetworkStatus[], unknown> {
  /** A bare IPv4/IPv6 address or a CIDR; Multus writes bare addresses in `ips`. */
  const ipOrCidrSchema = z.union([z.ipv4(), z.ipv6(), z.cidrv4(), z.cidrv6()]);

  const networkStatusEntrySchema = z.looseObject({
    // Required (§5.3.1); Multus writes "" for a default conf without "name" (#656): accepted.
    name: z.string(),
    interface: z.string().optional(),
    ips: z.array(ipOrCidrSchema).optional(),
    mac: z.string().optional(),
    mtu: z.number().int().nonnegative().optional(),
    // Required by §5.3.6, but Multus omits it on non-default entries: absent = false.
    default: z.boolean().optional().default(false),
    dns: z.looseObject({
      nameservers: z.array(z.string()).optional(),
      domain: z.string().optional(),
      search: z.array(z.string()).optional(),
      options: z.array(z.string()).optional(),
    }).optional(),
    "device-info": z.looseObject({ type: z.string(), version: z.string() }).optional(),
    "default-route": z.array(z.string()).optional(),
    gateway: z.array(z.string()).optional(),
  });
  return z.array(networkStatusEntrySchema);
}

let builtNetworkStatusListSchema: z.ZodType<NetworkStatus[], unknown> | undefined;

/**
 * Zod schema of the whole `k8s.v1.cni.cncf.io/network-status` value: a list of entries
 * (NPWG v1.3 §5), used by {@link parseNetworkStatus}.
 * Tolerates Multus's output (bare IPs, missing `default` on non-default entries).
 *
 * Built on the first call and then shared (building zod schemas costs milliseconds, and most
 * processes never read a network-status).
 *
 * @returns the schema; the same object on every call.
 * @example
 * ```ts
 * networkStatusListSchema().safeParse([{ name: "ns/net1", interface: "net1" }]).success; // true
 * ```
 */
function networkStatusListSchema(): z.ZodType<NetworkStatus[], unknown> {
  return builtNetworkStatusListSchema ??= buildNetworkStatusListSchema();
}

/**
 * Parses a `k8s.v1.cni.cncf.io/network-status` value written by Manifold, Multus or another
 * writer (NPWG v1.3 §5), for CHECK, inspection and tests. Accepts bare or CIDR addresses in
 * `ips`; a missing `default` reads as `false`; extension keys are kept.
 *
 * @param text the annotation value (a JSON list of maps).
 * @returns the entries in their written order.
 * @throws {CniError} code 6 (decoding failure) when `text` is not JSON or not a list of valid
 *   entries; `details` holds the parser message or the prettified zod error.
 *
 * @example
 * ```ts
 * parseNetworkStatus('[{"name":"cbr0","interface":"eth0","ips":["10.244.1.73"],"default":true}]');
 * // [{name:"cbr0",interface:"eth0",ips:["10.244.1.73"],default:true}]
 * ```
 */
export function parseNetworkStatus(text: string): NetworkStatus[] {
  return decodeJson(text, networkStatusListSchema(), "network-status annotation").map(
    orderNetworkStatusKeys,
  );
}
