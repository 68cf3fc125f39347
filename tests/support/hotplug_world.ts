/**
 * The hot-plug tests' world (tests/daemon/hotplug*_test.ts): a {@link world} with
 * `"hotPlug": true` and a NAD whose chain fails its ADD (`bad-net`), a real `manifold daemon`
 * for it, and readers of what the pod shows (links, addresses, network-status, events).
 *
 * @module
 */

import { done, expectOk, NS, POD, podStatus, type World, world } from "./world.ts";
import { ipJson, rootTest } from "./netns.ts";
import { type DaemonProcess, startDaemon } from "./daemon.ts";
import { until } from "./wait.ts";

/** The selection annotation. */
export const NETS = "k8s.v1.cni.cncf.io/networks";
/** The node of the pod and of the daemon (`--node-name`). */
export const NODE = "node-a";

/**
 * A chained plugin (in binDir) whose ADD fails and whose DEL succeeds; each ADD appends its
 * time (`date +%s.%N`) to {@link failedAdds}' file.
 */
async function failingPlugin(w: World): Promise<void> {
  await Deno.writeTextFile(
    `${w.dirs.bin}/failing-plugin`,
    `#!/bin/sh\ncat >/dev/null\nif [ "$CNI_COMMAND" = ADD ]; then\n` +
      `  date +%s.%N >>${w.dirs.bin}/failing-plugin.adds\n` +
      `  echo '{"cniVersion":"1.0.0","code":11,"msg":"failing-plugin refuses ADD"}'\n  exit 1\nfi\n`,
    { mode: 0o755 },
  );
}

/** When `bad-net`'s failing plugin was asked to ADD, in seconds since the epoch. */
export async function failedAdds(w: World): Promise<number[]> {
  const text = await Deno.readTextFile(`${w.dirs.bin}/failing-plugin.adds`).catch(() => "");
  return text.split("\n").filter((l) => l.trim()).map(Number);
}

/**
 * A world on {@link NODE} with `"hotPlug": true` (and `conf`, default `"events": "all"`) and
 * the NAD `bad-net` (bridge on the secondary bridge, then `failing-plugin`).
 * @param networks the pod's selection annotation at creation, if any
 * @param conf plugin config keys over `{hotPlug: true, events: "all"}`; a key set to
 *   `undefined` is left out (its default applies)
 */
export async function hotPlugWorld(
  networks?: string,
  conf: Record<string, unknown> = {},
): Promise<World> {
  const merged: Record<string, unknown> = { hotPlug: true, events: "all", ...conf };
  for (const k of Object.keys(merged)) if (merged[k] === undefined) delete merged[k];
  const w = await world({
    nodeName: NODE,
    annotations: networks ? { [NETS]: networks } : {},
    conf: merged,
  });
  w.api.addNad({
    namespace: NS,
    name: "bad-net", // the chain's second plugin fails its ADD, after the bridge's succeeded
    config: JSON.stringify({
      cniVersion: "1.0.0",
      name: "bad-net",
      plugins: [
        {
          type: "bridge",
          bridge: w.br.sec,
          ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.3.0/24" },
        },
        { type: "failing-plugin" },
      ],
    }),
  });
  await failingPlugin(w);
  return w;
}

/**
 * Starts `manifold daemon --node-name node-a` for the world and waits for its pod watch.
 * @param w the world
 * @param env more environment of the daemon
 * @param flags more flags (e.g. `--metrics-address`)
 */
export async function startHotPlugDaemon(
  w: World,
  env: Record<string, string> = {},
  flags: string[] = [],
): Promise<DaemonProcess> {
  const d = await startDaemon(await w.scratch.dir(), w.conf, {
    flags: ["--node-name", NODE, ...flags],
    env: { CNI_PATH: "/usr/lib/cni", ...env },
  });
  await until(
    () => w.api.requests.some((r) => r.path === "/api/v1/pods" && r.query.includes("watch")),
    "the pod watch",
  );
  return d;
}

