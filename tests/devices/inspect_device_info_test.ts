/**
 * `manifold inspect` shows device-info beside each attachment (lib/cli/inspect.ts): from the
 * cached attachment, else from the cached network-status; a DEVICE column only when some
 * attachment has one. Pure: no permissions.
 */

import assert from "node:assert/strict";
import { buildInspectReport, formatInspectJson, formatInspectTable } from "../../lib/cli/mod.ts";
import { CACHE_SCHEMA_VERSION, type CacheRecord } from "../../lib/multinet/cache/cache.ts";
import type { NetnsSnapshot } from "../../lib/netlink/mod.ts";

const snapshot: NetnsSnapshot = {
  netns: "/var/run/netns/pod",
  interfaces: ["eth0", "net1", "net2"].map((name, i) => ({
    name,
    index: i + 2,
    mac: `02:00:00:00:00:0${i}`,
    mtu: 1500,
    operState: "UP",
    flags: 0,
    type: 1,
    addresses: [`10.0.${i}.2/24`],
  })),
  routes: [],
};

const pci = {
  type: "pci",
  version: "1.1.0",
  pci: { "pci-address": "0000:18:02.5", "rdma-device": "mlx5_3", "pf-pci-address": "0000:18:00.0" },
};
const vhostUser = {
  type: "vhost-user",
  version: "1.1.0",
  "vhost-user": { mode: "server", path: "/run/vu.sock" },
};

function record(withDevices: boolean): CacheRecord {
  const attachment = (statusName: string, ifName: string, i: number) => ({
    statusName,
    isDefault: i === 0,
    ifName,
    conflist: { cniVersion: "1.0.0", name: statusName, plugins: [{ type: "bridge" }] },
    capabilityArgs: {},
    cniArgs: [] as [string, string][],
    state: "added" as const,
    result: {
      cniVersion: "1.0.0",
      interfaces: [{ name: ifName, mac: `02:00:00:00:00:0${i}`, sandbox: "/var/run/netns/pod" }],
      ips: [{ address: `10.0.${i}.2/24`, interface: 0 }],
    },
  });
  const rec: CacheRecord = {
    schemaVersion: CACHE_SCHEMA_VERSION,
    containerId: "c1",
    netns: "/var/run/netns/pod",
    ifName: "eth0",
    pod: { namespace: "ns", name: "p", uid: "u" },
    cniVersion: "1.0.0",
    createdAt: "2026-01-01T00:00:00.000Z",
    attachments: [
      attachment("cbr0", "eth0", 0),
      attachment("ns/sriov", "net1", 1),
      attachment("ns/vu", "net2", 2),
    ],
  };
  if (withDevices) {
    rec.attachments[1].deviceInfo = pci;
    // An older record: device-info only in the published network-status.
    rec.networkStatus = [
      { name: "cbr0", interface: "eth0", default: true },
      { name: "ns/sriov", interface: "net1", default: false },
      { name: "ns/vu", interface: "net2", default: false, "device-info": vhostUser },
    ];
  }
  return rec;
}

Deno.test("inspect: device-info per attachment in JSON and a DEVICE column", () => {
  const report = buildInspectReport(snapshot, { record: record(true) });
  assert.deepEqual(report.interfaces.map((i) => i.deviceInfo), [undefined, pci, vhostUser]);
  const json = JSON.parse(formatInspectJson(report));
  assert.deepEqual(json.interfaces[1].deviceInfo, pci);
  assert.equal("deviceInfo" in json.interfaces[0], false);

  const lines = formatInspectTable(report).split("\n");
  const header = lines.find((l) => l.startsWith("NETWORK"))!;
  assert.match(header, /ADDRESSES\s+DEVICE\s+PROBLEMS$/);
  const row = (net: string) => lines.find((l) => l.startsWith(net))!;
  assert.match(row("ns/sriov"), /pci 0000:18:02\.5 pf=0000:18:00\.0 rdma=mlx5_3/);
  assert.match(row("ns/vu"), /vhost-user server \/run\/vu\.sock/);
  assert.match(row("cbr0"), /10\.0\.0\.2\/24\s+-\s+-$/);
});

Deno.test("inspect: no DEVICE column when no attachment has device-info", () => {
  const table = formatInspectTable(buildInspectReport(snapshot, { record: record(false) }));
  assert.doesNotMatch(table, /DEVICE/);
});
