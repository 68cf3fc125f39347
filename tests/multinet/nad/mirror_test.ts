/**
 * The NAD mirror: the writer's layout and atomic updates (list, changes, re-list removals,
 * state file), the reader's rules (synced / stale / missing / invalid → fallback), and that
 * its answers equal `apiNadSource`'s against the API stand-in.
 */

import assert from "node:assert/strict";
import { CniError } from "../../../lib/cni/errors.ts";
import {
  KubeClient,
  listAll,
  loadKubeconfig,
  NAD_LIST_WATCH,
  type NetworkAttachmentDefinition,
  parseNetworkAttachmentDefinition,
} from "../../../lib/k8s/mod.ts";
import type { LogFields, Logger } from "../../../lib/log/mod.ts";
import { apiNadSource } from "../../../lib/multinet/nad/api_sources.ts";
import {
  isMirrorName,
  MIRROR_MAX_AGE_MS,
  MIRROR_STATE_FILE,
  mirrorNadSource,
  mirrorPath,
  NadMirrorWriter,
  parseMirrorFile,
  parseMirrorState,
} from "../../../lib/multinet/nad/mirror.ts";
import { type NadSource, StaticNadSource } from "../../../lib/multinet/nad/source.ts";
import { startKubeApi } from "../../support/kube_api.ts";

const T0 = Date.parse("2026-11-22T04:00:00.000Z");

function nad(
  namespace: string,
  name: string,
  config?: string,
  extra: { rv?: string; annotations?: Record<string, string> } = {},
): NetworkAttachmentDefinition {
  return parseNetworkAttachmentDefinition({
    apiVersion: "k8s.cni.cncf.io/v1",
    kind: "NetworkAttachmentDefinition",
    metadata: {
      name,
      namespace,
      uid: `uid-${namespace}-${name}`,
      resourceVersion: extra.rv ?? "100",
      generation: 1,
      creationTimestamp: "2026-11-22T04:21:08Z",
      managedFields: [{ manager: "kubectl" }],
      ...(extra.annotations ? { annotations: extra.annotations } : {}),
    },
    spec: config === undefined ? {} : { config },
  });
}

interface Lines {
  lines: { msg: string; fields: LogFields }[];
  logger: Logger;
}

function recordingLogger(): Lines {
  const lines: { msg: string; fields: LogFields }[] = [];
  const log = (msg: string, fields: LogFields = {}) => lines.push({ msg, fields });
  const logger: Logger = { debug: log, info: log, warn: log, error: log, with: () => logger };
  return { lines, logger };
}

/** A fallback that records its calls. */
function spy(inner: NadSource): NadSource & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    get(namespace, name) {
      calls.push(`${namespace}/${name}`);
      return inner.get(namespace, name);
    },
  };
}

async function tree(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string, rel: string) => {
    for await (const e of Deno.readDir(d)) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory) await walk(`${d}/${e.name}`, r);
      else out.push(r);
    }
  };
  await walk(dir, "");
  return out.sort();
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const base = await Deno.makeTempDir({ prefix: "manifold-mirror-" });
  try {
    await fn(`${base}/nads`);
  } finally {
    await Deno.remove(base, { recursive: true });
  }
}

const MACVLAN = '{"cniVersion":"1.0.0","type":"macvlan","master":"eth0"}';

