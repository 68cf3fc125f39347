/**
 * Tests of lib/cli/install.ts (`manifold install`): flags, and the real process
 * (`deno run main.ts install …` as a child) for two installers racing on one node and for
 * SIGTERM cleanup. Every wait is bounded; children are killed in `finally`.
 */

import assert from "node:assert/strict";
import { INSTALL_USAGE, runInstall } from "../../lib/cli/install.ts";
import { nullLogger } from "../../lib/log/mod.ts";
import {
  fakeHost,
  flannelConflist,
  parseGenerated,
  readIf,
  tempFiles,
  waitFor,
} from "./fixtures.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

function io(env: Record<string, string> = {}) {
  const out = { stdout: "", stderr: "" };
  return {
    out,
    io: {
      stdout: (s: string) => void (out.stdout += s),
      stderr: (s: string) => void (out.stderr += s),
      env,
      execPath: "/usr/local/bin/deno",
      logger: nullLogger,
    },
  };
}

/** `manifold install …` as a child process, stderr (JSON log lines) piped. */
function spawnInstall(args: string[]) {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--no-check",
      "--cached-only",
      "--config",
      CONFIG,
      MAIN,
      "install",
      ...args,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    env: { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" },
  }).spawn();
}

async function finish(child: Deno.ChildProcess, timeoutMs: number) {
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, timeoutMs);
  try {
    const out = await child.output();
    const dec = new TextDecoder();
    return { code: out.code, signal: out.signal, stderr: dec.decode(out.stderr) };
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("install --help and usage errors", async () => {
  const a = io();
  assert.equal(await runInstall(["--help"], a.io), 0);
  assert.equal(a.out.stdout, INSTALL_USAGE);

  const cases: [string[], RegExp, Record<string, string>?][] = [
    [["--bogus"], /Unknown option/],
    [["--skip-binary-copy"], /no API server/],
    [[], /running from source .*pass --binary/, {
      KUBERNETES_SERVICE_HOST: "h",
      KUBERNETES_SERVICE_PORT: "1",
    }],
    [["--binary", "/b", "--skip-binary-copy", "--no-kubeconfig"], /cannot be used together/],
    [
      ["--skip-binary-copy", "--no-kubeconfig", "--kube-server", "https://x"],
      /--no-kubeconfig cannot/,
    ],
    [["--skip-binary-copy", "--no-kubeconfig", "--cni-conf-dir", "etc"], /absolute path/],
    [["--skip-binary-copy", "--no-kubeconfig", "--primary-config", "../x"], /plain file name/],
    [["--skip-binary-copy", "--no-kubeconfig", "--config-name", "00-m.conf"], /\.conflist/],
    [["--skip-binary-copy", "--no-kubeconfig", "--poll-interval-ms", "fast"], /integer/],
    [["--skip-binary-copy", "--no-kubeconfig", "--plugin-conf", "[1]"], /JSON object/],
    [["--skip-binary-copy", "--kube-server", "10.0.0.1"], /http\(s\) URL/],
    [["--skip-binary-copy", "--no-kubeconfig", "--daemon-socket", "m.sock"], /absolute path/],
    [["--skip-binary-copy", "--no-kubeconfig", "--no-daemon-fallback"], /needs --daemon-socket/],
  ];
  for (const [args, re, env] of cases) {
    const c = io(env);
    assert.equal(await runInstall(args, c.io), 2, args.join(" "));
    assert.match(c.out.stderr, re, args.join(" "));
    assert.match(c.out.stderr, /Try 'manifold install --help'/);
  }
});

Deno.test("install --once in-process: flags reach the generated config", async () => {
  const h = await fakeHost();
  try {
    await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
    const c = io({ KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" });
    const code = await runInstall([
      "--host-root",
      h.root,
      "--binary",
      h.binary,
      "--service-account-dir",
      h.saDir,
      "--once",
      "--log-level",
      "debug",
      "--cni-dir",
      "/var/lib/cni/manifold",
      "--namespace-isolation",
      "--global-namespaces",
      "shared,infra",
      "--readiness-indicator-file",
      "/etc/cni/net.d/10-flannel.conflist",
      "--plugin-conf",
      '{"defaultNetworks":["monitoring"],"apiTimeoutMs":3000}',
    ], c.io);
    assert.equal(code, 0, c.out.stderr);
    const { conf } = parseGenerated((await readIf(h.config))!);
    assert.equal(conf.logLevel, "debug");
    assert.equal(conf.cniDir, "/var/lib/cni/manifold");
    assert.equal(conf.namespaceIsolation, true);
    assert.deepEqual(conf.globalNamespaces, ["default", "shared", "infra"]);
    assert.deepEqual(conf.defaultNetworks, ["monitoring"]);
    assert.equal(conf.apiTimeoutMs, 3000);
    assert.equal(conf.readinessindicatorfile, "/etc/cni/net.d/10-flannel.conflist");
    const kc = JSON.parse((await readIf(`${h.confDir}/manifold.d/manifold.kubeconfig`))!);
    assert.equal(kc.clusters[0].cluster.server, "https://[fd00::1]:443");
    assert.ok(await readIf(`${h.binDir}/manifold`));
  } finally {
    await h.cleanup();
  }
});

Deno.test("install: a daemonSocket from --plugin-conf-file (deploy/'s ConfigMap) takes a non-default --cni-bin-dir as binDir", async () => {
  const h = await fakeHost();
  try {
    await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
    const file = `${h.root}/plugin-conf.json`;
    await Deno.writeTextFile(file, JSON.stringify({ daemonSocket: "/run/manifold/manifold.sock" }));
    const base = ["--host-root", h.root, "--skip-binary-copy", "--no-kubeconfig", "--once"];
    const c = io();
    const code = await runInstall([
      ...base,
      "--cni-bin-dir",
      "/srv/cni/bin",
      "--plugin-conf-file",
      file,
    ], c.io);
    assert.equal(code, 0, c.out.stderr);
    // The daemon runs delegates from binDir only: without it, from /opt/cni/bin.
    assert.equal(parseGenerated((await readIf(h.config))!).conf.binDir, "/srv/cni/bin");
  } finally {
    await h.cleanup();
  }
});

Deno.test("install --daemon-socket / --no-daemon-fallback reach the generated config", async () => {
  const h = await fakeHost();
  try {
    await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
    const base = ["--host-root", h.root, "--skip-binary-copy", "--no-kubeconfig", "--once"];
    const generated = async (extra: string[]) => {
      const c = io();
      assert.equal(await runInstall([...base, ...extra], c.io), 0, c.out.stderr);
      return parseGenerated((await readIf(h.config))!).list.plugins[0];
    };
    const plain = await generated([]);
    assert.ok(!("daemonSocket" in plain) && !("daemonFallback" in plain), "no daemon by default");
    const withDaemon = await generated(["--daemon-socket", "/run/manifold/manifold.sock"]);
    assert.equal(withDaemon.daemonSocket, "/run/manifold/manifold.sock");
    assert.ok(!("daemonFallback" in withDaemon), "fallback stays the plugin's default (on)");
    assert.ok(!("binDir" in withDaemon), "default bin dir: no binDir");
    // The daemon finds delegates only in binDir: a non-default --cni-bin-dir must reach it.
    const binDir = await generated([
      "--daemon-socket",
      "/run/manifold/manifold.sock",
      "--cni-bin-dir",
      "/var/lib/cni/bin",
    ]);
    assert.equal(binDir.binDir, "/var/lib/cni/bin");
    const ownBinDir = await generated([
      "--daemon-socket",
      "/run/manifold/manifold.sock",
      "--cni-bin-dir",
      "/var/lib/cni/bin",
      "--plugin-conf",
      '{"binDir":"/usr/libexec/cni"}',
    ]);
    assert.equal(ownBinDir.binDir, "/usr/libexec/cni", "--plugin-conf's binDir wins");
    const strict = await generated([
      "--daemon-socket",
      "/run/manifold/manifold.sock",
      "--no-daemon-fallback",
    ]);
    assert.equal(strict.daemonSocket, "/run/manifold/manifold.sock");
    assert.equal(strict.daemonFallback, false);
    // The flag wins over the same key in --plugin-conf, as the other single flags do.
    const both = await generated([
      "--plugin-conf",
      '{"daemonSocket":"/elsewhere.sock"}',
      "--daemon-socket",
      "/run/manifold/manifold.sock",
    ]);
    assert.equal(both.daemonSocket, "/run/manifold/manifold.sock");
  } finally {
    await h.cleanup();
  }
});

Deno.test("install --plugin-conf-file: deploy/'s ConfigMap file is the plugin entry's keys", async () => {
  const h = await fakeHost();
  try {
    await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
    const base = ["--host-root", h.root, "--skip-binary-copy", "--no-kubeconfig", "--once"];
    // The file deploy/35-configmap.yaml mounts, with its exact content.
    const { parse } = await import("yaml");
    const cm = parse(
      await Deno.readTextFile(new URL("../../deploy/35-configmap.yaml", import.meta.url)),
    );
    const file = `${h.root}/plugin-conf.json`;
    await Deno.writeTextFile(file, cm.data["plugin-conf.json"]);
    const c = io();
    assert.equal(await runInstall([...base, "--plugin-conf-file", file], c.io), 0, c.out.stderr);
    const plugin = parseGenerated((await readIf(h.config))!).list.plugins[0];
    for (const [k, v] of Object.entries(JSON.parse(cm.data["plugin-conf.json"]))) {
      assert.deepEqual(plugin[k], v, k);
    }
    // --plugin-conf keys win over the file's; a file that is not a JSON object is refused.
    const over = io();
    const args = [...base, "--plugin-conf-file", file, "--plugin-conf", '{"chrootDir":"/other"}'];
    assert.equal(await runInstall(args, over.io), 0, over.out.stderr);
    assert.equal(parseGenerated((await readIf(h.config))!).list.plugins[0].chrootDir, "/other");
    await Deno.writeTextFile(file, "[1]");
    const bad = io();
    assert.equal(await runInstall([...base, "--plugin-conf-file", file], bad.io), 2);
    assert.match(bad.out.stderr, /--plugin-conf-file .*plugin-conf\.json must be a JSON object/);
    const gone = io();
    assert.equal(await runInstall([...base, "--plugin-conf-file", `${file}.x`], gone.io), 2);
    assert.match(gone.out.stderr, /--plugin-conf-file .*plugin-conf\.json\.x: /);
  } finally {
    await h.cleanup();
  }
});

Deno.test("install in-process: stopped through the signal → exit 0", async () => {
  const h = await fakeHost();
  try {
    const ac = new AbortController();
    const c = io();
    const run = runInstall(
      ["--host-root", h.root, "--skip-binary-copy", "--no-kubeconfig", "--poll-interval-ms", "20"],
      { ...c.io, signal: ac.signal },
    );
    await new Promise((r) => setTimeout(r, 60));
    ac.abort();
    assert.equal(await run, 0);
    const t = io();
    assert.equal(
      await runInstall(
        [
          "--host-root",
          h.root,
          "--skip-binary-copy",
          "--no-kubeconfig",
          "--primary-timeout-ms",
          "50",
        ],
        t.io,
      ),
      1,
    );
    assert.match(t.out.stderr, /not ready within \d+ ms/);
  } finally {
    await h.cleanup();
  }
});

Deno.test("two installers racing on one node (processes): one complete config, no debris", async () => {
  const h = await fakeHost();
  const args = [
    "--host-root",
    h.root,
    "--binary",
    h.binary,
    "--service-account-dir",
    h.saDir,
    "--poll-interval-ms",
    "10",
    "--primary-timeout-ms",
    "20000",
    "--once",
  ];
  const a = spawnInstall(args);
  const b = spawnInstall(args);
  let stop = false;
  let reads = 0;
  // A runtime-like reader: whenever the config exists it is complete and valid.
  const reader = (async () => {
    while (!stop) {
      const t = await readIf(h.config);
      if (t !== undefined) {
        parseGenerated(t);
        reads++;
      }
      await new Promise((r) => setTimeout(r, 1));
    }
  })();
  try {
    await new Promise((r) => setTimeout(r, 300)); // both are waiting for the primary
    assert.equal(await readIf(h.config), undefined);
    await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
    const [ra, rb] = await Promise.all([finish(a, 20_000), finish(b, 20_000)]);
    assert.equal(ra.code, 0, ra.stderr);
    assert.equal(rb.code, 0, rb.stderr);
    stop = true;
    await reader;
    assert.ok(reads > 0);
    const { conf } = parseGenerated((await readIf(h.config))!);
    assert.equal(conf.clusterNetwork, "/etc/cni/net.d/10-flannel.conflist");
    assert.equal(await readIf(`${h.binDir}/manifold`), await readIf(h.binary));
    assert.deepEqual(await tempFiles(h.confDir), []);
    assert.deepEqual(await tempFiles(h.binDir), []);
    assert.deepEqual(await tempFiles(`${h.confDir}/manifold.d`), []);
  } finally {
    stop = true;
    await reader.catch(() => {});
    for (const c of [a, b]) {
      try {
        c.kill("SIGKILL");
      } catch { /* exited */ }
    }
    await Promise.allSettled([a.status, b.status]);
    await h.cleanup();
  }
});

Deno.test("SIGTERM: --cleanup-config-on-exit removes the config and exits 0; without it the config stays", async () => {
  const h = await fakeHost();
  await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
  const base = [
    "--host-root",
    h.root,
    "--binary",
    h.binary,
    "--service-account-dir",
    h.saDir,
    "--poll-interval-ms",
    "20",
  ];
  const children: Deno.ChildProcess[] = [];
  try {
    for (const cleanup of [true, false]) {
      const child = spawnInstall(cleanup ? [...base, "--cleanup-config-on-exit"] : base);
      children.push(child);
      await waitFor("config written by the child", () => readIf(h.config), 15_000);
      child.kill("SIGTERM");
      const r = await finish(child, 10_000);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /"msg":"installer finished"/);
      if (cleanup) {
        assert.equal(await readIf(h.config), undefined, "config removed on SIGTERM");
        assert.match(r.stderr, /removed 00-manifold\.conflist on exit/);
      } else {
        assert.ok(await readIf(h.config), "config kept without --cleanup-config-on-exit");
      }
    }
  } finally {
    for (const c of children) {
      try {
        c.kill("SIGKILL");
      } catch { /* exited */ }
      await c.status.catch(() => {});
    }
    await h.cleanup();
  }
});
