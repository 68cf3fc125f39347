/**
 * Devices end to end, through the plugin process as a runtime calls it (root: real netns,
 * real bridge delegates wrapped by test-double scripts):
 *
 * - a NAD annotated `k8s.v1.cni.cncf.io/resourceName`, attached three times for two devices:
 *   the devices come from a loopback gRPC pod-resources server on a unix socket; each
 *   attachment's delegate receives the next sorted device as `deviceID`/`pciBusID` and as runtimeConfig `deviceID`; the device
 *   plugin's device-info file is copied and reported, and a device without one is described
 *   from a fixture sysfs tree; the third attachment runs without a device and a Warning says
 *   why; DEL removes the CNI file;
 * - delegates declaring `CNIDeviceInfoFile` that write a vhost-user device-info file (one valid,
 *   one malformed): the status carries the valid one; the malformed one gives a Warning event and
 *   no `device-info`, and the pod still succeeds; DEL removes both files.
 */

import assert from "node:assert/strict";
import { isRoot, sh } from "../support/netns.ts";
import { MANIFOLD } from "../support/plugin.ts";
import { done, expectOk, NS, POD, podStatus, type World, world } from "../support/world.ts";
import {
  type PodResourcesServer,
  startPodResourcesServer,
} from "../devices/pod_resources_server.ts";
import { exists } from "../support/wait.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };
const SYSFS = new URL("../fixtures/sysfs/vf-rdma", import.meta.url).pathname;
const RESOURCE = "example.com/vf";

interface Recorded {
  config: Record<string, unknown>;
  env: Record<string, string>;
}

/**
 * Writes `<bin>/<name>`: records stdin and CNI_* as a JSON line, on ADD writes `deviceInfo`
 * (when given) to the runtimeConfig `CNIDeviceInfoFile` path, then runs the real bridge plugin.
 */
async function delegate(bin: string, name: string, log: string, deviceInfo?: string) {
  const write = deviceInfo === undefined ? "" : `
if [ "$CNI_COMMAND" = ADD ]; then
  file=$(printf '%s' "$input" | sed -n 's/.*"CNIDeviceInfoFile":"\\([^"]*\\)".*/\\1/p')
  [ -n "$file" ] && mkdir -p "$(dirname "$file")" && printf '%s' '${deviceInfo}' > "$file"
fi`;
  await Deno.writeTextFile(
    `${bin}/${name}`,
    `#!/bin/sh
input=$(cat)
printf '{"config":%s,"env":{"CNI_COMMAND":"%s","CNI_IFNAME":"%s"}}\\n' "$input" "$CNI_COMMAND" "$CNI_IFNAME" >> ${log}
${write}
printf '%s' "$input" | exec /usr/lib/cni/bridge
`,
  );
  await Deno.chmod(`${bin}/${name}`, 0o755);
}

async function records(log: string, command: string): Promise<Recorded[]> {
  const text = await Deno.readTextFile(log).catch(() => "");
  return text.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l) as Recorded)
    .filter((r) => r.env.CNI_COMMAND === command);
}

function statusOf(w: World, ifName: string): Record<string, unknown> {
  const entry = podStatus(w).find((s) => s.interface === ifName);
  assert.ok(entry, `status entry for ${ifName}`);
  return entry!;
}

/** The device plugin's device-info of 0000:18:02.3 (0000:18:02.5 has none: sysfs describes it). */
const DP_INFO = {
  type: "pci",
  version: "1.1.0",
  pci: { "pci-address": "0000:18:02.3", "pf-pci-address": "0000:18:00.0" },
};

/**
 * A pod asking three times for `vf-net`, a NAD of resource {@link RESOURCE} whose delegate
 * (`rec-vf`: records, then bridge) declares `deviceID`; kubelet (a pod-resources server) gave
 * the pod two devices (`pods`: empty it and kubelet forgets them). The caller stops `server` and
 * `done`s `w`.
 */
async function vfWorld(base: string) {
  const pods = [{
    name: POD,
    namespace: NS,
    containers: [{
      name: "app",
      devices: [{ resourceName: RESOURCE, deviceIds: ["0000:18:02.5", "0000:18:02.3"] }],
    }],
  }];
  const server = await startPodResourcesServer(base, { pods });
  const devinfo = `${base}/devinfo`;
  await Deno.mkdir(`${devinfo}/dp`, { recursive: true });
  await Deno.writeTextFile(
    `${devinfo}/dp/example.com-vf-0000:18:02.3-device.json`,
    JSON.stringify(DP_INFO),
  );
  let w: World;
  try {
    w = await world({
      annotations: {
        // Three attachments, two devices: the third runs without one (a Warning).
        "k8s.v1.cni.cncf.io/networks": JSON.stringify([
          { name: "vf-net" },
          { name: "vf-net" },
          { name: "vf-net" },
        ]),
      },
      conf: {
        podResourcesSocket: server.socket,
        deviceCheckpointFile: `${base}/no-checkpoint`,
        deviceInfoDir: devinfo,
        sysfsRoot: SYSFS,
      },
    });
  } catch (e) {
    await server.stop();
    throw e;
  }
  const log = `${base}/calls.jsonl`;
  await delegate(w.dirs.bin, "rec-vf", log);
  w.api.addNad({
    namespace: NS,
    name: "vf-net",
    annotations: { "k8s.v1.cni.cncf.io/resourceName": RESOURCE },
    config: JSON.stringify({
      cniVersion: "1.0.0",
      name: "vf-net",
      plugins: [{
        type: "rec-vf",
        bridge: w.br.sec,
        ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.7.0/24" },
        capabilities: { deviceID: true },
      }],
    }),
  });
  return { server, w, log, devinfo, pods };
}

