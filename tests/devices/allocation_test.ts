/** Tests of DeviceAllocator, devicesOf (lib/devices/allocation.ts), injectDeviceId and withDevice (inject.ts). */

import assert from "node:assert/strict";
import { DeviceAllocator, devicesOf, injectDeviceId, withDevice } from "../../lib/devices/mod.ts";

Deno.test("DeviceAllocator: sorted IDs, each once per pod, per resource; loads once", async () => {
  let loads = 0;
  const alloc = new DeviceAllocator(() => {
    loads++;
    return Promise.resolve({
      devices: { r: ["0000:18:02.3", "0000:18:02.5"], s: ["x"] },
      source: "pod-resources" as const,
    });
  });
  alloc.prefetch();
  assert.equal(await alloc.take("r"), "0000:18:02.3");
  assert.equal(await alloc.take("s"), "x");
  assert.equal(await alloc.take("r"), "0000:18:02.5");
  assert.equal(await alloc.take("r"), undefined);
  assert.equal(await alloc.take("s"), undefined);
  assert.equal(await alloc.take("unknown"), undefined);
  assert.equal(await alloc.source(), "pod-resources");
  assert.equal(loads, 1);
});

Deno.test("devicesOf merges containers, drops duplicates, sorts", () => {
  assert.deepEqual(
    devicesOf({
      name: "p",
      namespace: "ns",
      containers: [
        { name: "a", devices: [{ resourceName: "r", deviceIds: ["b", "a"] }] },
        {
          name: "b",
          devices: [{ resourceName: "r", deviceIds: ["a", "c"] }, {
            resourceName: "s",
            deviceIds: [],
          }],
        },
      ],
    }),
    { r: ["a", "b", "c"], s: [] },
  );
});

Deno.test("injectDeviceId: deviceID in every plugin, pciBusID for PCI, input untouched", () => {
  const conflist = {
    cniVersion: "1.0.0",
    name: "sriov-net",
    plugins: [{ type: "sriov", vlan: 10 }, { type: "tuning", capabilities: { mac: true } }],
  };
  const before = structuredClone(conflist);
  const out = injectDeviceId(conflist, "0000:18:02.5");
  assert.deepEqual(conflist, before, "input not mutated");
  assert.deepEqual(out, {
    cniVersion: "1.0.0",
    name: "sriov-net",
    plugins: [
      { type: "sriov", vlan: 10, deviceID: "0000:18:02.5", pciBusID: "0000:18:02.5" },
      {
        type: "tuning",
        capabilities: { mac: true },
        deviceID: "0000:18:02.5",
        pciBusID: "0000:18:02.5",
      },
    ],
  });
  const vdpa = injectDeviceId(conflist, "vdpa2");
  assert.deepEqual((vdpa.plugins as Record<string, unknown>[])[0], {
    type: "sriov",
    vlan: 10,
    deviceID: "vdpa2",
  });
});

Deno.test("withDevice: conflist injected and runtimeConfig deviceID added, inputs untouched", () => {
  const conflist = { name: "n", plugins: [{ type: "sriov" }] };
  const capabilityArgs = { ips: ["10.0.0.2/24"] };
  const out = withDevice(conflist, capabilityArgs, "0000:18:02.5");
  assert.deepEqual(out.conflist, {
    name: "n",
    plugins: [{ type: "sriov", deviceID: "0000:18:02.5", pciBusID: "0000:18:02.5" }],
  });
  assert.deepEqual(out.capabilityArgs, { ips: ["10.0.0.2/24"], deviceID: "0000:18:02.5" });
  assert.deepEqual(conflist, { name: "n", plugins: [{ type: "sriov" }] });
  assert.deepEqual(capabilityArgs, { ips: ["10.0.0.2/24"] });
});
