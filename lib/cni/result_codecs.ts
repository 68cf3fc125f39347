/**
 * The codecs of CNI results, one per family (see lib/cni/result.ts): zod schemas built on
 * first use, a decoder into the normalized 1.x shape and an encoder back, in ONE registry
 * ({@link CODECS}, like libcni's `pkg/types/internal/convert.go`).
 *
 * Sources: CNI SPEC 0.2.0/0.3.0/1.1 "Result", libcni `types/020`, `types/040`, `types/100`.
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode } from "./errors.ts";
import type { CniDns, CniInterface, CniIpConfig, CniResult, CniRoute } from "./types.ts";
import type { resultFamily } from "./version.ts";
import { tuneZod } from "./decode.ts";

tuneZod(z);

type Family = ReturnType<typeof resultFamily>;

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

/** Decodes one family's raw JSON into the normalized shape / encodes it back. */
export interface ResultCodec {
  /** Validates (zod, code 6) and normalizes a raw result of the family. */
  decode(raw: Record<string, unknown>, version: string): CniResult;
  /** Builds the family's raw JSON in `version` (code 1 when it cannot hold the result). */
  encode(result: CniResult, version: string): Record<string, unknown>;
}

/** The one registry: every conversion is `decode(from family)` → `encode(to family)`. */
export const CODECS: Record<Family, ResultCodec> = {
  legacy: { decode: decodeLegacy, encode: encodeLegacy },
  current: { decode: decodeWith(currentSchema), encode: encodeCurrent },
  v1: { decode: decodeWith(v1Schema), encode: encodeV1 },
};

function validate<T>(schema: z.ZodType<T>, raw: unknown, version: string): T {
  const r = schema.safeParse(raw);
  if (!r.success) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `invalid ${version} result`,
      z.prettifyError(r.error),
    );
  }
  return r.data;
}

/* ---------- decoders ---------- */

function decodeLegacy(raw: Record<string, unknown>, version: string): CniResult {
  const r = validate(legacySchema(), raw, version);
  const ips: CniIpConfig[] = [];
  const routes: CniRoute[] = [];
  for (const fam of [r.ip4, r.ip6]) {
    if (!fam) continue;
    ips.push(compact({ address: fam.ip, gateway: fam.gateway ?? undefined }));
    for (const rt of fam.routes ?? []) {
      routes.push(compact({ dst: rt.dst, gw: rt.gw ?? undefined }));
    }
  }
  return assemble(version, undefined, ips, routes, r.dns);
}

/**
 * Decodes a 0.3.x/0.4.0 or 1.x result: the two differ only in their schema (1.x has no
 * `ips[].version`, 1.1 adds interface fields), not in how fields map to {@link CniResult}.
 */
function decodeWith(schema: () => z.ZodType<z.infer<ReturnType<typeof v1Schema>>>) {
  return (raw: Record<string, unknown>, version: string): CniResult => {
    const r = validate(schema(), raw, version);
    return assemble(
      version,
      r.interfaces?.map(pickInterface),
      r.ips?.map(pickIp),
      r.routes?.map(pickRoute),
      r.dns,
    );
  };
}

type Nullish<T> = { [K in keyof T]?: T[K] | null };

function pickInterface(i: Nullish<CniInterface> & { name: string }): CniInterface {
  return compact({
    name: i.name,
    mac: i.mac ?? undefined,
    mtu: i.mtu ?? undefined,
    sandbox: i.sandbox ?? undefined,
    socketPath: i.socketPath ?? undefined,
    pciID: i.pciID ?? undefined,
  });
}

function pickIp(i: Nullish<CniIpConfig> & { address: string }): CniIpConfig {
  return compact({
    address: i.address,
    gateway: i.gateway ?? undefined,
    interface: i.interface ?? undefined,
  });
}

function pickRoute(r: Nullish<CniRoute> & { dst: string }): CniRoute {
  return compact({
    dst: r.dst,
    gw: r.gw ?? undefined,
    mtu: r.mtu ?? undefined,
    advmss: r.advmss ?? undefined,
    priority: r.priority ?? undefined,
    table: r.table ?? undefined,
    scope: r.scope ?? undefined,
  });
}

