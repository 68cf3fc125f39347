/**
 * List + watch against the HTTPS API stand-in: the list (paged), changes in order, resuming
 * after a dropped or ended stream without re-listing, re-listing on 410 (ERROR event and
 * HTTP answer), backoff on errors, bookmarks, heartbeat, the idle guard, and stopping.
 */

import assert from "node:assert/strict";
import { kubeErrorCode } from "../../lib/multinet/api_errors.ts";
import {
  KubeClient,
  type KubeConnection,
  KubeError,
  LIST_WATCH_DEFAULTS,
  listAll,
  type ListWatchHandler,
  type ListWatchOptions,
  loadKubeconfig,
  NAD_LIST_WATCH,
  type NetworkAttachmentDefinition,
  type WatchChange,
  watchNetworkAttachmentDefinitions,
} from "../../lib/k8s/mod.ts";
import {
  type KubeApiStandIn,
  startKubeApi,
  type StartKubeApiOptions,
} from "../support/kube_api.ts";
import { until } from "../support/wait.ts";

const NAD_PATH = "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions";
const CONFIG = '{"cniVersion":"1.0.0","type":"macvlan"}';

interface Recorder extends ListWatchHandler<NetworkAttachmentDefinition> {
  calls: string[];
  lists: { names: string[]; rv: string }[];
  changes: WatchChange<NetworkAttachmentDefinition>[];
  progress: (rv: string) => Promise<void>;
  progressed: string[];
}

function recorder(): Recorder {
  const r: Recorder = {
    calls: [],
    lists: [],
    changes: [],
    progressed: [],
    replace(items, rv) {
      r.calls.push(`replace ${rv}`);
      r.lists.push({
        names: items.map((n) => `${n.metadata.namespace}/${n.metadata.name}`),
        rv,
      });
      return Promise.resolve();
    },
    apply(change) {
      r.calls.push(
        `${change.type} ${change.object.metadata.namespace}/${change.object.metadata.name}`,
      );
      r.changes.push(change);
      return Promise.resolve();
    },
    progress(rv) {
      r.progressed.push(rv);
      return Promise.resolve();
    },
  };
  return r;
}

interface Run {
  api: KubeApiStandIn;
  conn: KubeConnection;
  kube: KubeClient;
  rec: Recorder;
  stop: AbortController;
  /** Starts the loop; `done` resolves when it returns. */
  start(opts?: Partial<ListWatchOptions>): void;
  done: Promise<void> | undefined;
  lists(): number;
  watches(): { query: URLSearchParams; status: number }[];
}

async function withLoop(
  fn: (r: Run) => Promise<void>,
  apiOpts: StartKubeApiOptions = {},
): Promise<void> {
  const api = await startKubeApi(apiOpts);
  const stop = new AbortController();
  let kube: KubeClient | undefined;
  const run: Partial<Run> = {};
  try {
    api.addNad({ namespace: "default", name: "macvlan-conf", config: CONFIG });
    api.addNad({ namespace: "tenant-a", name: "bridge-net", config: '{"type":"bridge"}' });
    await api.writeKubeconfig(`${api.dir}/kubeconfig`);
    const conn = await loadKubeconfig(`${api.dir}/kubeconfig`);
    kube = new KubeClient({ connection: conn, backoffMs: 10, signal: stop.signal });
    const rec = recorder();
    Object.assign(run, {
      api,
      conn,
      kube,
      rec,
      stop,
      start(opts: Partial<ListWatchOptions> = {}) {
        run.done = watchNetworkAttachmentDefinitions(kube!, rec, {
          signal: stop.signal,
          minBackoffMs: 20,
          maxBackoffMs: 200,
          ...opts,
        });
      },
      lists: () =>
        api.requests.filter((q) => q.path === NAD_PATH && !q.query.includes("watch=")).length,
      watches: () =>
        api.requests.filter((q) => q.path === NAD_PATH && q.query.includes("watch=")).map((q) => ({
          query: new URLSearchParams(q.query),
          status: q.status,
        })),
    });
    await fn(run as Run);
  } finally {
    stop.abort();
    await run.done;
    kube?.close();
    await api.stop();
  }
}

