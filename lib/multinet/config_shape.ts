/**
 * The shape check of Manifold's configuration (the stdin of the `manifold` binary):
 * lib/multinet/config_schema.ts's zod schema written out by hand, so a plugin call never loads
 * zod to read its config (issue 30). `parseManifoldConf` (lib/multinet/config.ts) applies
 * defaults and bounds on top.
 *
 * @module
 */

import { type ShapeIssue, zodReceived } from "../cni/decode.ts";
import { isPlainObject as isObject } from "../cni/netconf_checks.ts";

/** The kind of one key of Manifold's configuration (lib/multinet/config_schema.ts's zod type). */
type Kind =
  | "string"
  | "boolean"
  | "number"
  | "list" // a list of strings or one string (comma-separated)
  | "objects" // a list of JSON objects
  | "unknown" // checked later (logOptions: logOptionsIssues)
  | "flags" // an object of booleans
  | "object" // any JSON object
  | readonly string[]; // one of these strings

/** Every key Manifold reads, in the order of lib/multinet/config_schema.ts's schema. */
const KEYS: readonly (readonly [string, Kind, boolean?])[] = [
  ["cniVersion", "string", true],
  ["name", "string"],
  ["type", "string", true],
  ["clusterNetwork", "string"],
  ["defaultNetworks", "list"],
  ["delegates", "objects"],
  ["kubeconfig", "string"],
  ["confDir", "string"],
  ["cniDir", "string"],
  ["binDir", "string"],
  ["namespaceIsolation", "boolean"],
  ["globalNamespaces", "list"],
  ["systemNamespaces", "list"],
  ["multusNamespace", "string"],
  ["readinessindicatorfile", "string"],
  ["logLevel", "string"],
  ["logFile", "string"],
  ["logOptions", "unknown"],
  ["logToStderr", "boolean"],
  ["capabilities", "flags"],
  ["runtimeConfig", "object"],
  ["retryDeleteOnError", "boolean"],
  ["nadDir", "string"],
  ["nadMirrorDir", "string"],
  ["daemonSocket", "string"],
  ["daemonFallback", "boolean"],
  ["chrootDir", "string"],
  ["hotPlug", "boolean"],
  ["statusPublish", ["sync", "async"]],
  ["events", ["all", "warnings", "none"]],
  ["invalidNetworkSelection", ["fail", "ignore"]],
  ["podNetworkProvider", "string"],
  ["multiNetworkPolicy", "boolean"],
  ["policyNoSandboxGraceMs", "number"],
  ["delegateTimeoutMs", "number"],
  ["apiTimeoutMs", "number"],
  ["apiDeadlineMs", "number"],
  ["readinessTimeoutMs", "number"],
  ["podResourcesSocket", "string"],
  ["podResourcesTimeoutMs", "number"],
  ["deviceCheckpointFile", "string"],
  ["sysfsRoot", "string"],
  ["deviceInfoDir", "string"],
];
const KNOWN = new Set(KEYS.map(([k]) => k));

/** A copy of a JSON object as zod's `z.looseObject({})` makes it (`for…in`, assigned). */
function copied(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k in o) out[k] = o[k];
  return out;
}

/**
 * Checks one value against its kind; pushes zod's issues (paths under `key`) and returns the
 * value as zod outputs it.
 */
function checkValue(key: string, kind: Kind, v: unknown, issues: ShapeIssue[]): unknown {
  const wrong = (expected: string, path: (string | number)[] = [key]) => {
    issues.push({
      message: `Invalid input: expected ${expected}, received ${zodReceived(v)}`,
      path,
    });
    return undefined;
  };
  if (typeof kind !== "string") {
    if (typeof v === "string" && kind.includes(v)) return v;
    const one = kind.map((x) => JSON.stringify(x)).join("|");
    issues.push({ message: `Invalid option: expected one of ${one}`, path: [key] });
    return undefined;
  }
  switch (kind) {
    case "string":
      return typeof v === "string" ? v : wrong("string");
    case "boolean":
      return typeof v === "boolean" ? v : wrong("boolean");
    case "number":
      return typeof v === "number" && Number.isFinite(v) ? v : wrong("number");
    case "list":
      if (typeof v === "string") return v;
      if (Array.isArray(v) && v.every((x) => typeof x === "string")) return [...v];
      issues.push({ message: "Invalid input", path: [key] }); // zod: a union none matched
      return undefined;
    case "objects": {
      if (!Array.isArray(v)) return wrong("array");
      return v.map((o, i) => {
        if (isObject(o)) return copied(o);
        issues.push({
          message: `Invalid input: expected object, received ${zodReceived(o)}`,
          path: [key, i],
        });
        return undefined;
      });
    }
    case "unknown":
      return v;
    case "flags": {
      if (!isObject(v)) return wrong("record");
      const out: Record<string, unknown> = {};
      for (const k of Reflect.ownKeys(v) as string[]) {
        if (k === "__proto__") continue;
        const flag = v[k];
        if (typeof flag === "boolean") out[k] = flag;
        else {
          issues.push({
            message: `Invalid input: expected boolean, received ${zodReceived(flag)}`,
            path: [key, k],
          });
        }
      }
      return out;
    }
    case "object":
      if (!isObject(v)) return wrong("record");
      return copiedRecord(v);
  }
}

