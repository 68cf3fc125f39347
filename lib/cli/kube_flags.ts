/**
 * `--kubeconfig PATH` and `--context NAME` for the subcommands people run (`explain`,
 * `doctor`, `inspect --pod`, `mirror`), as kubectl reads them: `--kubeconfig` names one file;
 * without it the `KUBECONFIG` variable's colon-separated list is merged (kubectl's rules, see
 * `loadKubeconfig`); `--context` picks a context instead of `current-context`. Without either
 * source each subcommand keeps its own default (Manifold's kubeconfig from its config, or the
 * in-cluster service account). `~/.kube/config` is not read: on a node the plugin's own
 * kubeconfig is the sensible default.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import type { KubeConnection } from "../k8s/connection.ts";
import { kubeconfigPaths } from "../k8s/kubeconfig/paths.ts";

/** `parseArgs` option specs of the two flags; spread them into a subcommand's `options`. */
export const KUBE_FLAG_OPTIONS = {
  kubeconfig: { type: "string" },
  context: { type: "string" },
} as const;

/**
 * The help text lines of the two flags, two-space indent, descriptions from `column`.
 * @param fallback what is used without either flag or `KUBECONFIG`
 * @param column where descriptions start (0-based); default 25
 * @returns three lines, each ending with a newline
 * @example kubeFlagsHelp("in-cluster").startsWith("  --kubeconfig PATH") // true
 */
export function kubeFlagsHelp(fallback: string, column = 25): string {
  const pad = (s: string) => s.padEnd(column);
  return `${
    pad("  --kubeconfig PATH")
  }kubeconfig to use (default: $KUBECONFIG, colon-separated,\n` +
    `${pad("")}else ${fallback})\n` +
    `${pad("  --context NAME")}kubeconfig context to use (default: its current-context)\n`;
}

/** The flags as given. */
export interface KubeFlags {
  /** `--kubeconfig`: one kubeconfig file. */
  kubeconfig?: string;
  /** `--context`: a context of the kubeconfig. */
  context?: string;
}

/**
 * Checks the parsed flag values.
 * @param values `parseArgs` values holding `kubeconfig` and `context`
 * @returns the flags
 * @throws Error (a usage error) when one is empty
 * @example kubeFlags({ context: "prod" }) // { context: "prod" }
 */
export function kubeFlags(values: { kubeconfig?: string; context?: string }): KubeFlags {
  const out: KubeFlags = {};
  for (const k of ["kubeconfig", "context"] as const) {
    const v = values[k];
    if (v === undefined) continue;
    if (v.trim() === "") throw new Error(`--${k} must not be empty`);
    out[k] = v;
  }
  return out;
}

/**
 * Whether the flags or the environment name a kubeconfig, i.e. whether
 * {@link kubeConnectionFromFlags} gives a connection.
 * @param flags the parsed flags
 * @param env the process environment (`KUBECONFIG`)
 * @returns true with `--kubeconfig`, `--context` or a non-empty `KUBECONFIG`
 */
export function kubeFlagsGiven(flags: KubeFlags, env: Record<string, string | undefined>): boolean {
  return flags.kubeconfig !== undefined || flags.context !== undefined ||
    kubeconfigPaths(env.KUBECONFIG).length > 0;
}

/**
 * The connection people asked for: `--kubeconfig`, else the merged `KUBECONFIG` list, with
 * `--context`. Loads lib/k8s only when there is something to load.
 *
 * @param flags the parsed flags
 * @param env the process environment (`KUBECONFIG`)
 * @param opts `runExec`: run an exec credential plugin now and return its token or certificate
 *   in place of `exec` (for callers that send requests themselves)
 * @returns the connection, or undefined when neither `--kubeconfig` nor `KUBECONFIG` is set
 *   (the subcommand's default applies)
 * @throws Error when `--context` is given without `--kubeconfig` or `KUBECONFIG`; the
 *   loader's `KubeError` (kind `"config"`) for an unusable kubeconfig or unknown context;
 *   `"credentials"` when `runExec` and the exec plugin fails
 */