Deno.test("list + watch: the list, then every change in order with its resourceVersion", async () => {
  await withLoop(async (r) => {
    r.start();
    await until(() => r.api.nadWatchCount === 1, "the watch");
    assert.deepEqual(r.rec.lists, [{
      names: ["default/macvlan-conf", "tenant-a/bridge-net"],
      rv: String(r.api.resourceVersion),
    }]);
    const [w] = r.watches();
    assert.equal(w.query.get("watch"), "1");
    assert.equal(w.query.get("resourceVersion"), r.rec.lists[0].rv);
    assert.equal(w.query.get("allowWatchBookmarks"), "true");
    const t = Number(w.query.get("timeoutSeconds"));
    assert.ok(t >= 240 && t <= 300, `timeoutSeconds ${t}`);

    r.api.addNad({ namespace: "tenant-b", name: "sriov", config: CONFIG });
    r.api.updateNad({ namespace: "default", name: "macvlan-conf", config: '{"type":"ipvlan"}' });
    r.api.deleteNad("tenant-a", "bridge-net");
    await until(() => r.rec.changes.length === 3, "three changes");
    assert.deepEqual(r.rec.calls.slice(1), [
      "ADDED tenant-b/sriov",
      "MODIFIED default/macvlan-conf",
      "DELETED tenant-a/bridge-net",
    ]);
    assert.equal(r.rec.changes[1].object.spec.config, '{"type":"ipvlan"}');
    const rvs = r.rec.changes.map((c) => Number(c.resourceVersion));
    assert.ok(rvs[0] < rvs[1] && rvs[1] < rvs[2], `increasing ${rvs}`);
    assert.equal(rvs[2], r.api.resourceVersion);
    // The watch was opened: progress reported at the list's resourceVersion.
    assert.ok(r.rec.progressed.includes(r.rec.lists[0].rv));
    assert.equal(r.lists(), 1);
  });
});

Deno.test("listAll pages with limit/continue and keeps the first page's resourceVersion", async () => {
  await withLoop(async (r) => {
    r.api.addNad({ namespace: "tenant-b", name: "sriov", config: CONFIG });
    const rv = String(r.api.resourceVersion);
    const pages: number[] = [];
    const got = await listAll(r.kube, NAD_LIST_WATCH, {
      pageSize: 1,
      onPage: (n) => pages.push(n),
    });
    assert.deepEqual(
      got.items.map((n) => n.metadata.name),
      ["macvlan-conf", "bridge-net", "sriov"],
    );
    assert.deepEqual(pages, [1, 2, 3], "onPage after each page, with the items so far");
    assert.equal(got.resourceVersion, rv);
    const queries = r.api.requests.map((q) => new URLSearchParams(q.query));
    assert.equal(queries.length, 3);
    assert.ok(queries.every((q) => q.get("limit") === "1"));
    assert.equal(queries[0].get("continue"), null);
    assert.ok(queries[1].get("continue"));
    // An invalid item is code 6 naming it.
    r.api.fault({ body: JSON.stringify({ metadata: { resourceVersion: "1" }, items: [{}] }) });
    await assert.rejects(
      listAll(r.kube, NAD_LIST_WATCH),
      (e) => e instanceof KubeError && kubeErrorCode(e) === 6 && /items\[0\]/.test(e.msg),
    );
  });
});

Deno.test("a dropped stream resumes from the last resourceVersion: nothing lost, no re-list", async () => {
  await withLoop(async (r) => {
    r.start();
    await until(() => r.api.nadWatchCount === 1, "the watch");
    r.api.addNad({ namespace: "tenant-b", name: "one", config: CONFIG });
    await until(() => r.rec.changes.length === 1, "first change");
    const lastRv = r.rec.changes[0].resourceVersion;
    // Changes made while the stream is down come with the resumed watch.
    r.api.endNadWatches({ clean: false });
    r.api.addNad({ namespace: "tenant-b", name: "two", config: CONFIG });
    r.api.deleteNad("tenant-b", "one");
    await until(() => r.rec.changes.length === 3, "changes after the drop");
    assert.deepEqual(r.rec.calls.slice(1), [
      "ADDED tenant-b/one",
      "ADDED tenant-b/two",
      "DELETED tenant-b/one",
    ]);
    const watches = r.watches();
    assert.equal(watches.length, 2);
    assert.equal(watches[1].query.get("resourceVersion"), lastRv);
    assert.equal(r.lists(), 1, "no re-list");
  });
});

