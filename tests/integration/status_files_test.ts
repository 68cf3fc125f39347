/**
 * Standalone status files (no API server) through the real plugin process: two CNI_IFNAMEs of
 * one container keep their own `network-status/<containerId>@<ifName>.json`. Needs root.
 */

import assert from "node:assert/strict";
import { isRoot, Scratch } from "../support/netns.ts";
import { runPlugin } from "../support/plugin.ts";

const rootOnly = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

Deno.test({
  name: "standalone: two CNI_IFNAMEs of one container keep separate status files",
  ...rootOnly,
  async fn() {
    const s = new Scratch();
    try {
      const netns = await s.netns("stf");
      const cache = await s.dir();
      const ipam = await s.dir();
      const bridge = s.trackLink(`mfst${s.id}`);
      const containerId = `status-${s.id}`;
      const conf = {
        cniVersion: "1.0.0",
        name: "manifold-status",
        type: "manifold",
        cniDir: cache,
        delegates: [{
          cniVersion: "1.0.0",
          name: `mft-status-${s.id}`,
          type: "bridge",
          bridge,
          ipam: { type: "host-local", subnet: "10.247.10.0/24", dataDir: ipam },
        }],
      };
      const call = (command: "ADD" | "DEL", ifName: string) =>
        runPlugin({ command, config: conf, containerId, netns: `/var/run/netns/${netns}`, ifName });
      const file = (ifName: string) => `${cache}/network-status/${containerId}@${ifName}.json`;
      const status = async (ifName: string) =>
        (JSON.parse(await Deno.readTextFile(file(ifName))) as { interface: string }[]).map((e) =>
          e.interface
        );

      for (const ifName of ["eth0", "eth1"]) {
        const add = await call("ADD", ifName);
        assert.equal(add.code, 0, `ADD ${ifName}: ${add.stdout}${add.stderr}`);
      }
      assert.deepEqual(await status("eth0"), ["eth0"]);
      assert.deepEqual(await status("eth1"), ["eth1"]);

      const del = await call("DEL", "eth0");
      assert.equal(del.code, 0, `DEL eth0: ${del.stdout}${del.stderr}`);
      await assert.rejects(Deno.stat(file("eth0")), Deno.errors.NotFound);
      assert.deepEqual(await status("eth1"), ["eth1"], "the other interface's status stays");
      const del1 = await call("DEL", "eth1");
      assert.equal(del1.code, 0, `DEL eth1: ${del1.stdout}${del1.stderr}`);
      assert.deepEqual([...Deno.readDirSync(`${cache}/network-status`)], []);
    } finally {
      await s.cleanup();
    }
  },
});
