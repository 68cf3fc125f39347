/**
 * Helpers for the fault-injection matrix (`tests/integration/faults_test.ts`): a
 * {@link world} per cniVersion with the three-network pod, fresh sandboxes (container IDs)
 * inside one world, wrapper delegates generated into the world's `binDir` (searched before
 * `CNI_PATH`), cache-record surgery, and the assertions every scenario ends with.
 *
 * Wrapper delegates are `/bin/sh` scripts; they print CNI errors as JSON on stdout with an
 * exit code of 1, exactly as a Go plugin built on `skel` does. Needs root (like `world`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { assertNoLeaks } from "./leaks.ts";
import { linkNames } from "./netns.ts";
import { k8sArgs, type PluginCall, type PluginOutcome } from "./plugin.ts";
import { done, expectOk, NS, POD, UID, type World, world } from "./world.ts";

/** The cniVersions of Manifold's own config the matrix runs (issue 6). */
export const FAULT_VERSIONS = ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] as const;

/**
 * The pod's selection (`k8s.v1.cni.cncf.io/networks`): `bridge-net` on `net1` (host-local
 * lease) and `macvlan-net` on `data0` with a static IP and MAC (NPWG v1.3 §4.1.2.1).
 */
export const SELECTION = JSON.stringify([
  { name: "bridge-net" },
  { name: "macvlan-net", interface: "data0", ips: ["10.240.3.7/24"], mac: "02:00:00:0a:f0:07" },
]);

/** Sandbox interfaces of the pod after a complete ADD, sorted (`lo` excluded). */
export const ATTACHED_INTERFACES = ["data0", "eth0", "net1"];

/** Status names of the two secondary attachments (NPWG v1.3 §5.3.1). */
export const BRIDGE_NET = `${NS}/bridge-net`;
/** Status name of the macvlan attachment. */
export const MACVLAN_NET = `${NS}/macvlan-net`;

/**
 * Retries of Manifold's Kubernetes client: the `KubeClient` default (`lib/k8s/client.ts`,
 * `retries ?? 3`), which `lib/multinet/wiring.ts` does not override.
 */
export const CLIENT_RETRIES = 3;

/**
 * Most requests one API call may send: the first attempt, {@link CLIENT_RETRIES} retries on
 * transient failures and the single re-try after a 401 (`lib/k8s/client.ts` module doc).
 */
export const MAX_ATTEMPTS_PER_CALL = CLIENT_RETRIES + 2;

/**
 * Most times one GET may reach the server: each attempt ({@link MAX_ATTEMPTS_PER_CALL}) may be
 * sent once more by the per-call plugin's HTTP/1.1 transport when the connection it was
 * pipelined on ends before its answer — a slow GET ahead of it timing out closes that
 * connection (`lib/k8s/http1/transport.ts`: an idempotent request is sent again once).
 */
export const MAX_GET_SENDS_PER_CALL = 2 * MAX_ATTEMPTS_PER_CALL;

/** A world for the matrix, with a private device-info dir and a scratch dir for wrapper state. */
export interface FaultWorld extends World {
  /** cniVersion of Manifold's config (delegates get 1.0.0 when it is 1.1.0). */
  version: string;
  /** Manifold's `deviceInfoDir`, a temp dir of this world (not the host's). */
  deviceInfoDir: string;
  /** A temp dir for wrapper state files. */
  stateDir: string;
}

/**
 * Builds a {@link world} whose pod selects {@link SELECTION}, with Manifold's `deviceInfoDir`
 * moved into a temp dir of the world (so the leak check looks only at this test's files).
 * Tear it down with {@link done}.
 * @param version cniVersion of Manifold's config, e.g. `"0.4.0"`.
 * @param conf extra Manifold config keys (e.g. `{ apiTimeoutMs: 300 }`).
 * @returns the world; `w.conf` is the object `w.call` sends, so later edits to it apply.
 */