Deno.test("a stream the server ends (timeoutSeconds) is reopened from the last resourceVersion", async () => {
  await withLoop(async (r) => {
    r.start({ watchTimeoutSeconds: 1 });
    await until(() => r.api.nadWatchCount === 1, "the watch");
    r.api.addNad({ namespace: "tenant-b", name: "one", config: CONFIG });
    await until(() => r.watches().length >= 2, "a second watch", 4000);
    const ws = r.watches();
    assert.equal(ws[0].query.get("timeoutSeconds"), "1");
    // The deadline bookmark (or the event) moved the resourceVersion forward.
    assert.equal(ws[1].query.get("resourceVersion"), String(r.api.resourceVersion));
    assert.deepEqual(r.rec.calls.slice(1), ["ADDED tenant-b/one"]);
    assert.equal(r.lists(), 1);
  });
});

Deno.test("410: an ERROR event (expired history) and an HTTP 410 answer both re-list", async () => {
  await withLoop(async (r) => {
    r.start();
    await until(() => r.api.nadWatchCount === 1, "the watch");
    // The history moves past our resourceVersion while the stream is down.
    r.api.endNadWatches({ clean: false });
    r.api.addNad({ namespace: "tenant-b", name: "missed", config: CONFIG });
    r.api.compactNadHistory();
    await until(() => r.rec.lists.length === 2, "the re-list");
    assert.deepEqual(r.rec.lists[1].names, [
      "default/macvlan-conf",
      "tenant-a/bridge-net",
      "tenant-b/missed",
    ]);
    assert.ok(r.watches().some((w) => w.status === 200), "the expired watch was a 200");
    await until(() => r.api.nadWatchCount === 1, "watching again");

    // An older server answers the watch itself with HTTP 410.
    r.api.fault({ method: "GET", path: /network-attachment-definitions$/, status: 410 });
    r.api.endNadWatches({ clean: false });
    await until(() => r.rec.lists.length === 3, "the second re-list");
    assert.ok(r.watches().some((w) => w.status === 410));
    await until(() => r.api.nadWatchCount === 1, "watching again");
    assert.equal(r.lists(), 3);
  });
});

Deno.test("errors back off and retry; an ERROR event or a garbage line re-lists", async () => {
  await withLoop(async (r) => {
    r.start();
    await until(() => r.api.nadWatchCount === 1, "the watch");
    // Three 503s on the watch: retried with backoff from the same resourceVersion.
    r.api.fault({ method: "GET", path: /network-attachment-definitions$/, status: 503, times: 3 });
    const started = Date.now();
    r.api.endNadWatches({ clean: false });
    await until(() => r.watches().filter((w) => w.status === 503).length === 3, "the 503s");
    await until(() => r.api.nadWatchCount === 1, "watching again");
    // 20, 40, 80 ms × [0.5, 1): at least 70 ms of backoff.
    assert.ok(Date.now() - started >= 70, `backoff ${Date.now() - started} ms`);
    assert.equal(r.lists(), 1, "a failed watch does not re-list");

    // An ERROR event other than 410 (here 500), then a line that is not JSON.
    const err500 = JSON.stringify({
      type: "ERROR",
      object: {
        kind: "Status",
        apiVersion: "v1",
        status: "Failure",
        code: 500,
        reason: "InternalError",
        message: "boom",
      },
    });
    r.api.fault({ method: "GET", path: /network-attachment-definitions$/, body: `${err500}\n` });
    r.api.endNadWatches({ clean: false });
    await until(() => r.lists() === 2, "re-list after the ERROR event");
    await until(() => r.api.nadWatchCount === 1, "watching again");
    r.api.fault({ method: "GET", path: /network-attachment-definitions$/, body: "{nope\n" });
    r.api.endNadWatches({ clean: false });
    await until(() => r.lists() === 3, "re-list after the garbage line");
    await until(() => r.api.nadWatchCount === 1, "watching again");
  });
});

