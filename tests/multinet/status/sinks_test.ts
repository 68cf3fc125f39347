/** Tests of lib/multinet/status/sinks.ts: the standalone status files (FileStatusSink). */

import assert from "node:assert/strict";
import { FileStatusSink } from "../../../lib/multinet/status/sinks.ts";
import { nullLogger } from "../../../lib/log/mod.ts";
import type { NetworkStatus } from "../../../lib/multinet/types.ts";

const entry = (iface: string): NetworkStatus => ({
  name: "cbr0",
  interface: iface,
  ips: ["10.1.0.2"],
  default: true,
});

Deno.test("FileStatusSink: one file per (containerId, ifName), legacy name read and removed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-status-" });
  try {
    const eth0 = new FileStatusSink(dir, nullLogger, { ifName: "eth0" });
    const eth1 = new FileStatusSink(dir, nullLogger, { ifName: "net@1" });
    assert.equal(eth0.path("c1"), `${dir}/c1@eth0.json`);
    assert.equal(eth1.path("c1"), `${dir}/c1@net%401.json`, "encoded like the cache");
    await eth0.publish(undefined, "c1", [entry("eth0")]);
    await eth1.publish(undefined, "c1", [entry("net@1")]);
    // Two CNI_IFNAMEs of one container do not overwrite each other.
    assert.deepEqual((await eth0.read("c1"))?.map((e) => e.interface), ["eth0"]);
    assert.deepEqual((await eth1.read("c1"))?.map((e) => e.interface), ["net@1"]);
    assert.equal((await Deno.stat(eth0.path("c1"))).mode! & 0o777, 0o600);

    await eth0.remove("c1");
    assert.equal(await eth0.read("c1"), undefined);
    assert.deepEqual((await eth1.read("c1"))?.map((e) => e.interface), ["net@1"]);

    // A file of an earlier version (`<containerId>.json`) is read, then removed by DEL.
    await Deno.writeTextFile(`${dir}/c2.json`, JSON.stringify([entry("eth0")]));
    assert.deepEqual((await eth0.read("c2"))?.map((e) => e.interface), ["eth0"]);
    await eth0.remove("c2");
    assert.equal(await eth0.read("c2"), undefined);
    await eth0.remove("c2"); // missing: fine
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
