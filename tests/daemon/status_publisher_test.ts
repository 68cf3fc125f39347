/**
 * The async network-status publisher (lib/daemon/status_publisher.ts) with a recording sink
 * and an in-memory cache: coalescing per pod, back-off retries, a replaced pod dropped, a
 * DELeted sandbox not published, events after the write, and the level-triggered re-drive.
 * The real-daemon, real-API behaviour is tests/realapi/status_publish_test.ts.
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { nullLogger } from "../../lib/log/mod.ts";
import type { AttachmentCache } from "../../lib/multinet/cache/cache.ts";
import type { CacheRecord } from "../../lib/multinet/cache/record.ts";
import type { QueuedStatus, StatusSink } from "../../lib/multinet/deps.ts";
import type { PodRef } from "../../lib/multinet/plan/pod.ts";
import { PodGoneError } from "../../lib/multinet/status/sinks.ts";
import { serializeNetworkStatus } from "../../lib/multinet/status/network_status.ts";
import type { NetworkStatus } from "../../lib/multinet/types.ts";
import { StatusPublisher } from "../../lib/daemon/status_publisher.ts";
import { KubeError } from "../../lib/k8s/errors.ts";
import { cniErrorFromKube } from "../../lib/multinet/api_errors.ts";
import { until } from "../support/wait.ts";

const STATUS = "k8s.v1.cni.cncf.io/network-status";

function status(ip: string): NetworkStatus[] {
  return [{ name: "cbr0", interface: "eth0", ips: [ip], default: true }];
}

function record(name: string, containerId: string, ip: string, extra: Partial<CacheRecord> = {}) {
  return {
    schemaVersion: 1,
    containerId,
    netns: "/var/run/netns/x",
    ifName: "eth0",
    pod: { namespace: "ns", name, uid: `uid-${name}` },
    cniVersion: "1.0.0",
    createdAt: "2026-11-27T10:00:00.000Z",
    attachments: [],
    networkStatus: status(ip),
    ...extra,
  } as CacheRecord;
}

/** An in-memory stand-in for the cache: `read` and `list` only. */
function memCache(records: CacheRecord[]): AttachmentCache {
  return {
    read: (containerId: string, ifName: string) =>
      Promise.resolve(records.find((r) => r.containerId === containerId && r.ifName === ifName)),
    list: () =>
      Promise.resolve(records.map((r) => ({ containerId: r.containerId, ifName: r.ifName }))),
  } as unknown as AttachmentCache;
}

function item(name: string, containerId: string, ip: string): QueuedStatus {
  const pod: PodRef = { namespace: "ns", name, uid: `uid-${name}`, infraContainerId: containerId };
  return {
    pod,
    containerId,
    ifName: "eth0",
    entries: status(ip),
    events: [{ reason: "AddedInterface", message: `Add eth0 [${ip}] from cbr0`, type: "Normal" }],
  };
}

interface Recorder {
  sink: StatusSink;
  writes: { pod: string; ips: string[]; uid?: string }[];
  events: string[];
  pending: number[];
  lags: number[];
  gaveUp: number;
}

function recorder(behave: (n: number) => Promise<void> = () => Promise.resolve()): Recorder {
  const r: Recorder = {
    writes: [],
    events: [],
    pending: [],
    lags: [],
    gaveUp: 0,
    sink: {
      kind: "test",
      publish: async (pod, _c, entries) => {
        const n = r.writes.length;
        r.writes.push({
          pod: pod!.name,
          ips: entries.flatMap((e) => e.ips ?? []),
          uid: pod!.uid,
        });
        await behave(n);
      },
    },
  };
  return r;
}

function publisher(r: Recorder, records: CacheRecord[]) {
  return new StatusPublisher({
    sink: r.sink,
    events: {
      emit: (pod, ev) => r.events.push(`${pod.name} ${ev.reason} ${ev.message}`),
      flush: () => Promise.resolve(),
    },
    cache: memCache(records),
    observer: {
      published: (s) => r.lags.push(s),
      pending: (n) => r.pending.push(n),
      gaveUp: () => r.gaveUp++,
    },
    logger: nullLogger,
    backoffMs: 10,
    maxBackoffMs: 40,
  });
}

