/**
 * Tests of lib/multinet/cache/cache.ts. Every test works in its own temporary directory:
 * `deno test --allow-read --allow-write tests/multinet/cache_test.ts`.
 */

import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../../lib/cni/errors.ts";
import {
  AttachmentCache,
  CACHE_SCHEMA_VERSION,
  CacheCorruptError,
  type CacheCorruptReason,
  type CacheRecord,
} from "../../../lib/multinet/cache/cache.ts";

const CID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const IF = "eth0";
const key = (containerId: string, ifName = IF) => ({ containerId, ifName });

/** A realistic record: calico default network + a macvlan NAD with a 0.2.0 delegate result. */
function sampleRecord(containerId = CID, padding = 0): CacheRecord {
  return {
    schemaVersion: CACHE_SCHEMA_VERSION,
    containerId,
    netns: "/var/run/netns/cni-5f1c2a3b",
    ifName: "eth0",
    pod: { namespace: "ns1", name: "web-0", uid: "5a1f9a2e-6f4b-4c1e-9f61-3f1b2c3d4e5f" },
    cniVersion: "1.1.0",
    createdAt: "2026-03-01T12:00:00.000Z",
    attachments: [
      {
        statusName: "k8s-pod-network",
        isDefault: true,
        ifName: "eth0",
        conflist: {
          cniVersion: "0.3.1",
          name: "k8s-pod-network",
          plugins: [
            {
              type: "calico",
              datastore_type: "kubernetes",
              kubernetes: { kubeconfig: "/etc/cni/net.d/calico-kubeconfig" },
              ipam: { type: "calico-ipam", assign_ipv4: "true" },
              policy: { type: "k8s" },
            },
            { type: "portmap", snat: true, capabilities: { portMappings: true } },
            { type: "bandwidth", capabilities: { bandwidth: true } },
          ],
        },
        capabilityArgs: {
          portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }],
          bandwidth: { ingressRate: 2048, ingressBurst: 300, egressRate: 8000, egressBurst: 200 },
        },
        cniArgs: [["IgnoreUnknown", "true"], ["K8S_POD_NAMESPACE", "ns1"], [
          "K8S_POD_NAME",
          "web-0",
        ]],
        state: "added",
        result: {
          cniVersion: "0.3.1",
          interfaces: [{ name: "cali1a2b3c4d5e6" }],
          ips: [{ version: "4", address: "192.168.10.7/32", interface: 0 }],
          dns: {},
        },
      },
      {
        statusName: "ns1/macvlan-a",
        isDefault: false,
        ifName: "net1",
        conflist: {
          cniVersion: "0.2.0",
          name: "macvlan-a",
          plugins: [{
            type: "macvlan",
            master: "ens3",
            ipam: { type: "host-local", subnet: "10.1.2.0/24" },
            "org.example.pad": "x".repeat(padding),
          }],
        },
        capabilityArgs: {},
        cniArgs: [["MAC", "02:23:45:67:89:01"]],
        state: "adding",
        result: { cniVersion: "0.2.0", ip4: { ip: "10.1.2.3/24" } },
        deviceInfoFile: "/var/run/k8s.cni.cncf.io/devinfo/cni/ns1-macvlan-a-x_net1",
        defaultRoute: ["10.1.2.1"],
      },
    ],
    networkStatus: [
      { name: "k8s-pod-network", interface: "eth0", ips: ["192.168.10.7/32"], default: true },
      { name: "ns1/macvlan-a", interface: "net1", ips: ["10.1.2.3/24"], default: false },
    ],
  };
}

async function withCache(fn: (cache: AttachmentCache, dir: string) => Promise<void>) {
  const root = await Deno.makeTempDir({ prefix: "manifold-cache-test-" });
  try {
    await fn(new AttachmentCache(`${root}/cache`), `${root}/cache`);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) out.push(e.name);
  return out.sort();
}

async function assertRejectsWith<E extends Error>(
  fn: () => Promise<unknown>,
  type: abstract new (...args: never[]) => E,
  check: (err: E) => void = () => {},
): Promise<void> {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof type, `expected ${type.name}, got ${err}`);
    check(err);
    return;
  }
  assert.fail(`expected ${type.name}`);
}

