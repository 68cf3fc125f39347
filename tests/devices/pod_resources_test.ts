/**
 * Tests of lib/devices/pod_resources.ts and readPodDevices (lib/devices/allocation.ts) against
 * a loopback gRPC pod-resources server on a unix socket in a temp dir.
 */

import assert from "node:assert/strict";
import {
  type PodResources,
  PodResourcesClient,
  PodResourcesError,
  readPodDevices,
} from "../../lib/devices/mod.ts";
import type { Logger } from "../../lib/log/mod.ts";
import { startPodResourcesServer } from "./pod_resources_server.ts";

const PODS: PodResources[] = [
  {
    name: "web-0",
    namespace: "tenant-a",
    containers: [
      {
        name: "app",
        devices: [{ resourceName: "example.com/vf", deviceIds: ["0000:18:02.5", "0000:18:02.3"] }],
      },
      {
        name: "sidecar",
        devices: [{ resourceName: "example.com/vf", deviceIds: ["0000:18:02.1"], numaNodes: [1] }],
      },
    ],
  },
  { name: "db-0", namespace: "tenant-a", containers: [] },
];

// grpc-js keeps timers and sockets of its own between calls.
const opts = { sanitizeOps: false, sanitizeResources: false };

function recordingLogger(lines: string[]): Logger {
  const logger: Logger = {
    debug: (m) => lines.push(`debug ${m}`),
    info: (m) => lines.push(`info ${m}`),
    warn: (m, f) => lines.push(`warn ${m} ${JSON.stringify(f ?? {})}`),
    error: (m) => lines.push(`error ${m}`),
    with: () => logger,
  };
  return logger;
}

async function withServer(
  options: Parameters<typeof startPodResourcesServer>[1],
  fn: (socket: string, calls: string[], dir: string) => Promise<void>,
) {
  const dir = await Deno.makeTempDir({ prefix: "mfpr-" });
  const server = await startPodResourcesServer(dir, options);
  try {
    await fn(server.socket, server.calls, dir);
  } finally {
    await server.stop();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name: "pod-resources: Get, List and GetAllocatableResources over a unix socket",
  ...opts,
  async fn() {
    const allocatable = [{ resourceName: "example.com/vf", deviceIds: ["a", "b"], numaNodes: [0] }];
    await withServer({ pods: PODS, allocatable }, async (socket, calls) => {
      using client = await PodResourcesClient.connect(socket, { timeoutMs: 2000 });
      assert.deepEqual(await client.get("tenant-a", "web-0"), PODS[0]);
      assert.deepEqual(await client.list(), PODS);
      assert.deepEqual(await client.allocatable(), allocatable);
      assert.deepEqual(await client.podResources("tenant-a", "web-0"), PODS[0]);
      // kubelet's "pod not found" is UNKNOWN: List is asked, and it has no such pod either.
      assert.equal(await client.podResources("tenant-a", "gone"), undefined);
      assert.deepEqual(calls, [
        "/v1.PodResourcesLister/Get",
        "/v1.PodResourcesLister/List",
        "/v1.PodResourcesLister/GetAllocatableResources",
        "/v1.PodResourcesLister/Get",
        "/v1.PodResourcesLister/Get",
        "/v1.PodResourcesLister/List",
      ]);
      client.close(); // idempotent with `using`
    });
  },
});

Deno.test({
  name: "pod-resources: kubelet without Get (UNIMPLEMENTED) is asked with List",
  ...opts,
  async fn() {
    await withServer({ pods: PODS, noGet: true }, async (socket, calls) => {
      using client = await PodResourcesClient.connect(socket);
      assert.deepEqual(await client.podResources("tenant-a", "web-0"), PODS[0]);
      assert.deepEqual(calls, ["/v1.PodResourcesLister/Get", "/v1.PodResourcesLister/List"]);
    });
  },
});

Deno.test({
  name: "pod-resources: a failing kubelet gives PodResourcesError code 11 with the gRPC status",
  ...opts,
  async fn() {
    await withServer({ pods: PODS, failWith: 8 }, async (socket) => {
      using client = await PodResourcesClient.connect(socket);
      await assert.rejects(client.list(), (e: unknown) => {
        assert.ok(e instanceof PodResourcesError);
        assert.equal(e.code, 11);
        assert.equal(e.grpcCode, 8);
        assert.match(e.details, /RESOURCE_EXHAUSTED/);
        return true;
      });
    });
  },
});

