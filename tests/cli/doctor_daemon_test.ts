/**
 * The `daemon` step of `manifold doctor` (lib/cli/doctor_daemon.ts) against a fake daemon: a
 * unix socket server in the test speaking the daemon protocol (4-byte big-endian length frames;
 * request `{"v":1,"env"}` + stdin, answer `{"code","stdout"}`), on a fake host root.
 */

import assert from "node:assert/strict";
import {
  daemonStep,
  type DoctorCheck,
  type DoctorContext,
  runDoctorChecks,
  runInstall,
} from "../../lib/cli/mod.ts";
import { nullLogger } from "../../lib/log/mod.ts";
import { fakeHost, flannelConflist } from "../install/fixtures.ts";
import { SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";
import { parseManifoldConf } from "../../lib/multinet/config.ts";

const SOCKET = "/run/manifold/manifold.sock";

interface Seen {
  header?: { v: number; env: Record<string, string> };
  stdin?: string;
}

async function readFrame(conn: Deno.Conn): Promise<Uint8Array> {
  const read = async (n: number) => {
    const out = new Uint8Array(n);
    for (let off = 0; off < n;) {
      const k = await conn.read(out.subarray(off));
      if (k === null) throw new Error("eof");
      off += k;
    }
    return out;
  };
  const len = new DataView((await read(4)).buffer).getUint32(0);
  return await read(len);
}

/** A fake daemon: answers each connection with `answer` (or never, when undefined). */
function fakeDaemon(path: string, answer: ((seen: Seen) => unknown) | undefined) {
  const listener = Deno.listen({ transport: "unix", path });
  const seen: Seen = {};
  const conns: Deno.Conn[] = [];
  const loop = (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      try {
        seen.header = JSON.parse(new TextDecoder().decode(await readFrame(conn)));
        seen.stdin = new TextDecoder().decode(await readFrame(conn));
        if (answer === undefined) continue; // hung: keeps the connection open
        const body = new TextEncoder().encode(JSON.stringify(answer(seen)));
        const out = new Uint8Array(4 + body.length);
        new DataView(out.buffer).setUint32(0, body.length);
        out.set(body, 4);
        await conn.write(out);
        conn.close();
      } catch { /* the client went away */ }
    }
  })();
  return {
    seen,
    async stop() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await loop;
    },
  };
}

async function fakeRoot(modes: { dir?: number } = {}) {
  const root = await Deno.makeTempDir({ prefix: "mfd" });
  await Deno.mkdir(`${root}/run/manifold`, { recursive: true });
  await Deno.chmod(`${root}/run/manifold`, modes.dir ?? 0o700);
  await Deno.mkdir(`${root}/opt/cni/bin`, { recursive: true });
  return root;
}

async function fakeBinary(root: string, release: string) {
  const p = `${root}/opt/cni/bin/manifold`;
  await Deno.writeTextFile(p, `#!/bin/sh\necho "manifold ${release} (CNI 0.1.0 … 1.1.0)"\n`);
  await Deno.chmod(p, 0o755);
}

async function runStep(root: string, conf: Record<string, unknown>): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  const ctx: DoctorContext = {
    options: { apiTimeoutMs: 400 },
    hostRoot: root,
    host: (p) => `${root}${p}`,
    confDir: "/etc/cni/net.d",
    binDir: "/opt/cni/bin",
    configName: "00-manifold.conflist",
    add: (name, status, message, hint) =>
      void checks.push({ name, status, message, ...(hint ? { hint } : {}) }),
    conf: parseManifoldConf({
      cniVersion: "1.0.0",
      name: "m",
      type: "manifold",
      clusterNetwork: "/etc/cni/net.d/10-primary.conflist",
      ...conf,
    }),
  };
  await daemonStep.run(ctx);
  return checks;
}

const statuses = (checks: DoctorCheck[]) => checks.map((c) => `${c.name}: ${c.status}`);
const versionDoc = (extra: Record<string, unknown> = {}) => ({
  code: 0,
  stdout: JSON.stringify({ cniVersion: "1.1.0", supportedVersions: SUPPORTED_VERSIONS, ...extra }),
});