Deno.test("coalesces per pod: statuses queued while one is written leave only the newest", async () => {
  let release!: () => void;
  const first = new Promise<void>((r) => release = r);
  const r = recorder((n) => n === 0 ? first : Promise.resolve());
  const recs = [
    record("p", "c1", "10.0.0.1/24"),
    record("p", "c2", "10.0.0.2/24"),
    record("p", "c3", "10.0.0.3/24"),
  ];
  const pub = publisher(r, recs);
  pub.enqueue(item("p", "c1", "10.0.0.1/24"));
  await until(() => r.writes.length === 1, "the first write in flight");
  pub.enqueue(item("p", "c2", "10.0.0.2/24"));
  pub.enqueue(item("p", "c3", "10.0.0.3/24"));
  assert.equal(pub.pending, 1, "one status per pod");
  release();
  await until(() => pub.pending === 0, "the queue empty");
  assert.deepEqual(r.writes.map((w) => w.ips[0]), ["10.0.0.1/24", "10.0.0.3/24"]);
  assert.equal(r.pending.at(-1), 0);
  assert.equal(r.lags.length, 2);
  await pub.stop();
});

Deno.test("a failed write is retried with back-off; events follow the write", async () => {
  const r = recorder((n) =>
    n < 2
      ? Promise.reject(new CniError(11, "Kubernetes API PATCH failed with 503"))
      : Promise.resolve()
  );
  const pub = publisher(r, [record("p", "c1", "10.0.0.1/24")]);
  pub.enqueue(item("p", "c1", "10.0.0.1/24"));
  await until(() => pub.pending === 0, "written after two failures");
  assert.equal(r.writes.length, 3);
  assert.deepEqual(r.events, ["p AddedInterface Add eth0 [10.0.0.1/24] from cbr0"]);
  await pub.stop();
});

Deno.test("a replaced pod is dropped at once, without its events; a DELeted sandbox is not written", async () => {
  const gone = (n: number) =>
    n === 0
      ? Promise.reject(new PodGoneError(item("p", "c1", "x").pod, "replaced", "422"))
      : Promise.resolve();
  const r = recorder(gone);
  const deleted = record("q", "c2", "10.0.0.2/24", { deletedAt: "2026-11-27T10:01:00.000Z" });
  const pub = publisher(r, [record("p", "c1", "10.0.0.1/24"), deleted]);
  pub.enqueue(item("p", "c1", "10.0.0.1/24"));
  pub.enqueue(item("q", "c2", "10.0.0.2/24"));
  await until(() => pub.pending === 0, "both settled");
  await new Promise((res) => setTimeout(res, 60)); // longer than any back-off
  assert.deepEqual(r.writes.map((w) => w.pod), ["p"], "p tried once, q never");
  assert.deepEqual(r.events, []);
  await pub.stop();
});

Deno.test("the record's current status is written, not the copy queued at ADD (hot-plug during an outage)", async () => {
  const r = recorder((n) =>
    n < 2
      ? Promise.reject(new CniError(11, "Kubernetes API PATCH failed with 503"))
      : Promise.resolve()
  );
  const rec = record("p", "c1", "10.0.0.1/24");
  const pub = publisher(r, [rec]);
  pub.enqueue(item("p", "c1", "10.0.0.1/24"));
  await until(() => r.writes.length >= 1, "the first (failing) write");
  // Hot-plug rewrites the record's status while the API refuses the PATCHes.
  rec.networkStatus = [
    ...status("10.0.0.1/24"),
    { name: "ns/hot", interface: "net1", ips: ["10.1.0.9/24"], default: false },
  ];
  await until(() => pub.pending === 0, "written after the outage");
  assert.deepEqual(r.writes.at(-1)!.ips, ["10.0.0.1/24", "10.1.0.9/24"]);
  await pub.stop();
});