export async function kubeConnectionFromFlags(
  flags: KubeFlags,
  env: Record<string, string | undefined>,
  opts: { runExec?: boolean } = {},
): Promise<KubeConnection | undefined> {
  const paths = flags.kubeconfig !== undefined ? flags.kubeconfig : kubeconfigPaths(env.KUBECONFIG);
  if (paths.length === 0) {
    if (flags.context !== undefined) {
      throw new Error("--context needs a kubeconfig: pass --kubeconfig or set KUBECONFIG");
    }
    return undefined;
  }
  const { loadKubeconfig } = await lazyImport<typeof import("../k8s/kubeconfig/load.ts")>(
    "../k8s/kubeconfig/load.ts",
    import.meta.url,
  );
  const conn = await loadKubeconfig(paths, { context: flags.context });
  if (!opts.runExec || !conn.exec) return conn;
  const { withExecCredential } = await lazyImport<typeof import("../k8s/exec_credential.ts")>(
    "../k8s/exec_credential.ts",
    import.meta.url,
  );
  return await withExecCredential(conn);
}

/** The live pod as the API knows it (see {@link livePod}). */
export interface LivePod {
  /** `metadata.uid`. */
  uid: string;
  /** `spec.nodeName`, when scheduled. */
  nodeName?: string;
}

/**
 * Reads a pod from the API people named (`--kubeconfig`/`KUBECONFIG`, `--context`), for tools
 * that work without an API and use it only to refine their answer (`inspect --pod`).
 *
 * @param pod the pod's namespace and name
 * @param opts the parsed flags, the process environment (`KUBECONFIG`), and `warn`, which
 *   receives the failure when the kubeconfig came from `KUBECONFIG` only: the tool then goes
 *   on without the API
 * @returns the pod's UID and node; undefined without a kubeconfig, or after `warn`
 * @throws with `--kubeconfig` or `--context` only: Error when the pod does not exist, the
 *   `KubeError` of an unusable kubeconfig or a failed request
 */
export async function livePod(
  pod: { namespace: string; name: string },
  opts: {
    flags: KubeFlags;
    env: Record<string, string | undefined>;
    warn: (e: unknown) => void;
  },
): Promise<LivePod | undefined> {
  const { isNotFound } = await lazyImport<typeof import("../k8s/errors.ts")>(
    "../k8s/errors.ts",
    import.meta.url,
  );
  let kube: import("../k8s/client.ts").KubeClient | undefined;
  try {
    const { flags, env } = opts;
    const connection = await kubeConnectionFromFlags(flags, env);
    if (!connection) return undefined;
    const { KubeClient } = await lazyImport<typeof import("../k8s/client.ts")>(
      "../k8s/client.ts",
      import.meta.url,
    );
    kube = new KubeClient({ connection, retries: 1, userAgent: "manifold-cli" });
    const p = await kube.getPod(pod.namespace, pod.name);
    const spec = p.raw.spec as { nodeName?: unknown } | undefined;
    const out: LivePod = { uid: p.metadata.uid ?? "" };
    if (typeof spec?.nodeName === "string") out.nodeName = spec.nodeName;
    return out;
  } catch (e) {
    const err = isNotFound(e)
      ? new Error(`pod ${pod.namespace}/${pod.name} does not exist in the API`)
      : e;
    if (opts.flags.kubeconfig !== undefined || opts.flags.context !== undefined) throw err;
    opts.warn(err);
    return undefined;
  } finally {
    kube?.close();
  }
}

/**
 * The kubectl habits every tool shares: `-o json|yaml` (`--output`; `--json` stays) and
 * `-n/--namespace` with the pod's name as the argument. Spread into `parseArgs` options.
 */
export const OUTPUT_FLAG_OPTIONS = {
  output: { type: "string", short: "o" },
  json: { type: "boolean" },
} as const;

/** How a tool prints its report: for people (`text`) or for tools. */
export type OutputFormat = "text" | "json" | "yaml";