Deno.test("an API that is down is retried until it is back", async () => {
  await withLoop(async (r) => {
    r.api.down(true);
    r.start();
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(r.rec.lists.length, 0);
    r.api.down(false);
    await until(() => r.api.nadWatchCount === 1, "the watch", 8000);
    assert.equal(r.rec.lists.length, 1);
  });
});

Deno.test("progress only on what the server sent: open, bookmarks, events; aborting stops at once", async () => {
  await withLoop(async (r) => {
    r.start({ heartbeatMs: 50 });
    await until(() => r.api.nadWatchCount === 1, "the watch");
    await until(() => r.rec.progressed.length >= 1, "progress when the watch opened");
    r.api.addPod({ namespace: "default", name: "p" }); // moves the global resourceVersion
    r.api.nadBookmark();
    await until(
      () => r.rec.progressed.includes(String(r.api.resourceVersion)),
      "progress at the bookmark's resourceVersion",
    );
    // Time alone is no evidence: several heartbeats pass, no progress.
    const n = r.rec.progressed.length;
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(r.rec.progressed.length, n, "no progress while the server sends nothing");
    // An event is: the next heartbeat reports it.
    r.api.addNad({ namespace: "default", name: "late", config: '{"type":"bridge"}' });
    await until(() => r.rec.progressed.length > n, "progress after an event");
    // A resumed watch starts from the last resourceVersion.
    r.api.endNadWatches({ clean: false });
    await until(() => r.watches().length === 2, "the resumed watch");
    assert.equal(r.watches()[1].query.get("resourceVersion"), String(r.api.resourceVersion));

    const t0 = performance.now();
    r.stop.abort();
    await r.done;
    assert.ok(performance.now() - t0 < 2000, "stops promptly");
    await until(() => r.api.nadWatchCount === 0, "the stream closed");
  });
});

Deno.test("a silent stream (no event, no bookmark ever) is reopened from the kept resourceVersion", async () => {
  assert.equal(LIST_WATCH_DEFAULTS.idleTimeoutMs, 60_000, "the default silence bound");
  await withLoop(async (r) => {
    r.start({ heartbeatMs: 20, idleTimeoutMs: 150 });
    await until(() => r.api.nadWatchCount === 1, "the watch");
    const opened = r.rec.progressed.length;
    await until(() => r.watches().length >= 2, "the silent stream reopened", 3000);
    assert.equal(r.lists(), 1, "reopened, not re-listed");
    assert.equal(
      r.watches()[1].query.get("resourceVersion"),
      r.watches()[0].query.get("resourceVersion"),
    );
    // While silent, only the openings (the server's 2xx) counted as progress.
    assert.ok(r.rec.progressed.length <= opened + r.watches().length, "no progress from time");
  });
  // Periodic bookmarks keep a stream alive.
  await withLoop(async (r) => {
    r.start({ heartbeatMs: 20, idleTimeoutMs: 500 });
    await until(() => r.api.nadWatchCount === 1, "the watch");
    await new Promise((res) => setTimeout(res, 1200));
    assert.equal(r.watches().length, 1);
  }, { watchBookmarkIntervalMs: 40 });
});

Deno.test("once: lists, replaces and returns; a failed list is thrown", async () => {
  await withLoop(async (r) => {
    await watchNetworkAttachmentDefinitions(r.kube, r.rec, { signal: r.stop.signal, once: true });
    assert.equal(r.rec.lists.length, 1);
    assert.equal(r.watches().length, 0);
    r.api.denyRbac(r.api.token);
    await assert.rejects(
      watchNetworkAttachmentDefinitions(r.kube, r.rec, { signal: r.stop.signal, once: true }),
      (e) => e instanceof KubeError && e.status === 403 && kubeErrorCode(e) === 7,
    );
  });
});