Deno.test("doctor daemon: no daemonSocket in the config → no daemon checks", async () => {
  const root = await fakeRoot();
  try {
    assert.deepEqual(await runStep(root, {}), []);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("doctor daemon: socket absent → warn (fallback), fail with daemonFallback false", async () => {
  const root = await fakeRoot();
  try {
    const warn = await runStep(root, { daemonSocket: SOCKET });
    assert.deepEqual(statuses(warn), ["daemon socket: warn"]);
    assert.match(warn[0].message, /daemon not running; the plugin falls back in-process/);
    const fail = await runStep(root, { daemonSocket: SOCKET, daemonFallback: false });
    assert.deepEqual(statuses(fail), ["daemon socket: fail"]);
    assert.match(fail[0].message, /daemonFallback is false/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("doctor daemon: a healthy daemon answers VERSION; release compared with the binary", async () => {
  const root = await fakeRoot();
  await fakeBinary(root, "0.1.0");
  let release: string | undefined = "0.1.0";
  const d = fakeDaemon(
    `${root}${SOCKET}`,
    () => versionDoc(release === undefined ? {} : { manifoldVersion: release }),
  );
  try {
    await Deno.chmod(`${root}${SOCKET}`, 0o600);
    const ok = await runStep(root, { daemonSocket: SOCKET });
    assert.deepEqual(statuses(ok), ["daemon socket: ok", "daemon: ok", "daemon version: ok"]);
    assert.match(ok[2].message, /daemon 0\.1\.0 = binary 0\.1\.0/);
    // The request the probe sent, as the daemon protocol frames it.
    assert.equal(d.seen.header?.v, 1);
    assert.equal(d.seen.header?.env.CNI_COMMAND, "VERSION");
    assert.deepEqual(JSON.parse(d.seen.stdin!), { cniVersion: "1.1.0" });

    release = "0.0.9";
    const old = await runStep(root, { daemonSocket: SOCKET });
    assert.deepEqual(statuses(old), ["daemon socket: ok", "daemon: ok", "daemon version: warn"]);
    assert.match(old[2].message, /daemon 0\.0\.9, \/opt\/cni\/bin\/manifold 0\.1\.0/);

    release = undefined;
    const noRel = await runStep(root, { daemonSocket: SOCKET });
    assert.deepEqual(statuses(noRel), ["daemon socket: ok", "daemon: ok", "daemon version: ok"]);
    assert.match(noRel[2].message, /same CNI versions .*reports no release/);
  } finally {
    await d.stop();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("doctor daemon: loose socket or directory modes fail; an error answer fails", async () => {
  const root = await fakeRoot({ dir: 0o775 });
  const d = fakeDaemon(`${root}${SOCKET}`, () => ({ code: 1, stdout: '{"code":4,"msg":"x"}' }));
  try {
    await Deno.chmod(`${root}${SOCKET}`, 0o666);
    const checks = await runStep(root, { daemonSocket: SOCKET });
    assert.deepEqual(statuses(checks), ["daemon socket: fail", "daemon: fail"]);
    assert.match(
      checks[0].message,
      /mode 666, want 600; directory \/run\/manifold mode 775 is writable by its group or others/,
    );
    assert.match(checks[1].message, /VERSION answered code 1/);
  } finally {
    await d.stop();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("doctor daemon: a hung daemon fails within the bound; a stale socket falls back", async () => {
  const root = await fakeRoot();
  const d = fakeDaemon(`${root}${SOCKET}`, undefined);
  try {
    await Deno.chmod(`${root}${SOCKET}`, 0o600);
    const t0 = performance.now();
    const hung = await runStep(root, { daemonSocket: SOCKET });
    assert.ok(performance.now() - t0 < 3000);
    assert.deepEqual(statuses(hung), ["daemon socket: ok", "daemon: fail"]);
    assert.match(hung[1].message, /no answer within 400 ms/);
  } finally {
    await d.stop();
  }
  try {
    // A socket file nobody listens on (a daemon that died without cleaning up): bound by a
    // process that exits, so connections are refused.
    const bind = await new Deno.Command("python3", {
      args: [
        "-c",
        "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])",
        `${root}${SOCKET}`,
      ],
    }).output();
    assert.ok(bind.success);
    await Deno.chmod(`${root}${SOCKET}`, 0o600);
    assert.ok((await Deno.stat(`${root}${SOCKET}`)).isSocket);
    const stale = await runStep(root, { daemonSocket: SOCKET });
    assert.deepEqual(statuses(stale), ["daemon socket: ok", "daemon socket: warn"]);
    assert.match(stale[1].message, /refuses connections/);
    await Deno.remove(`${root}${SOCKET}`);
    await Deno.writeTextFile(`${root}${SOCKET}`, "");
    const file = await runStep(root, { daemonSocket: SOCKET });
    assert.deepEqual(statuses(file), ["daemon socket: fail"]);
    assert.match(file[0].message, /is not a socket/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("doctor daemon: wired into the doctor, from the config `manifold install --daemon-socket` writes", async () => {
  const h = await fakeHost();
  try {
    await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
    const args = ["--host-root", h.root, "--binary", h.binary, "--no-kubeconfig", "--once"];
    const quiet = { stdout: () => {}, stderr: () => {}, env: {}, logger: nullLogger };
    assert.equal(await runInstall(args, quiet), 0);
    const before = await runDoctorChecks({ hostRoot: h.root });
    assert.ok(!before.checks.some((c) => c.name.startsWith("daemon")), "no daemon configured");
    assert.equal(
      await runInstall([...args, "--daemon-socket", SOCKET, "--no-daemon-fallback"], quiet),
      0,
    );
    const after = await runDoctorChecks({ hostRoot: h.root });
    const daemon = after.checks.filter((c) => c.name.startsWith("daemon"));
    assert.deepEqual(statuses(daemon), ["daemon socket: fail"]);
    assert.match(daemon[0].message, /daemonFallback is false/);
  } finally {
    await h.cleanup();
  }
});
