/**
 * Tests of lib/install/installer.ts: the installer's lifecycle in a fake host root (temp
 * dir), polling every 15 ms. No root needed; every wait is bounded.
 * Run with `deno test -A tests/install/`.
 */

import assert from "node:assert/strict";
import {
  type InstallerOptions,
  InstallTimeoutError,
  runInstaller,
  underRoot,
} from "../../lib/install/mod.ts";
import { loadKubeconfig } from "../../lib/k8s/kubeconfig/mod.ts";
import type { Logger } from "../../lib/log/mod.ts";
import {
  type FakeHost,
  fakeHost,
  flannelConflist,
  parseGenerated,
  readIf,
  singleConf,
  tempFiles,
  waitFor,
} from "./fixtures.ts";

interface Line {
  level: string;
  msg: string;
  fields?: Record<string, unknown>;
}

function recordingLogger(lines: Line[]): Logger {
  const rec = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void lines.push({ level, msg, fields });
  const l: Logger = {
    debug: rec("debug"),
    info: rec("info"),
    warn: rec("warn"),
    error: rec("error"),
    with: () => l,
  };
  return l;
}

/** Starts the installer on a fake host; `stop()` aborts it and returns its result. */
function start(h: FakeHost, extra: Partial<InstallerOptions> = {}) {
  const ac = new AbortController();
  const lines: Line[] = [];
  const run = runInstaller({
    hostRoot: h.root,
    binary: h.binary,
    kubeconfig: { server: "https://10.96.0.1:443", serviceAccountDir: h.saDir },
    pollIntervalMs: 15,
    progressIntervalMs: 50,
    primaryTimeoutMs: 10_000,
    logger: recordingLogger(lines),
    signal: ac.signal,
    ...extra,
  });
  run.catch(() => {}); // observed by stop() or the test
  return {
    run,
    lines,
    async stop() {
      ac.abort();
      return await run;
    },
  };
}

async function writeJson(path: string, v: unknown) {
  await Deno.writeTextFile(path, JSON.stringify(v, null, 2));
}

Deno.test("underRoot maps host paths below the root", () => {
  assert.equal(underRoot("/", "/etc/cni/net.d"), "/etc/cni/net.d");
  assert.equal(underRoot("/host/", "/etc/cni/net.d"), "/host/etc/cni/net.d");
  assert.equal(underRoot("/host", "/opt/cni/bin"), "/host/opt/cni/bin");
});

