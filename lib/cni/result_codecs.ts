/**
 * The codecs of CNI results, one per family (see lib/cni/result.ts): a decoder into the
 * normalized 1.x shape and an encoder back, in ONE registry ({@link CODECS}, like libcni's
 * `pkg/types/internal/convert.go`). Results are validated by fast checks
 * ({@link FAST_RESULT_SHAPES}) and, for what those do not accept, by the zod schemas of
 * lib/cni/result_schemas.ts — which this module does not load (issue 30: the per-call path
 * loads zod only for such a result, through {@link withResultSchemas}).
 *
 * Sources: CNI SPEC 0.2.0/0.3.0/1.1 "Result", libcni `types/020`, `types/040`, `types/100`.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { CniError, CniErrorCode } from "./errors.ts";
import type { CniDns, CniInterface, CniIpConfig, CniResult, CniRoute } from "./types.ts";
import type { resultFamily } from "./version.ts";
import {
  array,
  fastCheck,
  int,
  ipAddress as ip,
  ipPrefix as cidr,
  loose,
  nullish,
  oneOf,
  type Shape,
  str,
} from "../util/shape.ts";

/** A result family (see lib/cni/version.ts `resultFamily`). */
export type ResultFamily = ReturnType<typeof resultFamily>;

/**
 * The reference validation (zod, lib/cni/result_schemas.ts), once that module is loaded:
 * returns zod's output or throws CniError code 6 with zod's issues.
 */
type Reference = (family: ResultFamily, raw: unknown, version: string) => unknown;
let reference: Reference | undefined;

/**
 * Registers the reference validation; lib/cni/result_schemas.ts calls it when it loads.
 * @param validate zod's validation of a raw result.
 */
export function registerResultReference(validate: Reference): void {
  reference = validate;
}

/**
 * Thrown by a codec when a result needs the zod schemas and they are not loaded: catch it with
 * {@link withResultSchemas}, which loads them and runs the (pure) call again.
 */
export const RESULT_SCHEMAS_NEEDED: unique symbol = Symbol("result schemas not loaded");

/**
 * Runs a pure, synchronous result operation; when it needs the zod schemas (a result the fast
 * checks do not accept), loads them (lib/cni/result_schemas.ts) and runs it again, so zod
 * decides and words the error exactly as before.
 * @param op the operation (no side effects before it validates).
 * @returns what `op` returns.
 * @throws what `op` throws once the schemas are loaded (CniError code 6/1).
 * @example
 * ```ts
 * const decoded = await withResultSchemas(() => decodeResult(raw));
 * ```
 */
export async function withResultSchemas<T>(op: () => T): Promise<T> {
  try {
    return op();
  } catch (e) {
    if (e !== RESULT_SCHEMAS_NEEDED) throw e;
  }
  await lazyImport<typeof import("./result_schemas.ts")>("./result_schemas.ts", import.meta.url);
  return op();
}

const uint = int(0);
const DNS = loose({
  nameservers: nullish(array(str)),
  domain: nullish(str),
  search: nullish(array(str)),
  options: nullish(array(str)),
});
const LEGACY_IP = loose({
  ip: cidr,
  gateway: nullish(ip),
  routes: nullish(array(loose({ dst: cidr, gw: nullish(ip) }))),
});
const ROUTE = loose({
  dst: cidr,
  gw: nullish(ip),
  mtu: nullish(uint),
  advmss: nullish(uint),
  priority: nullish(uint),
  table: nullish(uint),
  scope: nullish(uint),
});
const INTERFACE = loose({
  name: str,
  mac: nullish(str),
  mtu: nullish(uint),
  sandbox: nullish(str),
  socketPath: nullish(str),
  pciID: nullish(str),
});
const V1_IP = { address: cidr, gateway: nullish(ip), interface: nullish(int()) };
const v1Result = (ipShape: Shape<unknown>) =>
  loose({
    interfaces: nullish(array(INTERFACE)),
    ips: nullish(array(ipShape)),
    routes: nullish(array(ROUTE)),
    dns: nullish(DNS),
  });

/**
 * The fast twins of lib/cni/result_schemas.ts's schemas (conservative: see lib/util/shape.ts);
 * the fuzz target `resultshape` asserts zod accepts, with a deep-equal value, what they accept.
 */
export const FAST_RESULT_SHAPES: Record<ResultFamily, Shape<unknown>> = {
  legacy: loose({ ip4: nullish(LEGACY_IP), ip6: nullish(LEGACY_IP), dns: nullish(DNS) }),
  current: v1Result(loose({ ...V1_IP, version: nullish(oneOf("4", "6")) })),
  v1: v1Result(loose(V1_IP)),
};

/** Decodes one family's raw JSON into the normalized shape / encodes it back. */
export interface ResultCodec {
  /** Validates (fast check, else zod: code 6) and normalizes a raw result of the family. */
  decode(raw: Record<string, unknown>, version: string): CniResult;
  /** Builds the family's raw JSON in `version` (code 1 when it cannot hold the result). */
  encode(result: CniResult, version: string): Record<string, unknown>;
}

/** The one registry: every conversion is `decode(from family)` → `encode(to family)`. */
export const CODECS: Record<ResultFamily, ResultCodec> = {
  legacy: { decode: decodeLegacy, encode: encodeLegacy },
  current: { decode: decodeWith("current"), encode: encodeCurrent },
  v1: { decode: decodeWith("v1"), encode: encodeV1 },
};

/**
 * Validates a raw result of `family`: the fast check, else zod (loaded: its output or its
 * CniError code 6; not loaded: {@link RESULT_SCHEMAS_NEEDED}).
 */
function validate<T>(family: ResultFamily, raw: unknown, version: string): T {
  const fast = fastCheck(FAST_RESULT_SHAPES[family], raw);
  if (fast !== undefined) return fast as T;
  if (!reference) throw RESULT_SCHEMAS_NEEDED;
  return reference(family, raw, version) as T;
}

/* ---------- decoders ---------- */

function decodeLegacy(raw: Record<string, unknown>, version: string): CniResult {
  const r = validate<LegacyResult>("legacy", raw, version);
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
function decodeWith(family: "current" | "v1") {
  return (raw: Record<string, unknown>, version: string): CniResult => {
    const r = validate<V1Result>(family, raw, version);
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

/** A validated 0.1.0/0.2.0 result (zod's output). */
interface LegacyResult {
  ip4?: LegacyIp | null;
  ip6?: LegacyIp | null;
  dns?: Nullish<CniDns> | null;
}
interface LegacyIp {
  ip: string;
  gateway?: string | null;
  routes?: { dst: string; gw?: string | null }[] | null;
}
/** A validated 0.3.x/0.4.0/1.x result (zod's output). */
interface V1Result {
  interfaces?: (Nullish<CniInterface> & { name: string })[] | null;
  ips?: (Nullish<CniIpConfig> & { address: string })[] | null;
  routes?: (Nullish<CniRoute> & { dst: string })[] | null;
  dns?: Nullish<CniDns> | null;
}

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