Deno.test("writer: a list becomes <ns>/<name>.json (0600, dirs 0700) and .mirror.json", async () => {
  await withDir(async (dir) => {
    let now = T0;
    const w = new NadMirrorWriter(dir, { now: () => now });
    const res = await w.replace([
      nad("default", "macvlan-conf", MACVLAN, {
        rv: "203",
        annotations: {
          "kubectl.kubernetes.io/last-applied-configuration": '{"huge":"copy"}',
          "k8s.v1.cni.cncf.io/resourceName": "intel.com/sriov",
        },
      }),
      nad("tenant-a", "no-config"),
    ], "250");
    assert.deepEqual(res, { written: 2, unchanged: 0, removed: 0, skipped: 0 });
    assert.deepEqual(await tree(dir), [
      MIRROR_STATE_FILE,
      "default/macvlan-conf.json",
      "tenant-a/no-config.json",
    ]);
    const text = await Deno.readTextFile(mirrorPath(dir, "default", "macvlan-conf"));
    assert.ok(text.endsWith("}\n") && !text.includes("\n  "), "compact JSON line");
    assert.deepEqual(JSON.parse(text), {
      apiVersion: "k8s.cni.cncf.io/v1",
      kind: "NetworkAttachmentDefinition",
      metadata: {
        name: "macvlan-conf",
        namespace: "default",
        uid: "uid-default-macvlan-conf",
        resourceVersion: "203",
        annotations: { "k8s.v1.cni.cncf.io/resourceName": "intel.com/sriov" },
      },
      spec: { config: MACVLAN },
    });
    assert.deepEqual(
      JSON.parse(await Deno.readTextFile(mirrorPath(dir, "tenant-a", "no-config"))).spec,
      {},
    );
    assert.equal(
      (await Deno.stat(mirrorPath(dir, "default", "macvlan-conf"))).mode! & 0o777,
      0o600,
    );
    assert.equal((await Deno.stat(`${dir}/default`)).mode! & 0o777, 0o700);
    assert.equal((await Deno.stat(dir)).mode! & 0o777, 0o700);
    const state = await parseMirrorState(await Deno.readTextFile(`${dir}/${MIRROR_STATE_FILE}`));
    assert.deepEqual(state, {
      resourceVersion: "250",
      syncedAt: "2026-11-22T04:00:00.000Z",
      listedAt: "2026-11-22T04:00:00.000Z",
    });
    assert.equal(w.resourceVersion, "250");

    // A re-list: unchanged files are not rewritten, gone NADs, their emptied namespace and
    // leftover temporary files are removed.
    await Deno.writeTextFile(`${dir}/default/.macvlan-conf.json.tmp-1-abc`, "partial");
    await Deno.writeTextFile(`${dir}/.${MIRROR_STATE_FILE}.tmp-1-abc`, "partial");
    const before = (await Deno.stat(mirrorPath(dir, "default", "macvlan-conf"))).mtime;
    now = T0 + 60_000;
    const again = await w.replace([
      nad("default", "macvlan-conf", MACVLAN, {
        rv: "203",
        annotations: {
          "kubectl.kubernetes.io/last-applied-configuration": '{"huge":"copy"}',
          "k8s.v1.cni.cncf.io/resourceName": "intel.com/sriov",
        },
      }),
      nad("tenant-b", "new", MACVLAN),
      nad("Bad", "x"),
    ], "300");
    assert.deepEqual(again, { written: 1, unchanged: 1, removed: 3, skipped: 1 });
    assert.deepEqual(await tree(dir), [
      MIRROR_STATE_FILE,
      "default/macvlan-conf.json",
      "tenant-b/new.json",
    ]);
    assert.deepEqual((await Deno.stat(mirrorPath(dir, "default", "macvlan-conf"))).mtime, before);
    const s2 = await parseMirrorState(await Deno.readTextFile(`${dir}/${MIRROR_STATE_FILE}`));
    assert.equal(s2.resourceVersion, "300");
    assert.equal(s2.listedAt, "2026-11-22T04:01:00.000Z");
  });
});

Deno.test("writer: changes, progress, throttled state writes, clear", async () => {
  await withDir(async (dir) => {
    let now = T0;
    const w = new NadMirrorWriter(dir, { now: () => now, eventStateIntervalMs: 10_000 });
    await w.progress("1"); // before any list: nothing
    await assert.rejects(Deno.stat(dir), Deno.errors.NotFound);
    await w.replace([nad("default", "a", MACVLAN)], "10");
    const state = async () =>
      await parseMirrorState(await Deno.readTextFile(`${dir}/${MIRROR_STATE_FILE}`));

    now = T0 + 1000;
    await w.apply({
      type: "ADDED",
      object: nad("tenant-a", "b", MACVLAN, { rv: "11" }),
      resourceVersion: "11",
    });
    assert.equal(
      JSON.parse(await Deno.readTextFile(mirrorPath(dir, "tenant-a", "b"))).metadata
        .resourceVersion,
      "11",
    );
    assert.equal((await state()).resourceVersion, "10", "state write throttled");
    assert.equal(w.resourceVersion, "11");

    now = T0 + 11_000;
    await w.apply({
      type: "MODIFIED",
      object: nad("default", "a", '{"type":"ipvlan"}', { rv: "12" }),
      resourceVersion: "12",
    });
    assert.equal(
      JSON.parse(await Deno.readTextFile(mirrorPath(dir, "default", "a"))).spec.config,
      '{"type":"ipvlan"}',
    );
    assert.deepEqual(await state(), {
      resourceVersion: "12",
      syncedAt: "2026-11-22T04:00:11.000Z",
      listedAt: "2026-11-22T04:00:00.000Z",
    });

    now = T0 + 12_000;
    await w.apply({
      type: "DELETED",
      object: nad("tenant-a", "b", MACVLAN, { rv: "13" }),
      resourceVersion: "13",
    });
    await w.apply({
      type: "DELETED",
      object: nad("tenant-a", "never", MACVLAN, { rv: "14" }),
      resourceVersion: "14",
    });
    await w.apply({
      type: "ADDED",
      object: nad("x", "..", MACVLAN, { rv: "15" }),
      resourceVersion: "15",
    });
    assert.deepEqual(await tree(dir), [MIRROR_STATE_FILE, "default/a.json"]);

    now = T0 + 13_000;
    await w.progress("20");
    assert.deepEqual(await state(), {
      resourceVersion: "20",
      syncedAt: "2026-11-22T04:00:13.000Z",
      listedAt: "2026-11-22T04:00:00.000Z",
    });
    assert.equal(await w.clear(), true);
    assert.equal(await w.clear(), false);
    assert.deepEqual(await tree(dir), ["default/a.json"]);
  });
});