Deno.test("primary appears late: nothing is written before, then a valid 0600 config", async () => {
  const h = await fakeHost();
  const inst = start(h);
  try {
    // Binary and kubeconfig come first; the config waits for the primary (§6.1.1).
    await waitFor("binary copied", () => readIf(`${h.binDir}/manifold`));
    await new Promise((r) => setTimeout(r, 120));
    assert.equal(await readIf(h.config), undefined, "no config before the primary exists");
    await waitFor("progress logged", () => inst.lines.some((l) => l.msg.startsWith("waiting for")));

    await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist("1.0.0"));
    const text = await waitFor("config written", () => readIf(h.config));
    const { list, conf } = parseGenerated(text);
    assert.equal(list.cniVersion, "1.0.0");
    assert.equal(list.name, "manifold-cni-network");
    assert.equal(conf.type, "manifold");
    // Host paths, not the installer's view.
    assert.equal(conf.clusterNetwork, "/etc/cni/net.d/10-flannel.conflist");
    assert.equal(conf.kubeconfig, "/etc/cni/net.d/manifold.d/manifold.kubeconfig");
    assert.deepEqual(conf.capabilities, {
      portMappings: true,
      "io.kubernetes.cri.pod-annotations": true,
    });
    assert.equal((await Deno.stat(h.config)).mode! & 0o777, 0o600);
    assert.equal((await Deno.stat(`${h.binDir}/manifold`)).mode! & 0o777, 0o755);
    assert.deepEqual(await tempFiles(h.confDir), []);

    const result = await inst.stop();
    assert.equal(result.reason, "stopped");
    assert.equal(result.writes, 1);
    assert.equal(result.cleanedUp, false);
    assert.ok(await readIf(h.config), "config kept on exit without --cleanup-config-on-exit");
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("kubeconfig names the mirrored token file and CA by host path", async () => {
  const h = await fakeHost();
  const inst = start(h);
  try {
    const kcPath = `${h.confDir}/manifold.d/manifold.kubeconfig`;
    const text = await waitFor("kubeconfig", () => readIf(kcPath));
    const kc = JSON.parse(text);
    assert.equal(kc.users[0].user.tokenFile, "/etc/cni/net.d/manifold.d/token");
    assert.equal(
      kc.clusters[0].cluster["certificate-authority"],
      "/etc/cni/net.d/manifold.d/ca.crt",
    );
    assert.equal(kc.users[0].user.token, undefined, "the token itself is never in the kubeconfig");
    for (const f of ["manifold.kubeconfig", "token", "ca.crt"]) {
      assert.equal((await Deno.stat(`${h.confDir}/manifold.d/${f}`)).mode! & 0o777, 0o600, f);
    }
    assert.equal((await Deno.stat(`${h.confDir}/manifold.d`)).mode! & 0o777, 0o700);
    assert.equal(await readIf(`${h.confDir}/manifold.d/token`), "token-one");

    // Rotation: kubelet swaps the projected token; the host copy follows.
    await Deno.writeTextFile(`${h.saDir}/.tmp`, "token-two");
    await Deno.rename(`${h.saDir}/.tmp`, `${h.saDir}/token`);
    await waitFor(
      "rotated token mirrored",
      async () => (await readIf(`${h.confDir}/manifold.d/token`)) === "token-two",
    );
    // The kubeconfig itself did not change (the plugin re-reads the token file per request).
    assert.equal(await readIf(kcPath), text);
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("a CA that leaves the service-account volume stays in the kubeconfig (never the system roots)", async () => {
  const h = await fakeHost();
  const inst = start(h);
  try {
    const kcPath = `${h.confDir}/manifold.d/manifold.kubeconfig`;
    const text = await waitFor("kubeconfig", () => readIf(kcPath));
    await Deno.remove(`${h.saDir}/ca.crt`);
    await waitFor(
      "a warning naming the missing CA",
      () =>
        inst.lines.some((l) =>
          l.level === "warn" && String(l.fields?.error).includes("service-account CA")
        ),
    );
    // Polls went on after the warning: the kubeconfig and the CA copy are as they were.
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(await readIf(kcPath), text);
    assert.equal(
      JSON.parse(text).clusters[0].cluster["certificate-authority"],
      "/etc/cni/net.d/manifold.d/ca.crt",
    );
    assert.match((await readIf(`${h.confDir}/manifold.d/ca.crt`))!, /BEGIN CERTIFICATE/);
    // The token still rotates meanwhile.
    await Deno.writeTextFile(`${h.saDir}/token`, "token-two");
    await waitFor(
      "rotated token mirrored",
      async () => (await readIf(`${h.confDir}/manifold.d/token`)) === "token-two",
    );
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("no service-account token at start: the error says where and what to do", async () => {
  const h = await fakeHost();
  try {
    await Deno.remove(`${h.saDir}/token`);
    const err = await runInstaller({
      hostRoot: h.root,
      kubeconfig: { server: "https://10.96.0.1:443", serviceAccountDir: h.saDir },
      once: true,
    }).then(() => undefined, (e) => e);
    assert.ok(err instanceof Deno.errors.NotFound, String(err));
    assert.match(err.message, new RegExp(`no service-account token at ${h.saDir}/token`));
    assert.match(err.message, /--no-kubeconfig/);
    assert.equal(await readIf(h.config), undefined);
  } finally {
    await h.cleanup();
  }
});

Deno.test("kubeconfig loads in the plugin's loader when the root is /", async () => {
  const h = await fakeHost();
  try {
    // hostRoot "/" with absolute temp paths: the files are where the kubeconfig says.
    await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
    await runInstaller({
      cniConfDir: h.confDir,
      kubeconfig: { server: "https://10.96.0.1:443", serviceAccountDir: h.saDir },
      once: true,
      pollIntervalMs: 15,
    });
    const { conf } = parseGenerated((await readIf(h.config))!);
    assert.equal(conf.clusterNetwork, `${h.confDir}/10-flannel.conflist`);
    const conn = await loadKubeconfig(conf.kubeconfig!);
    assert.equal(conn.server, "https://10.96.0.1:443");
    assert.equal(conn.tokenFile, `${h.confDir}/manifold.d/token`);
    assert.match(conn.caCertPem ?? "", /BEGIN CERTIFICATE/);
  } finally {
    await h.cleanup();
  }
});

Deno.test("primary is a .conf: its cniVersion and capabilities are used", async () => {
  const h = await fakeHost();
  try {
    await writeJson(`${h.confDir}/10-calico.conf`, singleConf("0.3.1"));
    const r = await runInstaller({
      hostRoot: h.root,
      once: true,
      pollIntervalMs: 15,
      kubeconfig: undefined,
    });
    assert.equal(r.reason, "once");
    const { list, conf } = parseGenerated((await readIf(h.config))!);
    assert.equal(list.cniVersion, "0.3.1");
    assert.equal(conf.clusterNetwork, "/etc/cni/net.d/10-calico.conf");
    assert.equal(conf.kubeconfig, undefined);
    assert.deepEqual(conf.capabilities, {
      bandwidth: true,
      "io.kubernetes.cri.pod-annotations": true,
    });
  } finally {
    await h.cleanup();
  }
});

Deno.test("conflist with cniVersions: the negotiated version is used", async () => {
  const h = await fakeHost();
  try {
    await writeJson(`${h.confDir}/10-x.conflist`, {
      cniVersions: ["0.4.0", "1.1.0"],
      name: "x",
      plugins: [{ type: "ptp" }],
    });
    await runInstaller({ hostRoot: h.root, once: true, pollIntervalMs: 15 });
    assert.equal(parseGenerated((await readIf(h.config))!).list.cniVersion, "1.1.0");
  } finally {
    await h.cleanup();
  }
});

Deno.test("a config that sorts before Manifold's (the runtime's choice) is warned about once", async () => {
  const h = await fakeHost();
  // The primary itself sorts first: the runtime would load it and pods bypass Manifold.
  await writeJson(`${h.confDir}/00-aaa.conflist`, flannelConflist());
  const inst = start(h);
  const shadowed = () =>
    inst.lines.filter((l) => l.level === "warn" && l.msg.includes("pods bypass Manifold"));
  try {
    await waitFor("config", () => readIf(h.config));
    await waitFor("the warning", () => shadowed().length > 0);
    assert.equal(shadowed()[0].fields?.first, "00-aaa.conflist");
    assert.match(shadowed()[0].msg, /--config-name/);
    await new Promise((r) => setTimeout(r, 100)); // several polls: still one warning
    assert.equal(shadowed().length, 1);
    // Renamed out of the way: no further warning; a new shadowing file warns again.
    await Deno.rename(`${h.confDir}/00-aaa.conflist`, `${h.confDir}/10-aaa.conflist`);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(shadowed().length, 1);
    await Deno.writeTextFile(`${h.confDir}/.hidden.json`, "{}");
    await waitFor("a second warning", () => shadowed().length === 2);
    assert.equal(shadowed()[1].fields?.first, ".hidden.json");
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("primary changes → regenerated; another file takes over → follows it", async () => {
  const h = await fakeHost();
  await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist("0.4.0"));
  const inst = start(h);
  try {
    await waitFor("first config", () => readIf(h.config));
    assert.equal(parseGenerated((await readIf(h.config))!).list.cniVersion, "0.4.0");

    await writeJson(
      `${h.confDir}/10-flannel.conflist`,
      flannelConflist("1.0.0", { bandwidth: true }),
    );
    const regenerated = await waitFor("regenerated", async () => {
      const t = await readIf(h.config);
      return t && parseGenerated(t).list.cniVersion === "1.0.0" ? t : undefined;
    });
    assert.equal(parseGenerated(regenerated).conf.capabilities.bandwidth, true);

    // A file sorting first becomes the primary (the runtime would pick it too).
    await writeJson(`${h.confDir}/05-cilium.conflist`, {
      cniVersion: "1.0.0",
      name: "cilium",
      plugins: [{ type: "cilium-cni" }],
    });
    await waitFor("follows 05-cilium", async () => {
      const t = await readIf(h.config);
      return t && parseGenerated(t).conf.clusterNetwork === "/etc/cni/net.d/05-cilium.conflist";
    });
    // The log line follows the rename (and a directory fsync): read it once the loop stopped.
    const r = await inst.stop();
    assert.equal(r.writes, 3);
    assert.ok(inst.lines.some((l) => l.fields?.why === "primary config changed to another file"));
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("settings or someone else's edit: the config is rewritten (Multus #972, #1110)", async () => {
  const h = await fakeHost();
  await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
  const inst = start(h);
  try {
    const original = await waitFor("config", () => readIf(h.config));
    await Deno.remove(h.config); // e.g. renamed away by another CNI's installer
    assert.equal(await waitFor("rewritten", () => readIf(h.config)), original);
    await Deno.writeTextFile(
      h.config,
      '{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"x"}]}',
    );
    await waitFor("restored", async () => (await readIf(h.config)) === original);
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("primary removed → config removed; primary back → config back", async () => {
  const h = await fakeHost();
  await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
  const inst = start(h);
  try {
    await waitFor("config", () => readIf(h.config));
    await Deno.remove(`${h.confDir}/10-flannel.conflist`);
    await waitFor("config removed", async () => (await readIf(h.config)) === undefined);
    // The warning follows the unlink and a directory fsync: wait for it rather than race it.
    await waitFor(
      "removal logged",
      () => inst.lines.some((l) => l.level === "warn" && l.msg.startsWith("removed")),
    );
    // The kubeconfig stays (DEL of running pods still needs the API).
    assert.ok(await readIf(`${h.confDir}/manifold.d/manifold.kubeconfig`));
    await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
    await waitFor("config back", () => readIf(h.config));
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("a primary that does not parse is waited for, never skipped (Multus #1499)", async () => {
  const h = await fakeHost();
  // 10-a is being written (partial JSON); 20-b is valid but must not be picked instead.
  await Deno.writeTextFile(`${h.confDir}/10-a.conflist`, '{"cniVersion":"1.0.0","name":"a","plu');
  await writeJson(`${h.confDir}/20-b.conflist`, flannelConflist());
  const inst = start(h);
  try {
    await waitFor(
      "progress names the broken file",
      () => inst.lines.some((l) => String(l.fields?.reason ?? "").includes("10-a.conflist")),
    );
    assert.equal(await readIf(h.config), undefined);
    await writeJson(`${h.confDir}/10-a.conflist`, { ...flannelConflist(), name: "a" });
    const t = await waitFor("config", () => readIf(h.config));
    assert.equal(parseGenerated(t).conf.clusterNetwork, "/etc/cni/net.d/10-a.conflist");

    // Once written, a primary being rewritten (unparsable for a moment) keeps the config.
    await Deno.writeTextFile(`${h.confDir}/10-a.conflist`, "{");
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(await readIf(h.config), t);
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("own config, delegating plugins and hidden files are never the primary", async () => {
  const h = await fakeHost();
  try {
    await writeJson(`${h.confDir}/00-multus.conf`, {
      cniVersion: "0.3.1",
      name: "multus-cni-network",
      type: "multus",
      kubeconfig: "/x",
    });
    await writeJson(`${h.confDir}/.05-tmp.conflist`, flannelConflist());
    await writeJson(`${h.confDir}/07-notes.json`, flannelConflist());
    await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
    await runInstaller({ hostRoot: h.root, once: true, pollIntervalMs: 15 });
    const first = (await readIf(h.config))!;
    assert.equal(parseGenerated(first).conf.clusterNetwork, "/etc/cni/net.d/10-flannel.conflist");
    // Running again with our own config present changes nothing.
    const r = await runInstaller({ hostRoot: h.root, once: true, pollIntervalMs: 15 });
    assert.equal(r.writes, 0);
    assert.equal(await readIf(h.config), first);
  } finally {
    await h.cleanup();
  }
});

Deno.test("pinned primary: only that file", async () => {
  const h = await fakeHost();
  const inst = start(h, { primaryConfig: "20-pinned.conflist" });
  try {
    await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
    await new Promise((r) => setTimeout(r, 80));
    assert.equal(await readIf(h.config), undefined);
    await writeJson(`${h.confDir}/20-pinned.conflist`, { ...flannelConflist(), name: "pinned" });
    const t = await waitFor("config", () => readIf(h.config));
    assert.equal(parseGenerated(t).conf.clusterNetwork, "/etc/cni/net.d/20-pinned.conflist");
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("readiness file: waited for, its removal removes the config, its return restores it", async () => {
  const h = await fakeHost();
  await Deno.mkdir(`${h.root}/run/flannel`, { recursive: true });
  await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
  const inst = start(h, { readinessIndicatorFile: "/run/flannel/subnet.env" });
  try {
    await new Promise((r) => setTimeout(r, 80));
    assert.equal(await readIf(h.config), undefined, "not ready without the readiness file");
    await Deno.writeTextFile(`${h.root}/run/flannel/subnet.env`, "FLANNEL_MTU=1450\n");
    const t = await waitFor("config", () => readIf(h.config));
    assert.equal(parseGenerated(t).conf.readinessindicatorfile, "/run/flannel/subnet.env");
    await Deno.remove(`${h.root}/run/flannel/subnet.env`);
    await waitFor("config removed", async () => (await readIf(h.config)) === undefined);
    await Deno.writeTextFile(`${h.root}/run/flannel/subnet.env`, "FLANNEL_MTU=1450\n");
    await waitFor("config restored", () => readIf(h.config));
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("a readiness file whose directory is not mounted below the host root: the error says what to mount", async () => {
  const h = await fakeHost();
  await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
  const inst = start(h, {
    readinessIndicatorFile: "/run/flannel/subnet.env",
    primaryTimeoutMs: 100,
  });
  try {
    const err = await inst.run.then(() => undefined, (e) => e);
    assert.ok(err instanceof InstallTimeoutError, String(err));
    assert.match(
      err.message,
      new RegExp(`mount /run/flannel into the install container at ${h.root}/run/flannel`),
    );
    // Its directory is there (mounted), only the file is not: no hint.
    await Deno.mkdir(`${h.root}/run/flannel`, { recursive: true });
    const again = start(h, {
      readinessIndicatorFile: "/run/flannel/subnet.env",
      primaryTimeoutMs: 100,
    });
    const err2 = await again.run.then(() => undefined, (e) => e);
    assert.ok(err2 instanceof InstallTimeoutError);
    assert.match(
      err2.message,
      /readiness indicator file \/run\/flannel\/subnet\.env does not exist \(/,
    );
    assert.match(err2.message, /--primary-timeout-ms=0 waits without a bound/);
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("the first wait is bounded: InstallTimeoutError, nothing written", async () => {
  const h = await fakeHost();
  try {
    const started = Date.now();
    await assert.rejects(
      runInstaller({ hostRoot: h.root, primaryTimeoutMs: 150, pollIntervalMs: 15 }),
      (e: unknown) => e instanceof InstallTimeoutError && /no \*\.conf/.test(e.message),
    );
    assert.ok(Date.now() - started < 3000);
    assert.equal(await readIf(h.config), undefined);
  } finally {
    await h.cleanup();
  }
});

Deno.test("cleanup on exit removes only Manifold's config", async () => {
  const h = await fakeHost();
  await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
  const inst = start(h, { cleanupConfigOnExit: true });
  try {
    await waitFor("config", () => readIf(h.config));
    const r = await inst.stop();
    assert.equal(r.cleanedUp, true);
    assert.equal(await readIf(h.config), undefined);
    assert.ok(await readIf(`${h.confDir}/10-flannel.conflist`), "the primary is untouched");
  } finally {
    await h.cleanup();
  }
});

Deno.test("invalid plugin settings fail before anything is written", async () => {
  const h = await fakeHost();
  try {
    await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
    await assert.rejects(
      runInstaller({
        hostRoot: h.root,
        once: true,
        pollIntervalMs: 15,
        pluginConf: { namespaceIsolation: "yes" },
      }),
      /invalid manifold configuration/,
    );
    assert.equal(await readIf(h.config), undefined);
  } finally {
    await h.cleanup();
  }
});

Deno.test("the config never reads partial while regenerated under load", async () => {
  const h = await fakeHost();
  await writeJson(`${h.confDir}/10-flannel.conflist`, flannelConflist());
  // Big settings make every write span several pages.
  const big = { defaultNetworks: Array.from({ length: 2000 }, (_, i) => `net-${i}`) };
  const inst = start(h, { pollIntervalMs: 1, pluginConf: big });
  try {
    await waitFor("config", () => readIf(h.config));
    let stop = false;
    let reads = 0;
    const versions = new Set<string>();
    const reader = (async () => {
      while (!stop) {
        const text = await Deno.readTextFile(h.config); // never missing, never partial
        const { list } = parseGenerated(text);
        versions.add(list.cniVersion);
        reads++;
      }
    })();
    const writer = (async () => {
      for (let i = 0; i < 60; i++) {
        const v = ["0.4.0", "1.0.0", "1.1.0"][i % 3];
        await writeJson(
          `${h.confDir}/10-flannel.conflist`,
          flannelConflist(v, { [`c${i}`]: true }),
        );
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await writer;
    await new Promise((r) => setTimeout(r, 50));
    stop = true;
    await reader;
    assert.ok(reads > 100, `reader ran (${reads} reads)`);
    assert.ok(versions.size >= 2, "the reader saw regenerations");
    const r = await inst.stop();
    assert.ok(r.writes >= 10, `regenerated under load (${r.writes} writes)`);
    assert.deepEqual(await tempFiles(h.confDir), []);
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});