async function assertCorrupt(cache: AttachmentCache, reason: CacheCorruptReason) {
  await assertRejectsWith(() => cache.read(CID, IF), CacheCorruptError, (err) => {
    assert.equal(err.reason, reason, `details: ${err.details}`);
    assert.equal(err.path, cache.path(CID, IF));
    assert.equal(err.code, CniErrorCode.DecodingFailure);
    assert.ok(err instanceof CniError);
    assert.ok(!err.msg.endsWith("."));
  });
}

Deno.test("round trip keeps every field, including unknown plugin keys", async () => {
  await withCache(async (cache) => {
    const record = sampleRecord();
    await cache.write(record);
    assert.deepEqual(await cache.read(CID, IF), record);

    const updated = structuredClone(record);
    updated.attachments[1].state = "added";
    await cache.write(updated);
    assert.deepEqual(await cache.read(CID, IF), updated);
  });
});

Deno.test("read of an absent record or directory is undefined", async () => {
  await withCache(async (cache) => {
    assert.equal(await cache.read(CID, IF), undefined);
    await cache.write(sampleRecord("other"));
    assert.equal(await cache.read(CID, IF), undefined);
  });
});

Deno.test("file mode 0600, directory 0700, no temporary file left", async () => {
  await withCache(async (cache, dir) => {
    await cache.write(sampleRecord());
    await cache.write(sampleRecord());
    assert.equal((await Deno.stat(cache.path(CID, IF))).mode! & 0o777, 0o600);
    assert.equal((await Deno.stat(dir)).mode! & 0o777, 0o700);
    assert.deepEqual(await names(dir), [`${CID}@eth0.json`]);
    assert.equal(cache.path(CID, IF), `${dir}/${CID}@eth0.json`);
    assert.equal(cache.path(CID, "net@1%é"), `${dir}/${CID}@net%401%25%C3%A9.json`);
    assert.equal(cache.path(CID, ""), `${dir}/${CID}.json`, "the legacy per-container file");
  });
});

Deno.test("corrupt files are CacheCorruptError with the right reason", async (t) => {
  await withCache(async (cache) => {
    await cache.write(sampleRecord());
    const path = cache.path(CID, IF);
    const good = await Deno.readTextFile(path);
    const cases: [string, string, CacheCorruptReason][] = [
      ["empty", "", "truncated"],
      ["whitespace", " \n", "truncated"],
      ["NUL-filled", "\0".repeat(512), "truncated"],
      ["prefix then NULs", good.slice(0, 300) + "\0".repeat(64), "truncated"],
      ["cut inside a string", good.slice(0, good.indexOf("calico") + 3), "truncated"],
      ["cut after a comma", good.slice(0, good.indexOf(",") + 1), "truncated"],
      ["garbage", "hello world", "unparsable"],
      ["xml", "<record/>", "unparsable"],
      ["trailing garbage", `${good}}`, "unparsable"],
      ["bad token inside", good.replace('"netns"', "netns"), "unparsable"],
      ["array", "[]", "schema"],
      ["null", "null", "schema"],
      ["empty object", "{}", "schema"],
      ["string version", good.replace('"schemaVersion": 1', '"schemaVersion": "1"'), "schema"],
      ["bad state", good.replace('"adding"', '"half"'), "schema"],
      ["no attachments", JSON.stringify({ ...sampleRecord(), attachments: undefined }), "schema"],
      ["future version", good.replace('"schemaVersion": 1', '"schemaVersion": 2'), "version"],
      ["version 0", good.replace('"schemaVersion": 1', '"schemaVersion": 0'), "version"],
    ];
    for (const [name, text, reason] of cases) {
      await t.step(name, async () => {
        assert.notEqual(text, good);
        await Deno.writeTextFile(path, text);
        await assertCorrupt(cache, reason);
      });
    }
    await t.step("every cut-off prefix is truncated", async () => {
      for (let n = 1; n < good.trimEnd().length; n += 7) {
        await Deno.writeTextFile(path, good.slice(0, n));
        await assertCorrupt(cache, "truncated");
      }
    });
  });
});

