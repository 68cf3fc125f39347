/**
 * Tests of lib/devices/device_info.ts: Device Information Spec v1.1 validation, file paths,
 * copy/read/remove of device-info files. File tests use a temp dir.
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import {
  cniDeviceInfoPath,
  copyDeviceInfoFile,
  dpDeviceInfoPath,
  isPciAddress,
  MAX_DEVICE_INFO_BYTES,
  parseDeviceInfo,
  readDeviceInfoFile,
  removeDeviceInfoFile,
} from "../../lib/devices/mod.ts";

// The four shapes of the spec (multus-behaviour.md §d, device-info-spec v1.1.0 types.go).
const VALID = [
  {
    type: "pci",
    version: "1.1.0",
    pci: {
      "pci-address": "0000:18:02.5",
      "vhost-net": "/dev/vhost-net",
      "rdma-device": "mlx5_0",
      "pf-pci-address": "0000:18:00.0",
      "representor-device": "eth3",
    },
  },
  {
    type: "vdpa",
    version: "1.1.0",
    vdpa: {
      "parent-device": "vdpa2",
      driver: "vhost",
      path: "/dev/vhost-vdpa0",
      "pci-address": "0000:04:02.7",
      "pf-pci-address": "0000:04:00.0",
      "representor-device": "eth5",
    },
  },
  {
    type: "vhost-user",
    version: "1.1.0",
    "vhost-user": { mode: "client", path: "/var/run/net3/vhost.sock" },
  },
  {
    type: "memif",
    version: "1.1.0",
    memif: { role: "master", path: "/run/memif.sock", mode: "ethernet" },
  },
  // Version 1.0.0 files (older device plugins) are accepted; unknown keys are kept.
  {
    type: "pci",
    version: "1.0.0",
    pci: { "pci-address": "0000:01:02.2", "x-vendor": 1 },
    extra: true,
  },
];

for (const doc of VALID) {
  Deno.test(`parseDeviceInfo accepts ${doc.type} ${doc.version}`, () => {
    assert.deepEqual(parseDeviceInfo(JSON.stringify(doc)), doc);
  });
}

const INVALID: [string, string][] = [
  ["not JSON", "{"],
  ["a list", "[]"],
  ["no type", JSON.stringify({ version: "1.1.0", pci: { "pci-address": "0000:18:02.5" } })],
  ["unknown type", JSON.stringify({ type: "usb", version: "1.1.0" })],
  ["no version", JSON.stringify({ type: "pci", pci: { "pci-address": "0000:18:02.5" } })],
  [
    "version 2",
    JSON.stringify({ type: "pci", version: "2.0.0", pci: { "pci-address": "0000:18:02.5" } }),
  ],
  [
    "missing map of the type",
    JSON.stringify({ type: "vdpa", version: "1.1.0", pci: { "pci-address": "0000:18:02.5" } }),
  ],
  ["pci without address", JSON.stringify({ type: "pci", version: "1.1.0", pci: {} })],
  [
    "pci address not BDF",
    JSON.stringify({ type: "pci", version: "1.1.0", pci: { "pci-address": "18:02.5" } }),
  ],
  [
    "vdpa bad driver",
    JSON.stringify({
      type: "vdpa",
      version: "1.1.0",
      vdpa: { "parent-device": "vdpa1", driver: "mlx", path: "/dev/x" },
    }),
  ],
  [
    "vdpa relative path",
    JSON.stringify({
      type: "vdpa",
      version: "1.1.0",
      vdpa: { "parent-device": "vdpa1", driver: "vhost", path: "dev/x" },
    }),
  ],
  [
    "vhost-user bad mode",
    JSON.stringify({
      type: "vhost-user",
      version: "1.1.0",
      "vhost-user": { mode: "sideways", path: "/x" },
    }),
  ],
  [
    "vhost-user no path",
    JSON.stringify({ type: "vhost-user", version: "1.1.0", "vhost-user": { mode: "client" } }),
  ],
  [
    "memif bad role",
    JSON.stringify({
      type: "memif",
      version: "1.1.0",
      memif: { role: "leader", path: "/x", mode: "ip" },
    }),
  ],
  [
    "memif bad mode",
    JSON.stringify({
      type: "memif",
      version: "1.1.0",
      memif: { role: "slave", path: "/x", mode: "tcp" },
    }),
  ],
];

for (const [what, text] of INVALID) {
  Deno.test(`parseDeviceInfo rejects ${what} with code 6`, () => {
    assert.throws(() => parseDeviceInfo(text), (e: unknown) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, 6);
      assert.match(e.message, /device-info/);
      return true;
    });
  });
}

Deno.test("parseDeviceInfo: random input gives a typed error, never a crash", () => {
  for (let i = 0; i < 300; i++) {
    const bytes = crypto.getRandomValues(new Uint8Array(1 + (i % 40)));
    const text = i % 2 ? new TextDecoder().decode(bytes) : JSON.stringify({
      type: "pci",
      version: "1.1.0",
      pci: { "pci-address": String.fromCharCode(...bytes) },
    });
    try {
      parseDeviceInfo(text);
    } catch (e) {
      assert.ok(e instanceof CniError, String(e));
    }
  }
});

Deno.test("isPciAddress takes BDF addresses only", () => {
  for (const ok of ["0000:18:02.5", "0000:af:1f.7", "ABCD:00:00.0"]) {
    assert.ok(isPciAddress(ok), ok);
  }
  for (const bad of ["18:02.5", "0000:18:02.8", "0000:18:20.0", "vdpa2", "0000:18:02.5\n", ""]) {
    assert.ok(!isPciAddress(bad), bad);
  }
});

Deno.test("device-info paths follow the spec and Multus", () => {
  assert.equal(
    dpDeviceInfoPath("/var/run/k8s.cni.cncf.io/devinfo", "intel.com/sriov_vf", "0000:18:02.5"),
    "/var/run/k8s.cni.cncf.io/devinfo/dp/intel.com-sriov_vf-0000:18:02.5-device.json",
  );
  assert.equal(
    dpDeviceInfoPath("/d/", "a/b/c", "x/y"),
    "/d/dp/a-b-c-x-y-device.json",
  );
  assert.equal(
    cniDeviceInfoPath("/var/run/k8s.cni.cncf.io/devinfo", {
      network: "default/sriov-net",
      containerId: "3a1b",
      ifName: "net1",
    }),
    "/var/run/k8s.cni.cncf.io/devinfo/cni/default-sriov-net-3a1b_net1",
  );
});

Deno.test("copy, read and remove a device-info file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mfdi-" });
  try {
    const dp = dpDeviceInfoPath(dir, "example.com/vf", "0000:18:02.5");
    const cni = cniDeviceInfoPath(dir, { network: "ns/net", containerId: "c1", ifName: "net1" });
    assert.equal(await copyDeviceInfoFile(dp, cni), false, "no DP file: nothing copied");
    assert.equal(await readDeviceInfoFile(cni), undefined);

    await Deno.mkdir(`${dir}/dp`);
    const text = JSON.stringify(VALID[0], null, 2);
    await Deno.writeTextFile(dp, text);
    assert.equal(await copyDeviceInfoFile(dp, cni), true);
    assert.equal(await Deno.readTextFile(cni), text, "byte for byte");
    assert.equal((await Deno.stat(cni)).mode! & 0o777, 0o444);
    assert.deepEqual(await readDeviceInfoFile(cni), VALID[0]);

    // A leftover of an earlier attempt is replaced, even though it is read-only.
    await Deno.writeTextFile(dp, JSON.stringify(VALID[2]));
    assert.equal(await copyDeviceInfoFile(dp, cni), true);
    assert.deepEqual(await readDeviceInfoFile(cni), VALID[2]);
    assert.deepEqual([...Deno.readDirSync(`${dir}/cni`)].map((e) => e.name), ["ns-net-c1_net1"]);

    await removeDeviceInfoFile(cni);
    await removeDeviceInfoFile(cni); // idempotent
    assert.equal(await readDeviceInfoFile(cni), undefined);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("readDeviceInfoFile: malformed is code 6, oversized is code 5", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mfdi-" });
  try {
    await Deno.writeTextFile(`${dir}/bad`, '{"type":"vhost-user","version":"1.1.0"}');
    await assert.rejects(readDeviceInfoFile(`${dir}/bad`), (e: CniError) => e.code === 6);
    await Deno.writeTextFile(`${dir}/big`, " ".repeat(MAX_DEVICE_INFO_BYTES + 1));
    await assert.rejects(readDeviceInfoFile(`${dir}/big`), (e: CniError) => e.code === 5);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