export async function faultWorld(
  version: string,
  conf: Record<string, unknown> = {},
): Promise<FaultWorld> {
  const w = await world({
    cniVersion: version,
    annotations: { "k8s.v1.cni.cncf.io/networks": SELECTION },
    conf,
  });
  try {
    const deviceInfoDir = await w.scratch.dir("mft-devinfo-");
    const stateDir = await w.scratch.dir("mft-state-");
    w.conf.deviceInfoDir = deviceInfoDir;
    return Object.assign(w, { version, deviceInfoDir, stateDir });
  } catch (e) {
    await done(w);
    throw e;
  }
}

/** One sandbox of a world: its container ID, netns path and a `call` bound to them. */
export interface Sandbox {
  containerId: string;
  /** CNI_NETNS the runtime passes for it (a `/var/run/netns/…` path). */
  netnsPath: string;
  /** `ip netns` name of the sandbox's netns. */
  netnsName: string;
  /** Runs the plugin for this sandbox (CNI_CONTAINERID, CNI_NETNS, K8S_* args preset). */
  call(command: PluginCall["command"], extra?: Partial<PluginCall>): Promise<PluginOutcome>;
}

/**
 * A new sandbox of the world's pod: a fresh container ID (`<world id>s<n>`), in the world's
 * pod netns or in `netnsName` (a netns the caller created, e.g. with `w.scratch.netns`).
 * @param w the world.
 * @param tag distinguishes sandboxes of one world (alphanumeric).
 * @param netnsName `ip netns` name; default the world's pod netns.
 * @returns the sandbox.
 */
export function sandbox(w: World, tag: string, netnsName = w.podNetns): Sandbox {
  const containerId = `${w.containerId}s${tag}`;
  const netnsPath = `/var/run/netns/${netnsName}`;
  return {
    containerId,
    netnsPath,
    netnsName,
    call: (command, extra = {}) =>
      w.call(command, {
        containerId,
        netns: netnsPath,
        args: k8sArgs(NS, POD, containerId, UID),
        ...extra,
      }),
  };
}

/**
 * Asserts a successful ADD of the whole pod: exit 0, a result of the world's cniVersion, the
 * three interfaces in the sandbox, two host-local leases (default and `bridge-net`) and a
 * cache record with three `added` attachments — so a later clean leak check means teardown
 * really removed them.
 * @param w the world.
 * @param s the sandbox ADDed.
 * @param add the ADD outcome.
 */
export async function expectAttached(w: FaultWorld, s: Sandbox, add: PluginOutcome) {
  expectOk(add, `ADD ${s.containerId}`);
  assert.equal(add.json?.cniVersion, w.version);
  assert.deepEqual(await linkNames(s.netnsName), ATTACHED_INTERFACES);
  assert.equal((await leasesOf(w, s.containerId)).length, 2, "default + bridge-net leases");
  const record = await readRecord(w, s.containerId);
  assert.deepEqual(
    record.attachments.map((a) => [a.statusName, a.ifName, a.state]),
    [["cbr0", "eth0", "added"], [BRIDGE_NET, "net1", "added"], [MACVLAN_NET, "data0", "added"]],
  );
}

/**
 * host-local leases held by one container: `"<network>/<ip>"` for every lease file whose
 * content names `containerId` (host-local writes `<containerId>\r\n<ifName>`).
 * @param w the world (its IPAM dir).
 * @param containerId the container.
 * @returns the leases, sorted.
 */
export async function leasesOf(w: World, containerId: string): Promise<string[]> {
  const out: string[] = [];
  for (const lease of await w.leases()) {
    const text = await Deno.readTextFile(`${w.dirs.ipam}/${lease}`).catch(() => "");
    if (text.includes(containerId)) out.push(lease);
  }
  return out.sort();
}

/** The fields of a cache record the scenarios look at (`lib/multinet/cache/cache.ts` CacheRecord). */
export interface RecordView {
  schemaVersion: number;
  deletedAt?: string;
  attachments: { statusName: string; ifName: string; state: string }[];
}

/**
 * Path of a container's cache record for the runtime's interface: `<cniDir>/<containerId>@<ifName>.json`
 * (`lib/multinet/cache/cache.ts`).
 */