/** A mirror written at T0 holding default/a and tenant-a/b. */
async function mirrorAtT0(dir: string): Promise<void> {
  const w = new NadMirrorWriter(dir, { now: () => T0 });
  await w.replace([
    nad("default", "a", MACVLAN, { annotations: { "k8s.v1.cni.cncf.io/resourceName": "r" } }),
    nad("tenant-a", "b", '{"type":"bridge"}'),
  ], "100");
}

Deno.test("reader: a synced mirror answers without the fallback; a missing entry asks it", async () => {
  await withDir(async (dir) => {
    await mirrorAtT0(dir);
    const fb = spy(new StaticNadSource([nad("default", "fresh", MACVLAN, { rv: "101" })]));
    const src = mirrorNadSource(dir, fb, recordingLogger().logger, { now: () => T0 + 5000 });
    const a = await src.get("default", "a");
    assert.ok(a);
    assert.deepEqual(a.metadata, {
      name: "a",
      namespace: "default",
      uid: "uid-default-a",
      resourceVersion: "100",
      annotations: { "k8s.v1.cni.cncf.io/resourceName": "r" },
    });
    assert.deepEqual(a.spec, { config: MACVLAN });
    assert.equal((await src.get("tenant-a", "b"))?.spec.config, '{"type":"bridge"}');
    assert.deepEqual(fb.calls, []);
    // Created a moment ago: not mirrored yet, the fallback has it.
    assert.equal((await src.get("default", "fresh"))?.metadata.resourceVersion, "101");
    // Really missing: the fallback says so.
    assert.equal(await src.get("default", "nope"), undefined);
    assert.deepEqual(fb.calls, ["default/fresh", "default/nope"]);
  });
});

Deno.test("reader: not synced (no state, stale, future, invalid state) → the fallback", async () => {
  await withDir(async (dir) => {
    const fb = spy(new StaticNadSource([nad("default", "a", '{"type":"from-api"}')]));
    const { lines, logger } = recordingLogger();
    // Never written.
    assert.equal(
      (await mirrorNadSource(dir, fb, logger).get("default", "a"))?.spec.config,
      '{"type":"from-api"}',
    );
    await mirrorAtT0(dir);
    const at = (ms: number) => mirrorNadSource(dir, fb, logger, { now: () => T0 + ms });
    fb.calls.length = 0;
    assert.equal(
      (await at(MIRROR_MAX_AGE_MS).get("default", "a"))?.spec.config,
      MACVLAN,
      "at the bound",
    );
    assert.equal((await at(-29_000).get("default", "a"))?.spec.config, MACVLAN, "small clock skew");
    assert.deepEqual(fb.calls, []);
    assert.equal(
      (await at(MIRROR_MAX_AGE_MS + 1).get("default", "a"))?.spec.config,
      '{"type":"from-api"}',
    );
    assert.equal((await at(-31_000).get("default", "a"))?.spec.config, '{"type":"from-api"}');
    assert.equal(
      (await mirrorNadSource(dir, fb, logger, { now: () => T0 + 200_000, maxAgeMs: 300_000 }).get(
        "default",
        "a",
      ))
        ?.spec.config,
      MACVLAN,
      "maxAgeMs",
    );
    assert.deepEqual(fb.calls, ["default/a", "default/a"]);
    // A damaged state file: warned about, not trusted.
    await Deno.writeTextFile(
      `${dir}/${MIRROR_STATE_FILE}`,
      '{"resourceVersion":"1","syncedAt":"yesterday"}',
    );
    assert.equal((await at(0).get("default", "a"))?.spec.config, '{"type":"from-api"}');
    assert.ok(lines.some((l) => l.msg === "NAD mirror state file is invalid"));
  });
});

