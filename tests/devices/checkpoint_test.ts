/** Tests of lib/devices/checkpoint.ts: both DeviceIDs layouts, nulls, other pods, bad files. */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { parseCheckpointDevices, readCheckpointDevices } from "../../lib/devices/mod.ts";

const checkpoint = (entries: unknown) =>
  JSON.stringify({
    Data: {
      PodDeviceEntries: entries,
      RegisteredDevices: { "intel.com/sriov": ["0000:18:02.1", "0000:18:02.3", "0000:18:02.5"] },
    },
    Checksum: 1234567,
  });

Deno.test("checkpoint: newer layout (DeviceIDs by NUMA node), every container, sorted", () => {
  const text = checkpoint([
    {
      PodUID: "u1",
      ContainerName: "app",
      ResourceName: "intel.com/sriov",
      DeviceIDs: { "1": ["0000:18:02.5"], "0": ["0000:18:02.3"] },
      AllocResp: "CgA=",
    },
    {
      PodUID: "u1",
      ContainerName: "sidecar",
      ResourceName: "intel.com/sriov",
      DeviceIDs: { "0": ["0000:18:02.1", "0000:18:02.3"] },
    },
    {
      PodUID: "u1",
      ContainerName: "app",
      ResourceName: "nvidia.com/gpu",
      DeviceIDs: { "-1": ["GPU-1"] },
    },
    {
      PodUID: "u2",
      ContainerName: "app",
      ResourceName: "intel.com/sriov",
      DeviceIDs: { "0": ["0000:18:02.7"] },
    },
  ]);
  assert.deepEqual(parseCheckpointDevices(text, "u1"), {
    "intel.com/sriov": ["0000:18:02.1", "0000:18:02.3", "0000:18:02.5"],
    "nvidia.com/gpu": ["GPU-1"],
  });
  assert.deepEqual(parseCheckpointDevices(text, "u2"), { "intel.com/sriov": ["0000:18:02.7"] });
  assert.deepEqual(parseCheckpointDevices(text, "u3"), {});
});

Deno.test("checkpoint: older layout (a plain list) and Go nulls", () => {
  const text = checkpoint([
    { PodUID: "u1", ContainerName: "app", ResourceName: "r", DeviceIDs: ["b", "a"] },
    { PodUID: "u1", ContainerName: "app", ResourceName: "s", DeviceIDs: null },
    { PodUID: "u1", ContainerName: "app", ResourceName: "t", DeviceIDs: { "0": null } },
  ]);
  assert.deepEqual(parseCheckpointDevices(text, "u1"), { r: ["a", "b"], s: [], t: [] });
  assert.deepEqual(parseCheckpointDevices(checkpoint(null), "u1"), {});
});

Deno.test("checkpoint: malformed text is code 6", () => {
  for (const bad of ["", "{", "[]", '{"Data":{"PodDeviceEntries":[{"PodUID":1}]}}', "{}"]) {
    assert.throws(() => parseCheckpointDevices(bad, "u1"), (e: unknown) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, 6);
      return true;
    }, bad);
  }
});

Deno.test("readCheckpointDevices: missing file is undefined", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mfcp-" });
  try {
    assert.equal(await readCheckpointDevices(`${dir}/none`, "u1"), undefined);
    await Deno.writeTextFile(
      `${dir}/cp`,
      checkpoint([{ PodUID: "u1", ResourceName: "r", DeviceIDs: { "0": ["x"] } }]),
    );
    assert.deepEqual(await readCheckpointDevices(`${dir}/cp`, "u1"), { r: ["x"] });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