export function recordPath(w: World, containerId: string, ifName = "eth0"): string {
  return `${w.dirs.cache}/${containerId}@${ifName}.json`;
}

/**
 * Reads a container's cache record as JSON (no validation: the test checks what is there).
 * @throws Error when the file is missing or not JSON.
 */
export async function readRecord(
  w: World,
  containerId: string,
  ifName = "eth0",
): Promise<RecordView> {
  return JSON.parse(await Deno.readTextFile(recordPath(w, containerId, ifName))) as RecordView;
}

/** Ways to damage a cache record before DEL (scenario 3). */
export type CacheDamage = "missing" | "empty" | "truncated" | "unknown-schema";

/**
 * Damages a container's cache record: removes it, empties it, cuts it in the middle of the
 * JSON text, or rewrites it with `schemaVersion: 999`.
 * @param w the world.
 * @param containerId the container.
 * @param damage what to do.
 */
export async function damageRecord(
  w: World,
  containerId: string,
  damage: CacheDamage,
): Promise<void> {
  const path = recordPath(w, containerId);
  const text = await Deno.readTextFile(path);
  switch (damage) {
    case "missing":
      await Deno.remove(path);
      return;
    case "empty":
      await Deno.writeTextFile(path, "");
      return;
    case "truncated": {
      const cut = text.slice(0, Math.floor(text.length / 2));
      assert.throws(() => JSON.parse(cut), "the cut must leave invalid JSON");
      await Deno.writeTextFile(path, cut);
      return;
    }
    case "unknown-schema":
      await Deno.writeTextFile(
        path,
        JSON.stringify({ ...JSON.parse(text), schemaVersion: 999 }, null, 2),
      );
      return;
  }
}

/**
 * The leak check of the matrix ({@link assertNoLeaks}) over the world's IPAM dir, cache dir
 * and device-info dir, for the given sandboxes (their netns when it still exists).
 * @param w the world.
 * @param sandboxes the sandboxes whose traces must be gone.
 * @param what names the moment in the failure message.
 */
export async function expectNoLeaks(w: FaultWorld, sandboxes: Sandbox[], what: string) {
  const netns = new Set(sandboxes.map((s) => s.netnsName));
  for (const podNetns of netns) {
    await assertNoLeaks({
      containerIds: sandboxes.map((s) => s.containerId),
      podNetns,
      ipamDir: w.dirs.ipam,
      cacheDir: w.dirs.cache,
      deviceInfoDir: w.deviceInfoDir,
    }, what);
  }
}

/**
 * Asserts a failed plugin call: exit 1, one CNI error JSON line on stdout of the call's
 * cniVersion with `code`, and a `msg` matching every pattern.
 * @param w the world (its cniVersion).
 * @param r the outcome.
 * @param code the expected CNI code.
 * @param patterns what `msg` must match.
 * @returns the error's `msg` and `details`.
 */
export function expectCniError(
  w: FaultWorld,
  r: PluginOutcome,
  code: number,
  ...patterns: RegExp[]
): { msg: string; details: string } {
  assert.equal(r.code, 1, `expected a failure, got ${r.code}: ${r.stdout}`);
  assert.equal(r.stdout.trim().split("\n").length, 1, "only the error JSON on stdout");
  const err = r.json as { cniVersion?: string; code?: number; msg?: string; details?: string };
  assert.ok(err, `stdout is not JSON: ${r.stdout}`);
  assert.equal(err.code, code, `code in ${r.stdout}`);
  assert.equal(err.cniVersion, w.version);
  for (const p of patterns) assert.match(err.msg ?? "", p);
  return { msg: err.msg ?? "", details: err.details ?? "" };
}

/**
 * Replaces a NAD in the API stand-in with its config from the world where plugin `index`
 * (of a conflist, or the single plugin) gets `type`, e.g. to run a wrapper delegate.
 * @param w the world.
 * @param nad the NAD name (`"bridge-net"` or `"macvlan-net"`).
 * @param type the new plugin type (a binary name in `w.dirs.bin` or `CNI_PATH`).
 * @param index which plugin of a conflist; default 0.
 */
