/**
 * The zod schema of one element of the `k8s.v1.cni.cncf.io/networks` annotation (NPWG v1.3
 * §4.1.2.1), built on first use: the reference that lib/multinet/plan/selection_parse.ts's
 * fast check must agree with. Loading this module registers it there
 * ({@link registerSelectionReference}): lib/multinet/plan/selection.ts loads it at once; the
 * per-call path only for an element the fast check does not accept (issue 30).
 *
 * @module
 */

import { z } from "zod";
import { tuneZod } from "../../cni/decode.ts";
import {
  INTERFACE_RULE,
  isDns1123Label,
  isDns1123Subdomain,
  isValidInterfaceName,
  NAME_RULE,
  NAMESPACE_RULE,
} from "./network_reference.ts";
import { registerSelectionReference } from "./selection_parse.ts";
import { GUID_64, MAC_48 } from "./selection_fast.ts";

tuneZod(z);

let schemas: ReturnType<typeof buildSchemas> | undefined;
/**
 * The schemas (built on first use).
 * @returns `ipOrCidr` (an address with an optional prefix) and `element` (one element's spec keys).
 */
export function selectionSchemas(): ReturnType<typeof buildSchemas> {
  return schemas ??= buildSchemas();
}

/** zod `error` option: "required" when the key is missing, else `msg`. */
function requiredOr(msg: string) {
  return (issue: { input?: unknown }) => issue.input === undefined ? "required" : msg;
}

/** The zod schema of the spec keys of one element (NPWG v1.3 §4.1.2.1) and its parts. */
function buildSchemas() {
  const ipAddress = z.union([z.ipv4(), z.ipv6()]);
  const ipOrCidr = z.union([z.ipv4(), z.ipv6(), z.cidrv4(), z.cidrv6()]);
  const positiveInt = (what: string) =>
    z.int({ error: `not a positive integer ${what}` }).min(1, {
      error: `not a positive integer ${what}`,
    });

  const port = () =>
    z.int({ error: requiredOr("not an integer port") })
      .min(1, { error: "not a port between 1 and 65535" })
      .max(65535, { error: "not a port between 1 and 65535" });

  const portMappingSchema = z.strictObject({
    hostPort: port(),
    containerPort: port(),
    protocol: z.string({ error: "not a string" }).refine(
      (p) => ["tcp", "udp", "sctp"].includes(p.toLowerCase()),
      { error: "not one of TCP, UDP or SCTP (case-insensitive)" },
    ).optional(),
    hostIP: z.string({ error: "not a string" }).refine(
      (ip) => ip === "" || ipAddress.safeParse(ip).success,
      { error: "not an IPv4 or IPv6 address" },
    ).optional(),
  }, { error: (i) => i.code === "unrecognized_keys" ? "unknown key" : "not an object" });

  const bandwidthSchema = z.strictObject({
    ingressRate: positiveInt("(bits/s)").optional(),
    ingressBurst: positiveInt("(bits)").optional(),
    egressRate: positiveInt("(bits/s)").optional(),
    egressBurst: positiveInt("(bits)").optional(),
  }, { error: (i) => i.code === "unrecognized_keys" ? "unknown key" : "not an object" })
    .superRefine((b, ctx) => {
      if (Object.keys(b).length === 0) {
        ctx.addIssue({ code: "custom", message: "must contain at least one rate or burst" });
      }
      if (b.ingressBurst !== undefined && b.ingressRate === undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["ingressBurst"],
          message: 'requires "ingressRate"',
        });
      }
      if (b.egressBurst !== undefined && b.egressRate === undefined) {
        ctx.addIssue({ code: "custom", path: ["egressBurst"], message: 'requires "egressRate"' });
      }
    });

  const elementSchema = z.strictObject({
    name: z.string({ error: requiredOr("not a string") }).refine(
      (n) => n !== "",
      { error: "required (empty)" },
    ).refine((n) => n === "" || isDns1123Subdomain(n), { error: NAME_RULE }),
    namespace: z.string({ error: "not a string" }).refine(
      (n) => n === "" || isDns1123Label(n),
      { error: NAMESPACE_RULE },
    ).optional(),
    ips: z.array(
      z.string({ error: "not a string" }).refine((ip: string) => ipOrCidr.safeParse(ip).success, {
        error: "not an IPv4 or IPv6 address with optional /prefix",
      }),
      { error: "not an array of strings" },
    ).min(1, { error: "must contain at least one address" }).optional(),
    mac: z.string({ error: "not a string" }).regex(MAC_48, {
      error: "not a 6-byte MAC address (xx:xx:xx:xx:xx:xx)",
    }).optional(),
    interface: z.string({ error: "not a string" }).refine(isValidInterfaceName, {
      error: INTERFACE_RULE,
    }).optional(),
    "cni-args": z.record(z.string(), z.unknown(), { error: "not a JSON object" }).optional(),
    portMappings: z.array(portMappingSchema, { error: "not an array" }).min(1, {
      error: "must contain at least one port mapping",
    }).optional(),
    bandwidth: bandwidthSchema.optional(),
    "default-route": z.array(
      z.string({ error: "not a string" }).refine((g) => ipAddress.safeParse(g).success, {
        error: "not an IPv4 or IPv6 gateway address",
      }),
      { error: "not an array of strings" },
    ).optional(),
    "infiniband-guid": z.string({ error: "not a string" }).regex(GUID_64, {
      error: "not an 8-byte InfiniBand GUID (xx:xx:xx:xx:xx:xx:xx:xx)",
    }).optional(),
    "ipam-claim-reference": z.string({ error: "not a string" }).refine(isDns1123Subdomain, {
      error: "not an IPAMClaim name (DNS-1123 subdomain)",
    }).optional(),
  }, {
    error: (i) =>
      i.code === "unrecognized_keys"
        ? 'reserved key not defined by NPWG v1.3 §4.1.2.1 (extension keys must use reverse-DNS names containing ".")'
        : "not a JSON object",
  }).superRefine((e, ctx) => {
    if (e.ips !== undefined && e["ipam-claim-reference"] !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["ipam-claim-reference"],
        message: 'must not be combined with "ips" (NPWG v1.3 §4.1.2.1.11)',
      });
    }
  });
  return { ipOrCidr, element: elementSchema };
}

registerSelectionReference((spec) => selectionSchemas().element.safeParse(spec));