/** Kills the daemon (if any) and returns its stderr (printed with `HOTPLUG_TEST_DEBUG`). */
export async function stop(d: DaemonProcess | undefined): Promise<string> {
  if (!d) return "";
  d.kill("SIGKILL");
  const { stderr } = await d.exited();
  if (Deno.env.get("HOTPLUG_TEST_DEBUG")) console.error(stderr);
  return stderr;
}

/** Sets (or, with null, removes) the pod's selection annotation through the API. */
export function setNetworks(w: World, networks: string | null): void {
  w.api.patchPod(NS, POD, { metadata: { annotations: { [NETS]: networks } } });
}

/** The messages of the events with this reason the API received. */
export function events(w: World, reason: string): string[] {
  return w.api.events.filter((e) => e.reason === reason).map((e) => String(e.message));
}

/** The interfaces of the pod's network-status, in order. */
export function statusInterfaces(w: World): string[] {
  return podStatus(w).map((s) => String(s.interface));
}

/** The IPv4 addresses (`a.b.c.d/nn`) of an interface in the pod's netns. */
export async function addresses(w: World, ifName: string): Promise<string[]> {
  const [link] = await ipJson<{ addr_info: { local: string; prefixlen: number }[] }[]>(
    w.podNetns,
    "-4",
    "addr",
    "show",
    "dev",
    ifName,
  );
  return link.addr_info.map((a) => `${a.local}/${a.prefixlen}`);
}

/** The daemon of one {@link hotPlugTest}: started, restarted and stopped by the test. */
export interface HotPlugDaemon {
  /** The running daemon process, if one is running. */
  readonly process: DaemonProcess | undefined;
  /**
   * Starts the daemon (a running one is killed first) and waits for its pod watch.
   * @param env more environment of the daemon
   * @param flags more flags (e.g. `--metrics-address`)
   */
  start(env?: Record<string, string>, flags?: string[]): Promise<DaemonProcess>;
  /** SIGKILLs the daemon (if any) and returns its stderr. */
  stop(): Promise<string>;
}

/** Options of {@link hotPlugTest} and {@link withHotPlugDaemon}. */
export interface HotPlugTestOptions {
  /** The pod's selection annotation at the sandbox ADD. */
  networks?: string;
  /** More keys of Manifold's config (`undefined` removes a default such as `events`). */
  conf?: Record<string, unknown>;
  /**
   * Default true: the sandbox ADD runs and the daemon starts before the body. False: the body
   * does both itself (e.g. to add NADs first, or to start the daemon with other flags).
   */
  ready?: boolean;
}

/**
 * Runs `body` in a fresh hot-plug world with its daemon, and always cleans up: the daemon
 * killed, the world's netns, links, leases and API stand-in removed — also when `body` throws.
 *
 * @param body the test: the world and its daemon
 * @param opts the world and whether it is made ready first
 */
export async function withHotPlugDaemon(
  body: (w: World, daemon: HotPlugDaemon) => Promise<void>,
  opts: HotPlugTestOptions = {},
): Promise<void> {
  const w = await hotPlugWorld(opts.networks, opts.conf);
  let d: DaemonProcess | undefined;
  const daemon: HotPlugDaemon = {
    get process() {
      return d;
    },
    async start(env = {}, flags = []) {
      await stop(d);
      d = undefined;
      d = await startHotPlugDaemon(w, env, flags);
      return d;
    },
    async stop() {
      const stderr = await stop(d);
      d = undefined;
      return stderr;
    },
  };
  try {
    if (opts.ready !== false) {
      expectOk(await w.call("ADD"), "sandbox ADD");
      await daemon.start();
    }
    await body(w, daemon);
  } finally {
    await stop(d);
    await done(w);
  }
}

/**
 * Registers a hot-plug test: root only (real netns and delegates; skipped otherwise), with the
 * sanitizers off (the daemon process outlives single ops), run by {@link withHotPlugDaemon}.
 *
 * @param name the test's name
 * @param body the test: the world and its daemon
 * @param opts the world and whether it is made ready first
 */
export function hotPlugTest(
  name: string,
  body: (w: World, daemon: HotPlugDaemon) => Promise<void>,
  opts: HotPlugTestOptions = {},
): void {
  rootTest(name, () => withHotPlugDaemon(body, opts));
}