/**
 * The output format the flags ask for.
 * @param values `parseArgs` values holding `output` and `json`
 * @returns `"text"` without either flag
 * @throws Error (a usage error) for another `-o` value, or `--json` with `-o yaml`
 * @example outputFormat({ output: "yaml" }) // "yaml"
 */
export function outputFormat(values: { output?: string; json?: boolean }): OutputFormat {
  const o = values.output;
  if (o !== undefined && o !== "json" && o !== "yaml") {
    throw new Error(`-o/--output must be json or yaml, got ${JSON.stringify(o)}`);
  }
  if (values.json && o === "yaml") throw new Error("--json cannot be used with -o yaml");
  return values.json ? "json" : o ?? "text";
}

/**
 * A report in the asked format: `text()` for people, else the value as JSON (2-space indent)
 * or YAML (the `yaml` package, loaded only then).
 * @param format from {@link outputFormat}
 * @param value the report (plain data)
 * @param text the text for people
 * @returns the output, ending with a newline
 */
export async function formatOutput(
  format: OutputFormat,
  value: unknown,
  text: () => string,
): Promise<string> {
  if (format === "json") return `${JSON.stringify(value, null, 2)}\n`;
  if (format === "yaml") {
    const { stringify } = await lazyImport<typeof import("yaml")>("yaml");
    return stringify(value);
  }
  return text();
}

/**
 * The pod a tool is asked about, kubectl's way (`explain web-0 -n prod`) or Manifold's
 * (`--pod prod/web-0`).
 * @param positionals the words left after the flags (at most one: the pod's name)
 * @param namespace `-n/--namespace`; default `"default"` as kubectl's
 * @param podFlag `--pod namespace/name`
 * @returns the pod, or undefined when neither form names one
 * @throws Error (a usage error) for both forms at once, more than one name, or a `--pod`
 *   that is not `namespace/name`
 * @example podArgument(["web-0"], "prod", undefined) // { namespace: "prod", name: "web-0" }
 */
export function podArgument(
  positionals: string[],
  namespace: string | undefined,
  podFlag: string | undefined,
): { namespace: string; name: string } | undefined {
  if (positionals.length > 1) {
    throw new Error(`one pod name expected, got ${JSON.stringify(positionals)}`);
  }
  if (positionals.length === 1) {
    if (podFlag !== undefined) throw new Error("give the pod as NAME -n NAMESPACE or as --pod");
    if (positionals[0].includes("/")) {
      throw new Error(`a pod name has no "/": use NAME -n NAMESPACE, got ${positionals[0]}`);
    }
    return { namespace: namespace || "default", name: positionals[0] };
  }
  if (podFlag === undefined) return undefined;
  const parts = podFlag.split("/");
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    throw new Error(`--pod must be namespace/name, got ${JSON.stringify(podFlag)}`);
  }
  return { namespace: parts[0], name: parts[1] };
}

/**
 * kubectl's default kubeconfig, for `kubectl manifold …` (main.ts sets
 * `MANIFOLD_KUBECTL_PLUGIN=1`): `~/.kube/config` when neither `--kubeconfig` nor `KUBECONFIG`
 * names one. As `manifold …` on a node the subcommands keep their own default.
 * @param flags the parsed flags
 * @param env the process environment (`MANIFOLD_KUBECTL_PLUGIN`, `KUBECONFIG`, `HOME`)
 * @returns the flags, with `kubeconfig` filled in for the kubectl plugin
 */
export function withKubectlDefaults(
  flags: KubeFlags,
  env: Record<string, string | undefined>,
): KubeFlags {
  if (env.MANIFOLD_KUBECTL_PLUGIN !== "1" || flags.kubeconfig !== undefined) return flags;
  if ((env.KUBECONFIG ?? "").split(":").some((p) => p !== "")) return flags;
  return env.HOME ? { ...flags, kubeconfig: `${env.HOME}/.kube/config` } : flags;
}