Deno.test("KubeClient.watch: 403 is code 7; a stream is read over insecure-skip-tls-verify too", async () => {
  await withLoop(async (r) => {
    r.api.setTokens([r.api.token, "denied-token"]);
    r.api.denyRbac("denied-token");
    const denied = new KubeClient({ connection: { ...r.conn, token: "denied-token" } });
    try {
      await assert.rejects(
        denied.watch(NAD_PATH, { resourceVersion: "0" }).next(),
        (e) =>
          e instanceof KubeError && e.status === 403 && kubeErrorCode(e) === 7 &&
          e.reason === "Forbidden",
      );
    } finally {
      denied.close();
    }
    const insecure = new KubeClient({
      connection: { ...r.conn, caCertPem: undefined, insecureSkipTlsVerify: true },
    });
    try {
      r.api.requests.length = 0;
      let opened = false;
      const seen: string[] = [];
      // resourceVersion 0: the current objects as synthetic ADDED events.
      for await (
        const ev of insecure.watch(
          NAD_PATH,
          { resourceVersion: "0" },
          undefined,
          () => opened = true,
        )
      ) {
        const e = ev as { type: string; object: { metadata: { name: string } } };
        seen.push(`${e.type} ${e.object.metadata.name}`);
        if (seen.length === 2) break;
      }
      assert.ok(opened);
      assert.deepEqual(seen, ["ADDED macvlan-conf", "ADDED bridge-net"]);
      await until(() => r.api.nadWatchCount === 0, "the stream released");
      // close() ends an open watch.
      const it = insecure.watch(NAD_PATH, { resourceVersion: String(r.api.resourceVersion) });
      const next = it.next();
      await until(() => r.api.nadWatchCount === 1, "the watch");
      insecure.close();
      await assert.rejects(next, (e) => e instanceof KubeError && e.reason === "Aborted");
    } finally {
      insecure.close();
    }
  });
});

Deno.test("stand-in watch wire format: chunked JSON lines, Status of an expired resourceVersion", async () => {
  await withLoop(async (r) => {
    const client = Deno.createHttpClient({ caCerts: [r.api.caCertPem] });
    try {
      const get = (query: string) =>
        fetch(`${r.api.url}${NAD_PATH}?${query}`, {
          headers: { authorization: `Bearer ${r.api.token}` },
          client,
        });
      const rv = r.api.resourceVersion;
      r.api.compactNadHistory();
      const expired = await get(`watch=true&resourceVersion=${rv - 1}`);
      assert.equal(expired.status, 200);
      assert.equal(expired.headers.get("content-type"), "application/json");
      assert.deepEqual(JSON.parse(await expired.text()), {
        type: "ERROR",
        object: {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Failure",
          message: `too old resource version: ${rv - 1} (${rv})`,
          reason: "Expired",
          code: 410,
        },
      });
      const res = await get(
        `watch=1&resourceVersion=${rv}&allowWatchBookmarks=true&timeoutSeconds=1`,
      );
      assert.equal(res.status, 200);
      r.api.updateNad({ namespace: "default", name: "macvlan-conf", config: "{}" });
      const lines = (await res.text()).trim().split("\n").map((l) => JSON.parse(l));
      assert.deepEqual(lines.map((l) => l.type), ["MODIFIED", "BOOKMARK"]);
      assert.equal(lines[0].object.metadata.generation, 2);
      assert.deepEqual(lines[1].object, {
        kind: "NetworkAttachmentDefinition",
        apiVersion: "k8s.cni.cncf.io/v1",
        metadata: { resourceVersion: String(r.api.resourceVersion) },
      });
      const bad = await get("watch=1&resourceVersion=abc");
      assert.equal(bad.status, 400);
      assert.equal((await bad.json()).reason, "BadRequest");
    } finally {
      client.close();
    }
  });
});
