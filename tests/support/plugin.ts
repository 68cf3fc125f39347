/**
 * Runs the plugin as a real process, exactly as a container runtime does: the
 * `scripts/manifold` launcher (same permissions as the binary), CNI_* in the environment,
 * the config on stdin, result or error JSON on stdout.
 *
 * @module
 */

/**
 * Path of the launcher used as the plugin binary in tests: this tree's `scripts/manifold`, or
 * `MANIFOLD_TEST_PLUGIN` (an absolute path: another tree's launcher, e.g. one with a pack,
 * scripts/pack.ts; scripts/test.sh runs the plugin tests once more that way).
 */
export const MANIFOLD = Deno.env.get("MANIFOLD_TEST_PLUGIN") ||
  new URL("../../scripts/manifold", import.meta.url).pathname;

/** One plugin invocation. */
export interface PluginCall {
  command: "ADD" | "DEL" | "CHECK" | "GC" | "STATUS" | "VERSION";
  config: Record<string, unknown> | string;
  containerId?: string;
  netns?: string;
  ifName?: string;
  args?: string;
  path?: string;
  /** Extra environment (e.g. test hooks); PATH is kept short like a runtime's. */
  env?: Record<string, string>;
  /** Leave out these CNI_* variables entirely. */
  omit?: string[];
  /** Command prefix the plugin runs under, e.g. `["/usr/bin/time", "-f", "%M", "-o", file]`. */
  launcher?: string[];
  /** The plugin executable; default {@link MANIFOLD} (the conformance suite runs any plugin). */
  plugin?: string;
  /** Told of the spawned process (e.g. to kill it mid-call, as a runtime's timeout does). */
  onSpawn?: (child: Deno.ChildProcess) => void;
}

/** What the process did. */
export interface PluginOutcome {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON, when it is JSON. */
  json?: Record<string, unknown>;
  ms: number;
}

/** Invokes the plugin process and collects its output. */
export async function runPlugin(call: PluginCall): Promise<PluginOutcome> {
  const env: Record<string, string> = {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    CNI_COMMAND: call.command,
    CNI_CONTAINERID: call.containerId ?? "",
    CNI_NETNS: call.netns ?? "",
    CNI_IFNAME: call.ifName ?? "eth0",
    CNI_ARGS: call.args ?? "",
    CNI_PATH: call.path ?? "/usr/lib/cni",
    ...call.env,
  };
  for (const k of call.omit ?? []) delete env[k];
  const stdin = typeof call.config === "string" ? call.config : JSON.stringify(call.config);
  const started = performance.now();
  const [cmd, ...args] = [...(call.launcher ?? []), call.plugin ?? MANIFOLD];
  const child = new Deno.Command(cmd, {
    args,
    clearEnv: true,
    env,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  call.onSpawn?.(child);
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(stdin)).catch(() => {}); // killed before reading
  await w.close().catch(() => {});
  const out = await child.output();
  const ms = performance.now() - started;
  const dec = new TextDecoder();
  const stdout = dec.decode(out.stdout);
  let json: Record<string, unknown> | undefined;
  try {
    json = stdout.trim() ? JSON.parse(stdout) : undefined;
  } catch { /* not JSON: asserted by the caller */ }
  return { code: out.code, stdout, stderr: dec.decode(out.stderr), json, ms };
}

/** K8S CNI_ARGS as containerd sends them. */
export function k8sArgs(ns: string, pod: string, containerId: string, uid = ""): string {
  return [
    "IgnoreUnknown=1",
    `K8S_POD_NAMESPACE=${ns}`,
    `K8S_POD_NAME=${pod}`,
    `K8S_POD_INFRA_CONTAINER_ID=${containerId}`,
    ...(uid ? [`K8S_POD_UID=${uid}`] : []),
  ].join(";");
}