Deno.test("remove is idempotent and clears the attachment's stray temporary files", async () => {
  await withCache(async (cache, dir) => {
    await cache.remove(CID, IF); // no directory yet
    await cache.write(sampleRecord());
    await cache.write(sampleRecord("other"));
    // Crashed writers' leftovers (lib/fs layout and the pre-lib/fs layout), and a container
    // whose ID looks like a temporary file.
    await Deno.writeTextFile(`${dir}/.${CID}@eth0.json.tmp-4242-k3x9a`, "{");
    await Deno.writeTextFile(`${dir}/${CID}.json.tmp-4242-0a1b2c3d4e5f6071`, "{");
    await Deno.writeTextFile(`${dir}/.other@eth0.json.tmp-7-ff`, "{");
    await cache.write(sampleRecord(`${CID}.json.tmp-1-ab`));
    assert.deepEqual(
      await cache.list(),
      [key(CID), key(`${CID}.json.tmp-1-ab`), key("other")].sort((a, b) =>
        a.containerId < b.containerId ? -1 : 1
      ),
    );

    await cache.remove(CID, IF);
    assert.equal(await cache.read(CID, IF), undefined);
    assert.deepEqual(
      await names(dir),
      [`${CID}.json.tmp-1-ab@eth0.json`, "other@eth0.json", ".other@eth0.json.tmp-7-ff"].sort(),
    );
    await cache.remove(CID, IF);
    assert.deepEqual(await cache.list(), [key(`${CID}.json.tmp-1-ab`), key("other")]);
  });
});

Deno.test("list returns sorted keys and ignores other files", async () => {
  await withCache(async (cache, dir) => {
    assert.deepEqual(await cache.list(), []);
    for (const id of ["c3", "a1", "b2"]) await cache.write(sampleRecord(id));
    await cache.write({ ...sampleRecord("a1"), ifName: "eth1" });
    await Deno.writeTextFile(`${dir}/a1.json.tmp-1-00`, "");
    await Deno.writeTextFile(`${dir}/.a1@eth0.json.tmp-1-00`, "");
    await Deno.writeTextFile(`${dir}/README`, "");
    await Deno.writeTextFile(`${dir}/.hidden.json`, "");
    await Deno.writeTextFile(`${dir}/a1@bad%2.json`, "");
    await Deno.writeTextFile(`${dir}/a1@a%2Fb.json`, ""); // "a/b" is no interface name
    await Deno.mkdir(`${dir}/sub.json`);
    assert.deepEqual(await cache.list(), [key("a1"), key("a1", "eth1"), key("b2"), key("c3")]);
  });
});

Deno.test("bad container IDs are CniError 4 everywhere", async () => {
  await withCache(async (cache, dir) => {
    const bad = [
      "",
      "../etc",
      "a/b",
      "/abs",
      ".hidden",
      "..",
      "a..b",
      "a b",
      "a\0b",
      "é",
      "x".repeat(201),
      "a@b",
    ];
    for (const id of bad) {
      assert.throws(
        () => cache.path(id, IF),
        (err: unknown) => err instanceof CniError && err.code === CniErrorCode.InvalidEnvironment,
      );
      for (
        const op of [
          () => cache.read(id, IF),
          () => cache.remove(id, IF),
          () => cache.write(sampleRecord(id)),
        ]
      ) {
        await assertRejectsWith(op, CniError, (err) => assert.equal(err.code, 4));
      }
    }
    await assertRejectsWith(() => Deno.stat(dir), Deno.errors.NotFound);
    assert.throws(() => new AttachmentCache(""), CniError);
  });
});

Deno.test("write refuses a record that could not be read back", async () => {
  await withCache(async (cache, dir) => {
    const future = { ...sampleRecord(), schemaVersion: 2 };
    await assertRejectsWith(() => cache.write(future), TypeError);
    const badState = sampleRecord();
    (badState.attachments[0] as { state: string }).state = "half";
    await assertRejectsWith(() => cache.write(badState), TypeError);
    const badDate = { ...sampleRecord(), createdAt: "yesterday" };
    await assertRejectsWith(() => cache.write(badDate), TypeError);
    await assertRejectsWith(() => Deno.stat(dir), Deno.errors.NotFound);
  });
});

