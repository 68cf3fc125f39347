/**
 * CNI wire shapes, and the zod schemas of a network configuration list and of one plugin
 * configuration: the reference that lib/cni/netconf.ts's hand-written checks must match (the
 * fuzz target `netconf` compares them). The parser and the types live in netconf.ts (re-exported
 * here), which never loads zod: the per-call path imports it directly.
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode } from "./errors.ts";
import type { NetworkConfigChecks } from "./netconf.ts";
import { tuneZod } from "./decode.ts";

tuneZod(z);

export type {
  CniDns,
  CniInterface,
  CniIpConfig,
  CniResult,
  CniRoute,
  GcAttachment,
} from "./result_types.ts";
export {
  assertPluginType,
  DEFAULT_CONFIG_VERSION,
  isPlainObject,
  type NetworkConfigList,
  parseNetworkConfig,
  type ParseNetworkConfigOptions,
  validateNetworkName,
} from "./netconf.ts";

/**
 * The zod schemas of a configuration list and of one plugin configuration, built on first
 * use (`getSchemas`), never at module load: building zod schemas costs milliseconds.
 */
function buildSchemas() {
  const boolish = z.union([z.boolean(), z.string()]);

  const plugin = z.looseObject({
    type: z.string({ error: "plugin type must be a string" }),
    capabilities: z.record(z.string(), z.unknown()).optional(),
  });

  const list = z.looseObject({
    name: z.string({ error: "name must be a string" }).min(1, "name must not be empty"),
    cniVersion: z.string().optional(),
    cniVersions: z.array(z.string()).optional(),
    disableCheck: boolish.optional(),
    disableGC: boolish.optional(),
    plugins: z.array(z.unknown()).optional(),
  });
  return { plugin, list };
}

let schemas: ReturnType<typeof buildSchemas> | undefined;
function getSchemas(): ReturnType<typeof buildSchemas> {
  return schemas ??= buildSchemas();
}

/**
 * The reference shape checks of a network configuration: zod's, failing with CniError code 7
 * and zod's issues (the same code, msg and details as lib/cni/netconf.ts's
 * `NETWORK_CONFIG_CHECKS`, which `parseNetworkConfig` uses so that a call never loads zod for
 * it; the fuzz target `netconf` compares the two through `parseNetworkConfigWith`).
 */
export const NETWORK_CONFIG_ZOD_CHECKS: NetworkConfigChecks = {
  list(decoded, src) {
    const parsed = getSchemas().list.safeParse(decoded);
    if (!parsed.success) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        "invalid network config",
        `${z.prettifyError(parsed.error)}${src}`,
      );
    }
    return parsed.data;
  },
  plugin(p, where, src) {
    const r = getSchemas().plugin.safeParse(p);
    if (!r.success) {
      const missing = !("type" in p);
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        missing ? "missing plugin type" : "invalid plugin config",
        `${where}: ${z.prettifyError(r.error)}${src}`,
      );
    }
    return r.data;
  },
};
