/**
 * The zod schemas of CNI results, one per family (built on first use): the reference that the
 * fast checks of lib/cni/result_codecs.ts must agree with. Loading this module registers them
 * there ({@link registerResultReference}): lib/cni/result.ts loads it at once; the per-call
 * path (lib/cni/result_convert.ts) only when a fast check does not accept a result (issue 30).
 *
 * Sources: CNI SPEC 0.2.0/0.3.0/1.1 "Result", libcni `types/020`, `types/040`, `types/100`.
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode } from "./errors.ts";
import { tuneZod } from "./decode.ts";
import { registerResultReference, type ResultFamily } from "./result_codecs.ts";

tuneZod(z);

/**
 * Memoizes a schema builder. Result schemas are built on first use, one family at a time,
 * never at module load: building zod schemas costs milliseconds, and a
 * call that decodes only 1.x results should not pay for the 0.x families.
 */
function lazy<T>(build: () => T): () => T {
  let built: T | undefined;
  return () => built ??= build();
}

/** Pieces shared by every family. */
const parts = lazy(() => ({
  cidr: z.union([z.cidrv4(), z.cidrv6()], { error: "expected an address with prefix" }),
  ip: z.union([z.ipv4(), z.ipv6()], { error: "expected an IP address" }),
  uint: z.number().int().nonnegative(),
  dns: z.looseObject({
    nameservers: z.array(z.string()).nullish(),
    domain: z.string().nullish(),
    search: z.array(z.string()).nullish(),
    options: z.array(z.string()).nullish(),
  }),
}));

/** 0.1.0/0.2.0 (`ip4` / `ip6`). */
const legacySchema = lazy(() => {
  const { cidr, ip, dns } = parts();
  const legacyRouteSchema = z.looseObject({ dst: cidr, gw: ip.nullish() });
  const legacyIpSchema = z.looseObject({
    ip: cidr,
    gateway: ip.nullish(),
    routes: z.array(legacyRouteSchema).nullish(),
  });
  return z.looseObject({
    ip4: legacyIpSchema.nullish(),
    ip6: legacyIpSchema.nullish(),
    dns: dns.nullish(),
  });
});

/** 1.0.0/1.1.0, and the IP config that 0.3.x/0.4.0 extend. */
const v1Schemas = lazy(() => {
  const { cidr, ip, uint, dns } = parts();
  const routeSchema = z.looseObject({
    dst: cidr,
    gw: ip.nullish(),
    mtu: uint.nullish(),
    advmss: uint.nullish(),
    priority: uint.nullish(),
    table: uint.nullish(),
    scope: uint.nullish(),
  });
  const interfaceSchema = z.looseObject({
    name: z.string(),
    mac: z.string().nullish(),
    mtu: uint.nullish(),
    sandbox: z.string().nullish(),
    socketPath: z.string().nullish(),
    pciID: z.string().nullish(),
  });
  const v1IpSchema = z.looseObject({
    address: cidr,
    gateway: ip.nullish(),
    // Index into `interfaces`; negative means "no interface" (NPWG v1.3 §5.3.3.1 rule 2).
    interface: z.number().int().nullish(),
  });
  const v1Schema = z.looseObject({
    interfaces: z.array(interfaceSchema).nullish(),
    ips: z.array(v1IpSchema).nullish(),
    routes: z.array(routeSchema).nullish(),
    dns: dns.nullish(),
  });
  return { ip: v1IpSchema, result: v1Schema };
});
const v1Schema = () => v1Schemas().result;

/** 0.3.0/0.3.1/0.4.0: 1.x plus `ips[].version`. */
const currentSchema = lazy(() => {
  const { ip, result } = v1Schemas();
  const currentIpSchema = ip.extend({ version: z.enum(["4", "6"]).nullish() });
  return result.extend({ ips: z.array(currentIpSchema).nullish() });
});

/** The schema of each family. */
const SCHEMAS: Record<ResultFamily, () => z.ZodType> = {
  legacy: legacySchema,
  current: currentSchema,
  v1: v1Schema,
};

/**
 * Validates a raw result of `family` with zod.
 * @param family the result family.
 * @param raw the raw result.
 * @param version its `cniVersion` (named in the error).
 * @returns zod's output.
 * @throws {CniError} code 6 `invalid <version> result`, details: zod's issues.
 */
export function validateResultWithZod(
  family: ResultFamily,
  raw: unknown,
  version: string,
): unknown {
  const r = SCHEMAS[family]().safeParse(raw);
  if (!r.success) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `invalid ${version} result`,
      z.prettifyError(r.error),
    );
  }
  return r.data;
}

registerResultReference(validateResultWithZod);
