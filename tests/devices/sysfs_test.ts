/**
 * Tests of lib/devices/sysfs.ts against the fixture trees in tests/fixtures/sysfs
 * (see its README.txt): a VF with PF and RDMA, vDPA devices on both drivers, a plain veth.
 */

import assert from "node:assert/strict";
import { discoverDeviceInfo, parseDeviceInfo } from "../../lib/devices/mod.ts";

const fixture = (name: string) => new URL(`../fixtures/sysfs/${name}`, import.meta.url).pathname;

Deno.test("sysfs: SR-IOV VF with its PF and RDMA device", async () => {
  const info = await discoverDeviceInfo({ pciAddress: "0000:18:02.5" }, {
    sysfsRoot: fixture("vf-rdma"),
  });
  assert.deepEqual(info, {
    type: "pci",
    version: "1.1.0",
    pci: {
      "pci-address": "0000:18:02.5",
      "rdma-device": "mlx5_3",
      "pf-pci-address": "0000:18:00.0",
    },
  });
  // What we build passes our own validation.
  assert.deepEqual(parseDeviceInfo(JSON.stringify(info)), info);
});

Deno.test("sysfs: the same VF found from its netdev name", async () => {
  const info = await discoverDeviceInfo({ ifName: "net1" }, { sysfsRoot: fixture("vf-rdma") });
  assert.equal(info?.pci?.["pci-address"], "0000:18:02.5");
  assert.equal(info?.pci?.["rdma-device"], "mlx5_3");
});

Deno.test("sysfs: a PF has no pf-pci-address", async () => {
  const info = await discoverDeviceInfo({ pciAddress: "0000:18:00.0" }, {
    sysfsRoot: fixture("vf-rdma"),
  });
  assert.deepEqual(info?.pci, { "pci-address": "0000:18:00.0" });
});

Deno.test("sysfs: a VF bound to vfio-pci gets vhost-net when the host has it", async () => {
  const info = await discoverDeviceInfo({ pciAddress: "0000:18:02.6" }, {
    sysfsRoot: fixture("vf-rdma"),
  });
  assert.deepEqual(info?.pci, {
    "pci-address": "0000:18:02.6",
    "vhost-net": "/dev/vhost-net",
    "pf-pci-address": "0000:18:00.0",
  });
});

Deno.test("sysfs: vDPA on vhost_vdpa, by PCI address and by vDPA name", async () => {
  const want = {
    type: "vdpa",
    version: "1.1.0",
    vdpa: {
      "parent-device": "vdpa2",
      driver: "vhost",
      path: "/dev/vhost-vdpa-0",
      "pci-address": "0000:04:02.7",
      "pf-pci-address": "0000:04:00.0",
    },
  };
  const root = { sysfsRoot: fixture("vdpa") };
  assert.deepEqual(await discoverDeviceInfo({ pciAddress: "0000:04:02.7" }, root), want);
  assert.deepEqual(await discoverDeviceInfo({ vdpaDevice: "vdpa2" }, root), want);
  assert.deepEqual(parseDeviceInfo(JSON.stringify(want)), want);
});

Deno.test("sysfs: vDPA on virtio_vdpa, by PCI address and by its netdev", async () => {
  const want = {
    type: "vdpa",
    version: "1.1.0",
    vdpa: {
      "parent-device": "vdpa1",
      driver: "virtio",
      path: "/sys/bus/virtio/devices/virtio3",
      "pci-address": "0000:04:02.6",
      "pf-pci-address": "0000:04:00.0",
    },
  };
  const root = { sysfsRoot: fixture("vdpa") };
  assert.deepEqual(await discoverDeviceInfo({ pciAddress: "0000:04:02.6" }, root), want);
  assert.deepEqual(await discoverDeviceInfo({ ifName: "eth0" }, root), want);
});

Deno.test("sysfs: a plain veth has no device-info", async () => {
  assert.equal(
    await discoverDeviceInfo({ ifName: "veth0" }, { sysfsRoot: fixture("veth") }),
    undefined,
  );
});

Deno.test("sysfs: unknown devices and unsafe names give nothing", async () => {
  const root = { sysfsRoot: fixture("vf-rdma") };
  assert.equal(await discoverDeviceInfo({ pciAddress: "0000:99:00.0" }, root), undefined);
  assert.equal(await discoverDeviceInfo({ pciAddress: "../../etc" }, root), undefined);
  assert.equal(await discoverDeviceInfo({ ifName: "../../.." }, root), undefined);
  assert.equal(await discoverDeviceInfo({ vdpaDevice: ".." }, root), undefined);
  assert.equal(await discoverDeviceInfo({ ifName: "nope0" }, root), undefined);
  assert.equal(await discoverDeviceInfo({}, root), undefined);
  assert.equal(
    await discoverDeviceInfo({ pciAddress: "0000:18:02.5" }, { sysfsRoot: "/nonexistent" }),
    undefined,
  );
});