Deno.test("I/O failures are CniError 5", async () => {
  await withCache(async (cache, dir) => {
    await Deno.mkdir(cache.path(CID, IF), { recursive: true }); // a directory where the file goes
    await assertRejectsWith(
      () => cache.read(CID, IF),
      CniError,
      (err) => assert.equal(err.code, 5),
    );
    await assertRejectsWith(() => cache.write(sampleRecord()), CniError, (err) => {
      assert.equal(err.code, 5);
    });
    assert.deepEqual(await names(dir), [`${CID}@eth0.json`], "temporary file cleaned up");

    const nested = new AttachmentCache(`${dir}/${CID}@eth0.json/x/y`);
    await Deno.writeTextFile(`${dir}/file`, "");
    const underFile = new AttachmentCache(`${dir}/file/sub`);
    await assertRejectsWith(() => underFile.write(sampleRecord()), CniError, (err) => {
      assert.equal(err.code, 5);
    });
    await nested.write(sampleRecord()); // nested directories are created
    assert.deepEqual(await nested.list(), [{ containerId: CID, ifName: IF }]);
  });
});

Deno.test("a reader never sees a partial record while a writer rewrites it 200 times", async () => {
  await withCache(async (cache) => {
    let writing = true;
    let reads = 0;
    let seen = 0;
    const reader = (async () => {
      while (writing) {
        const record = await cache.read(CID, IF); // throws on a partial or invalid file
        reads++;
        if (record) {
          seen++;
          assert.equal(record.containerId, CID);
          const pad = record.attachments[1].conflist.plugins as Record<string, string>[];
          assert.equal(pad[0]["org.example.pad"].length % 1000, 0);
        }
      }
    })();
    const writer = (async () => {
      try {
        for (let gen = 0; gen < 200; gen++) {
          // Alternate small and large files so a torn write would show.
          await cache.write(sampleRecord(CID, (gen % 2 === 0 ? 1 : 200) * 1000));
        }
      } finally {
        writing = false;
      }
    })();
    // Settle both before the temp dir goes away, then report the first failure.
    const outcomes = await Promise.allSettled([reader.finally(() => writing = false), writer]);
    for (const o of outcomes) if (o.status === "rejected") throw o.reason;
    assert.ok(reads > 0 && seen > 0, `reads ${reads}, seen ${seen}`);
  });
});

Deno.test("concurrent writers: different containers never collide, same container ends whole", async () => {
  await withCache(async (cache, dir) => {
    const ids = Array.from({ length: 25 }, (_, i) => `ctr-${String(i).padStart(2, "0")}`);
    await Promise.all(ids.map((id) => cache.write(sampleRecord(id))));
    assert.deepEqual(await cache.list(), ids.map((id) => key(id)));
    for (const id of ids) assert.equal((await cache.read(id, IF))?.containerId, id);

    const sizes = Array.from({ length: 25 }, (_, i) => i * 1000);
    await Promise.all(sizes.map((size) => cache.write(sampleRecord(CID, size))));
    const last = await cache.read(CID, IF);
    assert.ok(last);
    assert.deepEqual(
      await names(dir),
      [...ids.map((id) => `${id}@eth0.json`), `${CID}@eth0.json`].sort(),
    );
  });
});

Deno.test("writeTombstone keeps the identity, drops attachments, sets deletedAt", async () => {
  await withCache(async (cache) => {
    const record = sampleRecord();
    await cache.write(record);
    const now = new Date("2026-03-02T08:30:00.000Z");
    await cache.writeTombstone(record, { now });
    const tomb = await cache.read(CID, IF);
    const { networkStatus: _, ...identity } = record;
    assert.deepEqual(tomb, { ...identity, attachments: [], deletedAt: now.toISOString() });
    assert.equal(record.attachments.length, 2, "input not modified");
    assert.deepEqual(await cache.list(), [key(CID)]);
    assert.equal((await Deno.stat(cache.path(CID, IF))).mode! & 0o777, 0o600);

    await cache.writeTombstone(record);
    assert.ok(Date.parse((await cache.read(CID, IF))!.deletedAt!) > now.getTime());
    await cache.remove(CID, IF);
    assert.equal(await cache.read(CID, IF), undefined);
  });
});

Deno.test("a default network without a conf name is still cached (Multus #656)", async () => {
  await withCache(async (cache) => {
    const record = sampleRecord();
    record.attachments[0].statusName = "";
    record.networkStatus![0].name = "";
    await cache.write(record);
    assert.deepEqual(await cache.read(CID, IF), record);
  });
});