export function setDelegateType(w: World, nad: string, type: string, index = 0): void {
  const config = JSON.parse(w.nadConfigs[nad]) as Record<string, unknown> & {
    plugins?: Record<string, unknown>[];
  };
  if (config.plugins) config.plugins[index].type = type;
  else config.type = type;
  w.api.addNad({ namespace: NS, name: nad, config: JSON.stringify(config) });
}

/**
 * Writes an executable wrapper delegate `<w.dirs.bin>/<name>` (mode 0755).
 * @param w the world.
 * @param name the plugin type it serves.
 * @param script the shell script (see {@link execWrapper}, {@link failDelOnceWrapper},
 *   {@link failAddAfterWrapper}).
 * @returns its path.
 */
export async function installWrapper(w: World, name: string, script: string): Promise<string> {
  const path = `${w.dirs.bin}/${name}`;
  await Deno.writeTextFile(path, script, { mode: 0o755 });
  await Deno.chmod(path, 0o755);
  return path;
}

/** The real delegate binary a wrapper runs, e.g. `/usr/lib/cni/bridge`. */
export function realDelegate(type: string): string {
  return `/usr/lib/cni/${type}`;
}

/** A CNI error JSON line for `printf`, single-quote-safe (CNI SPEC "Error"). */
function errorLine(code: number, msg: string, details: string): string {
  const json = JSON.stringify({ cniVersion: "1.0.0", code, msg, details });
  assert.ok(!json.includes("'"), "no single quotes in injected errors");
  return json;
}

/**
 * A wrapper that only `exec`s the real delegate (stdin and environment unchanged).
 * @param target the real binary, e.g. `realDelegate("bridge")`.
 * @example execWrapper("/usr/lib/cni/bridge") // "#!/bin/sh\nexec /usr/lib/cni/bridge \"$@\"\n"
 */
export function execWrapper(target: string): string {
  return `#!/bin/sh\nexec ${target} "$@"\n`;
}

/**
 * A wrapper whose first DEL fails (CNI error `code`/`msg` on stdout, exit 1) and creates
 * `stateFile`; every later DEL, and every other command, runs the real delegate.
 * @param target the real binary.
 * @param stateFile marks that the failure happened.
 * @param code the CNI error code to print (≥ 100: plugin-specific, CNI SPEC "Error").
 * @param msg the error message.
 */
export function failDelOnceWrapper(
  target: string,
  stateFile: string,
  code: number,
  msg: string,
): string {
  return [
    "#!/bin/sh",
    `if [ "$CNI_COMMAND" = DEL ] && [ ! -e '${stateFile}' ]; then`,
    `  : > '${stateFile}'`,
    "  cat > /dev/null",
    `  printf '%s\\n' '${errorLine(code, msg, "injected by the fault matrix: fails once")}'`,
    "  exit 1",
    "fi",
    `exec ${target} "$@"`,
    "",
  ].join("\n");
}

/**
 * A wrapper whose ADD runs the real delegate ADD (so the interface and addresses exist) and
 * then fails with CNI error `code`/`msg` — a half-done ADD that rollback must undo. Other
 * commands run the real delegate.
 * @param target the real binary.
 * @param code the CNI error code to print.
 * @param msg the error message.
 */
export function failAddAfterWrapper(target: string, code: number, msg: string): string {
  return [
    "#!/bin/sh",
    'if [ "$CNI_COMMAND" = ADD ]; then',
    `  ${target} "$@" > /dev/null || exit $?`,
    `  printf '%s\\n' '${errorLine(code, msg, "injected by the fault matrix after a real ADD")}'`,
    "  exit 1",
    "fi",
    `exec ${target} "$@"`,
    "",
  ].join("\n");
}

/**
 * API requests other than event POSTs and `/version` warm-ups, in order.
 * @param w the world (its stand-in's request log).
 * @param from index in `w.api.requests` to start at; default 0.
 * @returns the requests as the stand-in saw them.
 */
export function apiCalls(w: World, from = 0) {
  return w.api.requests.slice(from).filter((r) =>
    !r.path.endsWith("/events") && r.path !== "/version"
  );
}
