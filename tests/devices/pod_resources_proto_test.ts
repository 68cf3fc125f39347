/** Tests of lib/devices/pod_resources_proto.ts: round trips, unknown fields, bad bytes. */

import assert from "node:assert/strict";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  decodeAllocatableResourcesResponse,
  decodeGetPodResourcesRequest,
  decodeGetPodResourcesResponse,
  decodeListPodResourcesResponse,
  encodeAllocatableResourcesResponse,
  encodeGetPodResourcesRequest,
  encodeGetPodResourcesResponse,
  encodeListPodResourcesResponse,
  type PodResources,
} from "../../lib/devices/pod_resources_proto.ts";

const POD: PodResources = {
  name: "web-0",
  namespace: "tenant-a",
  containers: [
    {
      name: "app",
      devices: [
        {
          resourceName: "intel.com/sriov",
          deviceIds: ["0000:18:02.5", "0000:18:02.3"],
          numaNodes: [0, 1],
        },
        { resourceName: "nvidia.com/gpu", deviceIds: ["GPU-1"] },
      ],
    },
    { name: "sidecar", devices: [] },
  ],
};

Deno.test("GetPodResourcesRequest encodes field 1 name, 2 namespace", () => {
  const bytes = encodeGetPodResourcesRequest({ podName: "p", podNamespace: "ns" });
  assert.deepEqual([...bytes], [10, 1, 112, 18, 2, 110, 115]);
  assert.deepEqual(decodeGetPodResourcesRequest(bytes), { podName: "p", podNamespace: "ns" });
});

Deno.test("Get, List and Allocatable responses round-trip", () => {
  assert.deepEqual(decodeGetPodResourcesResponse(encodeGetPodResourcesResponse(POD)), POD);
  assert.equal(decodeGetPodResourcesResponse(encodeGetPodResourcesResponse(undefined)), undefined);
  const other = { ...POD, name: "db-0", containers: [] };
  assert.deepEqual(decodeListPodResourcesResponse(encodeListPodResourcesResponse([POD, other])), [
    POD,
    other,
  ]);
  const devices = POD.containers[0].devices;
  assert.deepEqual(
    decodeAllocatableResourcesResponse(encodeAllocatableResourcesResponse(devices)),
    devices,
  );
});

Deno.test("fields Manifold does not read are skipped (cpu_ids, memory, isolation…)", () => {
  // ContainerDevices with an unknown varint field 9.
  const dev = new BinaryWriter()
    .tag(1, WireType.LengthDelimited).string("r")
    .tag(9, WireType.Varint).int32(7)
    .tag(2, WireType.LengthDelimited).string("d1")
    .finish();
  // ContainerResources: devices, packed cpu_ids (3), memory (4), dynamic_resources (5).
  const container = new BinaryWriter()
    .tag(1, WireType.LengthDelimited).string("app")
    .tag(2, WireType.LengthDelimited).bytes(dev)
    .tag(3, WireType.LengthDelimited).fork().int64(2).int64(3).join()
    .tag(4, WireType.LengthDelimited).bytes(
      new BinaryWriter().tag(1, WireType.LengthDelimited).string("hugepages-1Gi").finish(),
    )
    .tag(5, WireType.LengthDelimited).bytes(new Uint8Array([18, 1, 120]))
    .finish();
  const pod = new BinaryWriter()
    .tag(1, WireType.LengthDelimited).string("p")
    .tag(2, WireType.LengthDelimited).string("ns")
    .tag(3, WireType.LengthDelimited).bytes(container)
    .tag(4, WireType.LengthDelimited).fork().int64(5).join()
    .tag(7, WireType.Bit32).fixed32(1)
    .finish();
  const list = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(pod).finish();
  assert.deepEqual(decodeListPodResourcesResponse(list), [{
    name: "p",
    namespace: "ns",
    containers: [{ name: "app", devices: [{ resourceName: "r", deviceIds: ["d1"] }] }],
  }]);
});

Deno.test("malformed bytes throw, never hang", () => {
  const good = encodeListPodResourcesResponse([POD]);
  for (let cut = 1; cut < good.length; cut += 3) {
    try {
      decodeListPodResourcesResponse(good.subarray(0, cut));
    } catch (e) {
      assert.ok(e instanceof Error);
    }
  }
  for (let i = 0; i < 300; i++) {
    const bytes = crypto.getRandomValues(new Uint8Array(1 + (i % 64)));
    try {
      decodeListPodResourcesResponse(bytes);
    } catch (e) {
      assert.ok(e instanceof Error);
    }
  }
});