function pickDns(d: Nullish<CniDns> | null | undefined): CniDns | undefined {
  if (!d) return undefined;
  const out = compact({
    nameservers: d.nameservers?.length ? [...d.nameservers] : undefined,
    domain: d.domain || undefined,
    search: d.search?.length ? [...d.search] : undefined,
    options: d.options?.length ? [...d.options] : undefined,
  });
  return Object.keys(out).length ? out : undefined;
}

function assemble(
  cniVersion: string,
  interfaces: CniInterface[] | undefined,
  ips: CniIpConfig[] | undefined,
  routes: CniRoute[] | undefined,
  dns: Nullish<CniDns> | null | undefined,
): CniResult {
  const out: CniResult = { cniVersion };
  if (interfaces?.length) out.interfaces = interfaces;
  if (ips?.length) out.ips = ips;
  if (routes?.length) out.routes = routes;
  const d = pickDns(dns);
  if (d) out.dns = d;
  return out;
}

/* ---------- encoders ---------- */

function encodeV1(r: CniResult, version: string): Record<string, unknown> {
  const out: Record<string, unknown> = { cniVersion: version };
  if (r.interfaces?.length) out.interfaces = r.interfaces.map((i) => ({ ...i }));
  if (r.ips?.length) out.ips = r.ips.map((i) => ({ ...i }));
  if (r.routes?.length) out.routes = r.routes.map((rt) => ({ ...rt }));
  if (r.dns) out.dns = structuredClone(r.dns);
  return out;
}

function encodeCurrent(r: CniResult, version: string): Record<string, unknown> {
  const out: Record<string, unknown> = { cniVersion: version };
  if (r.interfaces?.length) {
    out.interfaces = r.interfaces.map((i) =>
      compact({ name: i.name, mac: i.mac, sandbox: i.sandbox })
    );
  }
  if (r.ips?.length) {
    out.ips = r.ips.map((i) =>
      compact({
        version: ipFamily(i.address),
        interface: i.interface,
        address: i.address,
        gateway: i.gateway,
      })
    );
  }
  if (r.routes?.length) out.routes = r.routes.map((rt) => ({ ...rt }));
  if (r.dns) out.dns = structuredClone(r.dns);
  return out;
}

function encodeLegacy(r: CniResult, version: string): Record<string, unknown> {
  const fams: Record<"4" | "6", Record<string, unknown> | undefined> = {
    "4": undefined,
    "6": undefined,
  };
  for (const i of r.ips ?? []) {
    const fam = ipFamily(i.address);
    if (fams[fam]) {
      throw new CniError(
        CniErrorCode.IncompatibleVersion,
        `cannot convert result to ${version}: more than one IPv${fam} address`,
        `${version} holds one address per IP family; result has ${
          (r.ips ?? []).map((x) => x.address).join(", ")
        }`,
      );
    }
    fams[fam] = compact({ ip: i.address, gateway: i.gateway });
  }
  if (!fams["4"] && !fams["6"]) {
    throw new CniError(
      CniErrorCode.IncompatibleVersion,
      `cannot convert result to ${version}: no IP addresses`,
    );
  }
  for (const rt of r.routes ?? []) {
    const fam = ipFamily(rt.dst);
    const target = fams[fam];
    if (!target) {
      throw new CniError(
        CniErrorCode.IncompatibleVersion,
        `cannot convert result to ${version}: route ${rt.dst} has no IPv${fam} address to attach to`,
      );
    }
    const routes = (target.routes ??= []) as Record<string, unknown>[];
    routes.push(compact({ dst: rt.dst, gw: rt.gw }));
  }
  const out: Record<string, unknown> = { cniVersion: version };
  if (fams["4"]) out.ip4 = fams["4"];
  if (fams["6"]) out.ip6 = fams["6"];
  if (r.dns) out.dns = structuredClone(r.dns);
  return out;
}

function ipFamily(addr: string): "4" | "6" {
  return addr.includes(":") ? "6" : "4";
}

/** Drops `undefined` values so JSON output matches Go's `omitempty`. */
function compact<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) {
    if (o[k] === undefined) delete o[k];
  }
  return o;
}