Deno.test("a permanent 4xx (403) is given up after 5 attempts with a Warning event and a metric", async () => {
  const forbidden = () =>
    Promise.reject(
      cniErrorFromKube(
        new KubeError("request", "Kubernetes API PATCH failed with 403 Forbidden", {
          status: 403,
        }),
      ),
    );
  const r = recorder(forbidden);
  const pub = publisher(r, [record("p", "c1", "10.0.0.1/24")]);
  pub.enqueue(item("p", "c1", "10.0.0.1/24"));
  await until(() => pub.pending === 0, "given up", 10_000);
  await new Promise((res) => setTimeout(res, 100)); // longer than any back-off
  assert.equal(r.writes.length, 5);
  assert.equal(r.gaveUp, 1);
  assert.deepEqual(r.events, [
    "p StatusPublishFailed network-status not written after 5 attempts: HTTP 403",
  ]);
  await pub.stop();
});

Deno.test("a Retry-After the API client would not wait (beyond its bound) is waited here, once", async () => {
  const times: number[] = [];
  const r = recorder((n) => {
    times.push(performance.now());
    return n === 0
      ? Promise.reject(
        cniErrorFromKube(
          new KubeError("request", "Kubernetes API PATCH failed with 503", {
            status: 503,
            transient: true,
            retryAfterMs: 400,
          }),
        ),
      )
      : Promise.resolve();
  });
  const pub = publisher(r, [record("p", "c1", "10.0.0.1/24")]); // back-off 10 ms, cap 40 ms
  pub.enqueue(item("p", "c1", "10.0.0.1/24"));
  await until(() => pub.pending === 0, "written after the server's wait", 5000);
  assert.equal(r.writes.length, 2, "exactly one PATCH after the failed one");
  assert.ok(times[1] - times[0] >= 400, `waited ${times[1] - times[0]} ms`);
  await pub.stop();
});

Deno.test("re-drive: a record without a pod UID is skipped, never written with the API's UID", async () => {
  const r = recorder();
  const noUid = record("p", "a1", "10.0.0.1/24");
  noUid.pod = { namespace: "ns", name: "p", uid: "" }; // a record of an old version
  const pub = publisher(r, [noUid]);
  const queued = await pub.redrive(() => ({ metadata: { uid: "recreated", annotations: {} } }));
  await new Promise((res) => setTimeout(res, 60));
  assert.equal(queued, 0);
  assert.deepEqual(r.writes, []);
  await pub.stop();
});

Deno.test("re-drive: the newest live record of each pod whose annotation differs, with the record's UID", async () => {
  const r = recorder();
  const recs = [
    record("differs", "a1", "10.0.0.1/24"),
    record("same", "b1", "10.0.0.2/24"),
    record("replaced", "c1", "10.0.0.3/24"),
    record("absent", "d1", "10.0.0.4/24"),
    record("two", "e1", "10.0.0.5/24"),
    record("two", "e2", "10.0.0.6/24", { createdAt: "2026-11-27T11:00:00.000Z" }),
    record("tomb", "f1", "10.0.0.7/24", { deletedAt: "2026-11-27T10:01:00.000Z" }),
  ];
  const pods: Record<string, { metadata: { uid: string; annotations: Record<string, string> } }> = {
    differs: { metadata: { uid: "uid-differs", annotations: {} } },
    same: {
      metadata: {
        uid: "uid-same",
        annotations: { [STATUS]: serializeNetworkStatus(status("10.0.0.2/24")) },
      },
    },
    replaced: { metadata: { uid: "another", annotations: {} } },
    two: { metadata: { uid: "uid-two", annotations: {} } },
    tomb: { metadata: { uid: "uid-tomb", annotations: {} } },
  };
  const pub = publisher(r, recs);
  const queued = await pub.redrive((_ns, name) => pods[name]);
  await until(() => pub.pending === 0, "written");
  assert.equal(queued, 2);
  assert.deepEqual(
    r.writes.map((w) => `${w.pod} ${w.ips} ${w.uid}`).sort(),
    ["differs 10.0.0.1/24 uid-differs", "two 10.0.0.6/24 uid-two"],
  );
  await pub.stop();
});
