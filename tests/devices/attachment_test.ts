/** Tests of lib/devices/attachment.ts: the device-info steps around one delegate ADD. */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import {
  cniDeviceInfoPath,
  collectDeviceInfo,
  dpDeviceInfoPath,
  prepareDeviceInfoFile,
  resultPciId,
} from "../../lib/devices/mod.ts";

const sysfs = (name: string) => new URL(`../fixtures/sysfs/${name}`, import.meta.url).pathname;
const attachment = { network: "tenant-a/sriov-net", containerId: "c1", ifName: "net1" };

Deno.test("prepare: DP file copied for an allocated device; path for a declaring plugin", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mfat-" });
  try {
    const cni = cniDeviceInfoPath(dir, attachment);
    // No device plugin file and no capability: nothing.
    assert.equal(
      await prepareDeviceInfoFile({ ...attachment, declaresCapability: false, deviceInfoDir: dir }),
      undefined,
    );
    // A declaring plugin gets the path, and a stale file is removed so only it writes there.
    await Deno.mkdir(`${dir}/cni`, { recursive: true });
    await Deno.writeTextFile(cni, "stale");
    assert.equal(
      await prepareDeviceInfoFile({ ...attachment, declaresCapability: true, deviceInfoDir: dir }),
      cni,
    );
    await assert.rejects(Deno.stat(cni), Deno.errors.NotFound);
    // The device plugin's file is copied even when no plugin declares the capability.
    const body = '{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.5"}}';
    await Deno.mkdir(`${dir}/dp`);
    await Deno.writeTextFile(dpDeviceInfoPath(dir, "example.com/vf", "0000:18:02.5"), body);
    assert.equal(
      await prepareDeviceInfoFile({
        ...attachment,
        resourceName: "example.com/vf",
        deviceId: "0000:18:02.5",
        declaresCapability: false,
        deviceInfoDir: dir,
      }),
      cni,
    );
    assert.equal(await Deno.readTextFile(cni), body);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("collect: the file wins; else sysfs for pciID or a PCI deviceID; else nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mfat-" });
  try {
    const file = `${dir}/f`;
    const vu = {
      type: "vhost-user",
      version: "1.1.0",
      "vhost-user": { mode: "server", path: "/run/vu.sock" },
    };
    await Deno.writeTextFile(file, JSON.stringify(vu));
    const base = { ifName: "net1", sysfsRoot: sysfs("vf-rdma") };
    assert.deepEqual(
      await collectDeviceInfo({ ...base, deviceInfoFile: file, deviceId: "0000:18:02.5" }),
      vu,
    );

    const fromSysfs = await collectDeviceInfo({
      ...base,
      deviceInfoFile: `${dir}/none`,
      deviceId: "0000:18:02.5",
    });
    assert.equal(fromSysfs?.pci?.["rdma-device"], "mlx5_3");

    const result = {
      cniVersion: "1.1.0",
      interfaces: [{ name: "net1", sandbox: "/x", pciID: "0000:18:02.6" }],
    };
    assert.equal(
      (await collectDeviceInfo({ ...base, result }))?.pci?.["pci-address"],
      "0000:18:02.6",
    );

    assert.equal(
      (await collectDeviceInfo({ ifName: "net1", sysfsRoot: sysfs("vdpa"), deviceId: "vdpa2" }))
        ?.type,
      "vdpa",
    );
    assert.equal(await collectDeviceInfo({ ...base, deviceId: "GPU-1" }), undefined);
    assert.equal(await collectDeviceInfo(base), undefined);

    await Deno.writeTextFile(
      file,
      '{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"x"}}',
    );
    await assert.rejects(
      collectDeviceInfo({ ...base, deviceInfoFile: file }),
      (e: CniError) => e.code === 6,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("resultPciId prefers the attachment's interface", () => {
  const result = {
    interfaces: [
      { name: "host-rep", pciID: "0000:18:00.0" },
      { name: "net1", sandbox: "/x", pciID: "0000:18:02.5" },
      { name: "net2", pciID: "not-pci" },
    ],
  };
  assert.equal(resultPciId(result, "net1"), "0000:18:02.5");
  assert.equal(resultPciId(result, "other"), "0000:18:00.0");
  assert.equal(resultPciId({ interfaces: [{ name: "net1" }] }, "net1"), undefined);
  assert.equal(resultPciId(undefined, "net1"), undefined);
  assert.equal(resultPciId({ interfaces: "x" }, "net1"), undefined);
});