Deno.test("records are keyed by (containerId, ifName): two interfaces of one container coexist", async () => {
  await withCache(async (cache) => {
    const eth0 = sampleRecord();
    const eth1 = { ...sampleRecord(), ifName: "eth1", netns: "/var/run/netns/other" };
    await cache.write(eth0);
    await cache.write(eth1);
    assert.deepEqual(await cache.read(CID, "eth0"), eth0);
    assert.deepEqual(await cache.read(CID, "eth1"), eth1);
    assert.deepEqual(await cache.list(), [key(CID, "eth0"), key(CID, "eth1")]);
    await cache.writeTombstone(eth1);
    assert.equal((await cache.read(CID, "eth0"))?.deletedAt, undefined, "eth0 untouched");
    await cache.remove(CID, "eth0");
    assert.equal(await cache.read(CID, "eth0"), undefined);
    assert.ok((await cache.read(CID, "eth1"))?.deletedAt);
    for (const bad of ["a/b", "x".repeat(16), "a b", "a:b", ".."]) {
      assert.throws(
        () => cache.path(CID, bad),
        (e: unknown) => e instanceof CniError && e.code === 4,
      );
    }
    await assertRejectsWith(() => cache.write({ ...eth0, ifName: "" }), CniError);
  });
});

Deno.test("migration: a legacy <containerId>.json is its stored interface's record, renamed on read", async () => {
  await withCache(async (cache, dir) => {
    await Deno.mkdir(dir, { recursive: true });
    const legacy = sampleRecord();
    await Deno.writeTextFile(`${dir}/${CID}.json`, JSON.stringify(legacy));
    await Deno.writeTextFile(`${dir}/old.json`, JSON.stringify(sampleRecord("old")));
    await Deno.writeTextFile(`${dir}/bad.json`, '{"schemaVersion":1,"contai');
    // Listed under the interface they store (without migrating); a damaged one under "".
    assert.deepEqual(await cache.list(), [key(CID), key("bad", ""), key("old")]);
    assert.deepEqual(await names(dir), [`${CID}.json`, "bad.json", "old.json"]);
    // Another interface of the container has no record; the stored one gets it, migrated.
    assert.equal(await cache.read(CID, "eth1"), undefined);
    assert.deepEqual(await cache.read(CID, "eth0"), legacy);
    assert.deepEqual(await names(dir), [`${CID}@eth0.json`, "bad.json", "old.json"]);
    assert.deepEqual(await cache.read(CID, "eth0"), legacy);
    // A damaged legacy record is damaged for every interface of its container…
    await assertRejectsWith(() => cache.read("bad", "eth0"), CacheCorruptError);
    await assertRejectsWith(() => cache.read("bad", ""), CacheCorruptError);
    // …and goes with the tombstone written after DEL rebuilt the attachments.
    await cache.writeTombstone({ ...sampleRecord("bad") });
    assert.ok((await cache.read("bad", "eth0"))?.deletedAt);
    // A legacy tombstone is removed with the attachment's record.
    await cache.remove("old", "eth0");
    assert.deepEqual(await names(dir), [`${CID}@eth0.json`, "bad@eth0.json"]);
  });
});

Deno.test("migration never overwrites a record written in the new layout", async () => {
  await withCache(async (cache, dir) => {
    const current = sampleRecord();
    await cache.write(current);
    await Deno.writeTextFile(`${dir}/${CID}.json`, JSON.stringify({ ...current, netns: "/old" }));
    assert.deepEqual(await cache.read(CID, IF), current);
    assert.deepEqual(await cache.list(), [key(CID)], "listed once");
    await cache.writeTombstone(current);
    assert.deepEqual(await names(dir), [`${CID}@eth0.json`], "the stale legacy copy went too");
  });
});

Deno.test("writeTombstone keeps attachments given up for GC", async () => {
  await withCache(async (cache) => {
    const record = sampleRecord();
    const given = {
      ...record.attachments[1],
      delFailures: { count: 3, firstAt: "2026-03-02T08:00:00.000Z", lastError: "x" },
    };
    await cache.writeTombstone({ ...record, abandoned: [given] });
    const tomb = await cache.read(CID, IF);
    assert.deepEqual(tomb?.attachments, []);
    assert.deepEqual(tomb?.abandoned, [given]);
  });
});