/** A record copy as zod's `z.record` makes it (every own key but `__proto__`, assigned). */
function copiedRecord(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of Reflect.ownKeys(o) as string[]) if (k !== "__proto__") out[k] = o[k];
  return out;
}

/** The configuration as its shape check returns it (before defaults; `parseManifoldConf` reads it). */
export interface ConfShape {
  cniVersion: string;
  name?: string;
  type: string;
  clusterNetwork?: string;
  defaultNetworks?: string | string[];
  delegates?: Record<string, unknown>[];
  kubeconfig?: string;
  confDir?: string;
  cniDir?: string;
  binDir?: string;
  namespaceIsolation?: boolean;
  globalNamespaces?: string | string[];
  systemNamespaces?: string | string[];
  multusNamespace?: string;
  readinessindicatorfile?: string;
  logLevel?: string;
  logFile?: string;
  logOptions?: unknown;
  logToStderr?: boolean;
  capabilities?: Record<string, boolean>;
  runtimeConfig?: Record<string, unknown>;
  retryDeleteOnError?: boolean;
  nadDir?: string;
  nadMirrorDir?: string;
  daemonSocket?: string;
  daemonFallback?: boolean;
  chrootDir?: string;
  hotPlug?: boolean;
  statusPublish?: "sync" | "async";
  events?: "all" | "warnings" | "none";
  invalidNetworkSelection?: "fail" | "ignore";
  podNetworkProvider?: string;
  multiNetworkPolicy?: boolean;
  policyNoSandboxGraceMs?: number;
  delegateTimeoutMs?: number;
  apiTimeoutMs?: number;
  apiDeadlineMs?: number;
  readinessTimeoutMs?: number;
  podResourcesSocket?: string;
  podResourcesTimeoutMs?: number;
  deviceCheckpointFile?: string;
  sysfsRoot?: string;
  deviceInfoDir?: string;
}

/** What {@link checkManifoldConfShape} returns: zod's `safeParse` result, in zod's shape. */
export type ManifoldConfShape =
  | { success: true; data: Record<string, unknown> }
  | { success: false; error: { issues: { message: string; path: (string | number)[] }[] } };

/**
 * The shape check of Manifold's configuration: lib/multinet/config_schema.ts's zod schema
 * written out by hand — the same acceptance, the same issues (message, path, order) and the
 * same output value (unknown keys kept, lists and objects copied as zod copies them) — so a
 * plugin call never loads zod to read its config (issue 30; zod is ≈ 72 modules, 460 KiB of
 * source). The fuzz target `manifoldconf` keeps the two agreeing.
 *
 * @param raw the parsed stdin JSON.
 * @returns `{success: true, data}` or `{success: false, error: {issues}}`, as zod's `safeParse`.
 * @example
 * ```ts
 * checkManifoldConfShape({ cniVersion: "1.0.0", type: "manifold" }).success; // true
 * checkManifoldConfShape({ cniVersion: 1, type: "manifold" }).success; // false
 * ```
 */
export function checkManifoldConfShape(raw: unknown): ManifoldConfShape {
  if (!isObject(raw)) {
    const message = `Invalid input: expected object, received ${zodReceived(raw)}`;
    return { success: false, error: { issues: [{ message, path: [] }] } };
  }
  const issues: ShapeIssue[] = [];
  const data: Record<string, unknown> = {};
  for (const [key, kind, required] of KEYS) {
    const v = raw[key];
    if (v === undefined) {
      if (required) checkValue(key, kind, v, issues);
      else if (key in raw) data[key] = undefined;
      continue;
    }
    const out = checkValue(key, kind, v, issues);
    if (out !== undefined) data[key] = out;
  }
  for (const key in raw) if (!KNOWN.has(key)) data[key] = raw[key];
  return issues.length > 0 ? { success: false, error: { issues } } : { success: true, data };
}