Deno.test({
  name: "pod-resources: nobody listening on the socket is UNAVAILABLE (14), quickly",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "mfpr-" });
    try {
      const listener = Deno.listen({ transport: "unix", path: `${dir}/kubelet.sock` });
      listener.close(); // the socket file stays, nobody accepts
      using client = await PodResourcesClient.connect(`${dir}/kubelet.sock`, { timeoutMs: 3000 });
      const started = performance.now();
      await assert.rejects(client.list(), (e: PodResourcesError) => e.grpcCode === 14);
      assert.ok(performance.now() - started < 2500);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "readPodDevices: the pod's devices over every container, sorted, from pod-resources",
  ...opts,
  async fn() {
    await withServer({ pods: PODS }, async (socket, _calls, dir) => {
      const got = await readPodDevices(
        { namespace: "tenant-a", name: "web-0", uid: "u1" },
        { podResourcesSocket: socket, checkpointFile: `${dir}/none` },
      );
      assert.deepEqual(got, {
        devices: { "example.com/vf": ["0000:18:02.1", "0000:18:02.3", "0000:18:02.5"] },
        source: "pod-resources",
      });
    });
  },
});

const CHECKPOINT = JSON.stringify({
  Data: {
    PodDeviceEntries: [
      {
        PodUID: "u1",
        ContainerName: "app",
        ResourceName: "example.com/vf",
        DeviceIDs: { "0": ["cp-2", "cp-1"] },
      },
    ],
  },
  Checksum: 1,
});

Deno.test({
  name: "readPodDevices: falls back to the checkpoint when the call fails (logged)",
  ...opts,
  async fn() {
    await withServer({ pods: PODS, failWith: 14 }, async (socket, _calls, dir) => {
      await Deno.writeTextFile(`${dir}/checkpoint`, CHECKPOINT);
      const lines: string[] = [];
      const got = await readPodDevices(
        { namespace: "tenant-a", name: "web-0", uid: "u1" },
        {
          podResourcesSocket: socket,
          checkpointFile: `${dir}/checkpoint`,
          logger: recordingLogger(lines),
        },
      );
      assert.deepEqual(got, {
        devices: { "example.com/vf": ["cp-1", "cp-2"] },
        source: "checkpoint",
      });
      assert.ok(
        lines.some((l) => l.startsWith("warn kubelet pod-resources call failed")),
        lines.join("\n"),
      );
    });
  },
});

Deno.test({
  name: "readPodDevices: falls back to the checkpoint when kubelet does not list the pod",
  ...opts,
  async fn() {
    await withServer({ pods: [] }, async (socket, _calls, dir) => {
      await Deno.writeTextFile(`${dir}/checkpoint`, CHECKPOINT);
      const got = await readPodDevices(
        { namespace: "tenant-a", name: "web-0", uid: "u1" },
        { podResourcesSocket: socket, checkpointFile: `${dir}/checkpoint` },
      );
      assert.equal(got.source, "checkpoint");
    });
  },
});

Deno.test("readPodDevices: no socket → checkpoint; no UID or no file → none (never throws)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mfpr-" });
  try {
    const lines: string[] = [];
    const base = { podResourcesSocket: `${dir}/absent.sock`, logger: recordingLogger(lines) };
    const pod = { namespace: "tenant-a", name: "web-0", uid: "u1" };
    await Deno.writeTextFile(`${dir}/checkpoint`, CHECKPOINT);
    assert.equal(
      (await readPodDevices(pod, { ...base, checkpointFile: `${dir}/checkpoint` })).source,
      "checkpoint",
    );
    assert.deepEqual(
      await readPodDevices({ ...pod, uid: "" }, { ...base, checkpointFile: `${dir}/checkpoint` }),
      { devices: {}, source: "none" },
    );
    assert.deepEqual(await readPodDevices(pod, { ...base, checkpointFile: `${dir}/none` }), {
      devices: {},
      source: "none",
    });
    await Deno.writeTextFile(`${dir}/broken`, "{");
    assert.deepEqual(await readPodDevices(pod, { ...base, checkpointFile: `${dir}/broken` }), {
      devices: {},
      source: "none",
    });
    assert.ok(lines.some((l) => l.includes("cannot use the device-plugin checkpoint")));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