Deno.test("reader: an invalid or misplaced file is logged and the fallback answers", async () => {
  await withDir(async (dir) => {
    await mirrorAtT0(dir);
    const fb = spy(
      new StaticNadSource([
        nad("default", "a", '{"type":"from-api"}'),
        nad("default", "Upper", '{"type":"from-api"}'),
      ]),
    );
    const { lines, logger } = recordingLogger();
    const src = () => mirrorNadSource(dir, fb, logger, { now: () => T0 });
    const path = mirrorPath(dir, "default", "a");
    const bad = [
      "{truncated",
      "[]",
      JSON.stringify({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "a", namespace: "default" },
      }),
      JSON.stringify({
        apiVersion: "k8s.cni.cncf.io/v1",
        kind: "NetworkAttachmentDefinition",
        metadata: { name: "other", namespace: "default" },
        spec: {},
      }),
      JSON.stringify({
        apiVersion: "k8s.cni.cncf.io/v1",
        kind: "NetworkAttachmentDefinition",
        metadata: { name: "a", namespace: "default" },
        spec: { config: 42 },
      }),
    ];
    for (const text of bad) {
      await Deno.writeTextFile(path, text);
      assert.equal((await src().get("default", "a"))?.spec.config, '{"type":"from-api"}', text);
    }
    assert.equal(lines.filter((l) => l.msg === "invalid NAD mirror file").length, bad.length);
    // A directory where the file should be: unreadable.
    await Deno.remove(path);
    await Deno.mkdir(path);
    assert.equal((await src().get("default", "a"))?.spec.config, '{"type":"from-api"}');
    // Names that cannot be file names go to the fallback unchanged.
    assert.equal((await src().get("default", "Upper"))?.spec.config, '{"type":"from-api"}');
    assert.equal(await src().get("..", "a"), undefined);
    assert.deepEqual(fb.calls.slice(-2), ["default/Upper", "../a"]);
  });
});

Deno.test("reader without a fallback: answers alone; never synced is code 11, invalid code 6", async () => {
  await withDir(async (dir) => {
    const { lines, logger } = recordingLogger();
    await assert.rejects(
      mirrorNadSource(dir, undefined, logger).get("default", "a"),
      (e) => e instanceof CniError && e.code === 11,
    );
    await mirrorAtT0(dir);
    const stale = mirrorNadSource(dir, undefined, logger, { now: () => T0 + 3_600_000 });
    assert.equal((await stale.get("default", "a"))?.spec.config, MACVLAN);
    assert.ok(lines.some((l) => l.msg === "NAD mirror is stale and there is no API to ask"));
    assert.equal(await stale.get("default", "missing"), undefined);
    assert.equal(await stale.get("default", "Bad/Name"), undefined);
    await Deno.writeTextFile(mirrorPath(dir, "default", "a"), "{");
    await assert.rejects(stale.get("default", "a"), (e) => e instanceof CniError && e.code === 6);
  });
});

Deno.test("malformed mirror and state files are always a typed error (code 6)", async () => {
  const samples = ["", "null", "0", '"x"', "{}", "[1]", '{"kind":"NetworkAttachmentDefinition"}'];
  for (let i = 0; i < 200; i++) {
    const bytes = crypto.getRandomValues(new Uint8Array(1 + (i % 40)));
    samples.push(new TextDecoder().decode(bytes));
    samples.push(JSON.stringify({
      apiVersion: "k8s.cni.cncf.io/v1",
      kind: "NetworkAttachmentDefinition",
      metadata: i % 2 ? { name: "a", namespace: i } : { name: "a" },
      spec: i % 3 ? { config: [i] } : null,
    }));
  }
  for (const s of samples) {
    assert.throws(
      () => parseMirrorFile(s, "default", "a"),
      (e) => e instanceof CniError && e.code === 6,
    );
    await assert.rejects(() => parseMirrorState(s), (e) => e instanceof CniError && e.code === 6);
  }
});

