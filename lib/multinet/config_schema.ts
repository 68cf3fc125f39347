/**
 * The zod schema of Manifold's configuration (types only): the reference that
 * lib/multinet/config.ts's hand-written shape check ({@link checkManifoldConfShape} there)
 * must match — the same acceptance, the same issue text and the same value — so a plugin call
 * never loads zod to read its config (issue 30). The fuzz target `manifoldconf` compares them.
 *
 * @module
 */

import { z } from "zod";
import { tuneZod } from "../cni/decode.ts";

tuneZod(z);

/**
 * Builds the schema: one instance per leaf type shared by all keys (zod schemas are
 * immutable), no `.default()`/`.min()` wrappers — defaults, numeric bounds and non-empty paths
 * are applied by `parseManifoldConf`.
 * @returns the zod schema (a loose object: unknown keys are kept).
 */
export function buildManifoldConfSchema() {
  const str = z.string();
  const optStr = str.optional();
  const optBool = z.boolean().optional();
  const optNum = z.number().optional();
  const optList = z.union([z.array(str), str]).optional();
  return z.looseObject({
    cniVersion: str,
    name: optStr,
    type: str,
    clusterNetwork: optStr,
    defaultNetworks: optList,
    delegates: z.array(z.looseObject({})).optional(),
    kubeconfig: optStr,
    confDir: optStr,
    cniDir: optStr,
    binDir: optStr,
    namespaceIsolation: optBool,
    globalNamespaces: optList,
    systemNamespaces: optList,
    multusNamespace: optStr,
    readinessindicatorfile: optStr,
    logLevel: optStr,
    logFile: optStr,
    logOptions: z.unknown().optional(), // checked by logOptionsIssues (bounds, unknown keys)
    logToStderr: optBool,
    capabilities: z.record(str, z.boolean()).optional(),
    runtimeConfig: z.record(str, z.unknown()).optional(),
    retryDeleteOnError: optBool,
    nadDir: optStr,
    nadMirrorDir: optStr,
    daemonSocket: optStr,
    daemonFallback: z.boolean().optional(),
    chrootDir: optStr,
    hotPlug: z.boolean().optional(),
    statusPublish: z.enum(["sync", "async"]).optional(),
    events: z.enum(["all", "warnings", "none"]).optional(),
    invalidNetworkSelection: z.enum(["fail", "ignore"]).optional(),
    podNetworkProvider: optStr,
    multiNetworkPolicy: optBool,
    policyNoSandboxGraceMs: optNum,
    delegateTimeoutMs: optNum,
    apiTimeoutMs: optNum,
    apiDeadlineMs: optNum,
    readinessTimeoutMs: optNum,
    podResourcesSocket: optStr,
    podResourcesTimeoutMs: optNum,
    deviceCheckpointFile: optStr,
    sysfsRoot: optStr,
    deviceInfoDir: optStr,
  });
}