Deno.test({
  name:
    "resourceName: sorted deviceIDs from pod-resources reach each delegate; device-info reported",
  ...root,
  async fn() {
    const base = await Deno.makeTempDir({ prefix: "mfdev-" });
    let server: PodResourcesServer | undefined;
    let w: World | undefined;
    try {
      const vf = await vfWorld(base);
      ({ server, w } = vf);
      const { log, devinfo } = vf;
      const dpInfo = DP_INFO;

      const add = await w.call("ADD");
      expectOk(add, "ADD");
      const adds = await records(log, "ADD");
      assert.deepEqual(
        adds.map((r) => [
          r.env.CNI_IFNAME,
          r.config.deviceID,
          r.config.pciBusID,
          r.config.runtimeConfig,
        ]),
        [
          ["net1", "0000:18:02.3", "0000:18:02.3", { deviceID: "0000:18:02.3" }],
          ["net2", "0000:18:02.5", "0000:18:02.5", { deviceID: "0000:18:02.5" }],
          ["net3", undefined, undefined, undefined],
        ],
      );
      const missing = w.api.events.find((e) =>
        (e as { reason?: string }).reason === "DeviceNotAllocated"
      ) as { type?: string; message?: string } | undefined;
      assert.equal(missing?.type, "Warning");
      assert.match(missing!.message!, /example\.com\/vf/);
      assert.equal(statusOf(w, "net3")["device-info"], undefined);
      assert.ok(server.calls.length >= 1, "kubelet was asked");

      assert.deepEqual(statusOf(w, "net1")["device-info"], dpInfo);
      assert.deepEqual(statusOf(w, "net2")["device-info"], {
        type: "pci",
        version: "1.1.0",
        pci: {
          "pci-address": "0000:18:02.5",
          "rdma-device": "mlx5_3",
          "pf-pci-address": "0000:18:00.0",
        },
      });
      assert.equal(statusOf(w, "eth0")["device-info"], undefined);
      const cniFile = `${devinfo}/cni/${NS}-vf-net-${w.containerId}_net1`;
      assert.deepEqual(JSON.parse(await Deno.readTextFile(cniFile)), dpInfo);

      const del = await w.call("DEL");
      expectOk(del, "DEL");
      const dels = await records(log, "DEL");
      assert.deepEqual(dels.map((r) => [r.env.CNI_IFNAME, r.config.deviceID]), [
        ["net3", undefined],
        ["net2", "0000:18:02.5"],
        ["net1", "0000:18:02.3"],
      ]);
      assert.equal(await exists(cniFile), false, "DEL removes the CNI device-info file");
      assert.ok(await exists(`${devinfo}/dp/example.com-vf-0000:18:02.3-device.json`));
    } finally {
      if (w) await done(w);
      await server?.stop();
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "resourceName: a DEL without a cache gives each delegate back the device ADD gave it",
  ...root,
  async fn() {
    const base = await Deno.makeTempDir({ prefix: "mfdev-" });
    let server: PodResourcesServer | undefined;
    let w: World | undefined;
    try {
      const vf = await vfWorld(base);
      ({ server, w } = vf);
      // Kubelet still lists the pod's devices at DEL, or has forgotten them (pod deleted).
      for (const kubeletForgot of [false, true]) {
        const containerId = `${vf.w.containerId}${kubeletForgot ? "b" : "a"}`;
        expectOk(await vf.w.call("ADD", { containerId }), "ADD");
        const files = ["net1", "net2", "net3"].map((n) =>
          `${vf.devinfo}/cni/${NS}-vf-net-${containerId}_${n}`
        );
        // net1's device has a device plugin's file (copied); net2's was described from sysfs.
        assert.deepEqual(await Promise.all(files.map(exists)), [true, false, false]);
        // The cache is lost (a wiped /var/lib/cni): DEL rebuilds from the pod and the NADs.
        for await (const e of Deno.readDir(vf.w.dirs.cache)) {
          if (e.name.startsWith(containerId)) await Deno.remove(`${vf.w.dirs.cache}/${e.name}`);
        }
        if (kubeletForgot) vf.pods.length = 0;
        await Deno.writeTextFile(vf.log, "");
        expectOk(await vf.w.call("DEL", { containerId }), "DEL without a cache");
        const dels = await records(vf.log, "DEL");
        const net2 = kubeletForgot ? undefined : "0000:18:02.5"; // only kubelet knew it
        assert.deepEqual(
          dels.map((r) => [r.env.CNI_IFNAME, r.config.deviceID, r.config.runtimeConfig]),
          [
            ["net3", undefined, undefined],
            ["net2", net2, net2 ? { deviceID: net2 } : undefined],
            ["net1", "0000:18:02.3", { deviceID: "0000:18:02.3" }], // its device-info file
          ],
          `kubelet forgot the pod: ${kubeletForgot}`,
        );
        assert.deepEqual(await Promise.all(files.map(exists)), [false, false, false]);
      }
    } finally {
      if (w) await done(w);
      await server?.stop();
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "CNIDeviceInfoFile: a vhost-user file is reported; a malformed one warns, the pod succeeds",
  ...root,
  async fn() {
    const base = await Deno.makeTempDir({ prefix: "mfdev-" });
    let w: World | undefined;
    try {
      const devinfo = `${base}/devinfo`;
      w = await world({
        annotations: {
          "k8s.v1.cni.cncf.io/networks": JSON.stringify([{ name: "vu-net" }, { name: "vu-bad" }]),
        },
        conf: {
          // No kubelet here: nothing asks for a device, so neither is read.
          podResourcesSocket: `${base}/absent.sock`,
          deviceCheckpointFile: `${base}/absent`,
          deviceInfoDir: devinfo,
          sysfsRoot: SYSFS,
        },
      });
      const log = `${base}/calls.jsonl`;
      const good = {
        type: "vhost-user",
        version: "1.1.0",
        "vhost-user": { mode: "client", path: "/var/run/vhost/net1.sock" },
      };
      await delegate(w.dirs.bin, "vu-good", log, JSON.stringify(good));
      await delegate(
        w.dirs.bin,
        "vu-bad",
        log,
        JSON.stringify({
          type: "vhost-user",
          version: "1.1.0",
          "vhost-user": { mode: "sideways" },
        }),
      );
      for (const [name, type, subnet] of [["vu-net", "vu-good", 8], ["vu-bad", "vu-bad", 9]]) {
        w.api.addNad({
          namespace: NS,
          name: String(name),
          config: JSON.stringify({
            cniVersion: "1.0.0",
            name,
            plugins: [{
              type,
              bridge: w.br.sec,
              ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: `10.240.${subnet}.0/24` },
              capabilities: { CNIDeviceInfoFile: true },
            }],
          }),
        });
      }

      const add = await w.call("ADD");
      expectOk(add, "ADD with a malformed device-info file");
      const files = {
        net1: `${devinfo}/cni/${NS}-vu-net-${w.containerId}_net1`,
        net2: `${devinfo}/cni/${NS}-vu-bad-${w.containerId}_net2`,
      };
      const adds = await records(log, "ADD");
      assert.deepEqual(adds.map((r) => r.config.runtimeConfig), [
        { CNIDeviceInfoFile: files.net1 },
        { CNIDeviceInfoFile: files.net2 },
      ]);
      assert.deepEqual(statusOf(w, "net1")["device-info"], good);
      const bad = statusOf(w, "net2");
      assert.equal(bad["device-info"], undefined);
      assert.ok(Array.isArray(bad.ips) && bad.ips.length === 1, "the attachment itself is fine");
      const warning = w.api.events.find((e) =>
        (e as { reason?: string }).reason === "DeviceInfoInvalid"
      ) as { type?: string; message?: string } | undefined;
      assert.ok(warning, "a DeviceInfoInvalid event");
      assert.equal(warning!.type, "Warning");
      assert.match(warning!.message!, /tenant-a\/vu-bad/);
      assert.match(warning!.message!, /mode/);
      assert.match(add.stderr, /DeviceInfoInvalid/);
      assert.ok(await exists(files.net1) && await exists(files.net2));

      // `manifold inspect` shows the device-info beside the attachment.
      const inspect = await sh(MANIFOLD, [
        "inspect",
        "--pod",
        `${NS}/${POD}`,
        "--cni-dir",
        w.dirs.cache,
        "--json",
      ]);
      assert.equal(inspect.code, 0, inspect.stderr);
      const report = JSON.parse(inspect.stdout) as {
        interfaces: { ifName: string; deviceInfo?: unknown }[];
      };
      assert.deepEqual(
        report.interfaces.map((i) => [i.ifName, i.deviceInfo]),
        [["eth0", undefined], ["net1", good], ["net2", undefined]],
      );
      const table = await sh(MANIFOLD, [
        "inspect",
        "--pod",
        `${NS}/${POD}`,
        "--cni-dir",
        w.dirs.cache,
      ]);
      assert.match(table.stdout, /DEVICE/);
      assert.match(table.stdout, /vhost-user client \/var\/run\/vhost\/net1\.sock/);

      const del = await w.call("DEL");
      expectOk(del, "DEL");
      assert.equal(await exists(files.net1), false);
      assert.equal(await exists(files.net2), false);
      const again = await w.call("DEL");
      expectOk(again, "second DEL");
    } finally {
      if (w) await done(w);
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});