Deno.test("isMirrorName: DNS-1123 names only", () => {
  for (const ok of ["a", "default", "macvlan-conf", "a.b-c", "0", "x".repeat(253)]) {
    assert.ok(isMirrorName(ok), ok);
  }
  for (const bad of ["", ".", "..", ".hidden", "a/b", "A", "-a", "a-", "a_b", "x".repeat(254)]) {
    assert.ok(!isMirrorName(bad), bad);
  }
});

Deno.test("the mirror answers exactly as apiNadSource (same objects, same not-found, no request)", async () => {
  const api = await startKubeApi();
  const base = await Deno.makeTempDir({ prefix: "manifold-mirror-" });
  let kube: KubeClient | undefined;
  try {
    api.addNad({
      namespace: "default",
      name: "macvlan-conf",
      config: MACVLAN,
      annotations: {
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "k8s.v1.cni.cncf.io/resourceName": "intel.com/sriov",
      },
    });
    api.addNad({ namespace: "tenant-a", name: "file-backed" });
    await api.writeKubeconfig(`${api.dir}/kubeconfig`);
    kube = new KubeClient({ connection: await loadKubeconfig(`${api.dir}/kubeconfig`) });
    const dir = `${base}/nads`;
    const list = await listAll(kube, NAD_LIST_WATCH);
    await new NadMirrorWriter(dir).replace(list.items, list.resourceVersion);

    const viaApi = apiNadSource(kube);
    const viaMirror = mirrorNadSource(dir, apiNadSource(kube), recordingLogger().logger);
    for (const [ns, name] of [["default", "macvlan-conf"], ["tenant-a", "file-backed"]]) {
      const before = api.requests.length;
      const m = await viaMirror.get(ns, name);
      assert.equal(api.requests.length, before, `${ns}/${name}: no API request`);
      const a = await viaApi.get(ns, name);
      assert.ok(a && m);
      const { "kubectl.kubernetes.io/last-applied-configuration": _, ...annotations } =
        a.metadata.annotations ?? {};
      assert.deepEqual(m.metadata, {
        ...a.metadata,
        ...(Object.keys(annotations).length ? { annotations } : {}),
      });
      assert.deepEqual(m.spec, a.spec);
    }
    for (const [ns, name] of [["default", "missing"], ["tenant-a", "Not_A_Dns_Name"]]) {
      assert.equal(await viaMirror.get(ns, name), await viaApi.get(ns, name));
    }
    // An invalid name fails the same way through both.
    const errors = await Promise.all(
      [viaApi, viaMirror].map((s) => s.get("default", "..").catch((e: CniError) => e.code)),
    );
    assert.deepEqual(errors, [7, 7]);
  } finally {
    kube?.close();
    await api.stop();
    await Deno.remove(base, { recursive: true });
  }
});

Deno.test("parseMirrorState takes exactly the times zod's RFC 3339 check takes (fast path or zod)", async () => {
  // A state as the mirror writes it is checked without zod; this keeps that check a subset of
  // zod's, on random calendar-ish times (invalid days, hours, leap days) in the writer's form.
  const { z } = await import("zod");
  const time = z.iso.datetime({ offset: true });
  let seed = 30;
  const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  const pad = (x: number, k: number) => String(x).padStart(k, "0");
  for (let i = 0; i < 5_000; i++) {
    const t = `${pad(rnd(10000), 4)}-${pad(rnd(14), 2)}-${pad(rnd(33), 2)}T${pad(rnd(26), 2)}:` +
      `${pad(rnd(62), 2)}:${pad(rnd(62), 2)}.${pad(rnd(1000), 3)}Z`;
    const text = JSON.stringify({ resourceVersion: "1", syncedAt: t, listedAt: t });
    const ours = await parseMirrorState(text).then(() => true, () => false);
    assert.equal(ours, time.safeParse(t).success, t);
  }
  // The same value as zod's loose object, keys a newer writer adds included.
  const state = {
    resourceVersion: "7",
    syncedAt: "2026-01-01T00:00:00.000Z",
    listedAt: "2026-01-01T00:00:01.000Z",
    future: { x: 1 },
  };
  const schema = z.looseObject({ resourceVersion: z.string(), syncedAt: time, listedAt: time });
  assert.deepEqual(await parseMirrorState(JSON.stringify(state)), schema.parse(state));
});
