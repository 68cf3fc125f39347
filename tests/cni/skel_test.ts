/**
 * Tests of lib/cni/skel.ts: the dispatcher with injected env, stdin and stdout (libcni
 * `pkg/skel`), parameterised over every supported cniVersion. Pure.
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { decodeResult } from "../../lib/cni/result.ts";
import { dispatch, type SkelContext, type SkelHandlers, type SkelIO } from "../../lib/cni/skel.ts";
import { resultFamily, SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";

const FULL_ENV = {
  CNI_CONTAINERID: "ctr1",
  CNI_NETNS: "/var/run/netns/ctr1",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "IgnoreUnknown=1",
  CNI_PATH: "/opt/cni/bin",
};

interface Run {
  code: number;
  stdout: string[];
  json: Record<string, unknown> | undefined;
  calls: { op: string; ctx: SkelContext }[];
  stdinReads: number;
}

type HandlerOverrides = Partial<Record<keyof SkelHandlers, (ctx: SkelContext) => Promise<unknown>>>;

async function run(
  command: string | undefined,
  stdin: string | Uint8Array | Error,
  opts: { env?: Record<string, string | undefined>; handlers?: HandlerOverrides; max?: number } =
    {},
): Promise<Run> {
  const calls: { op: string; ctx: SkelContext }[] = [];
  const record = (op: keyof SkelHandlers) => async (ctx: SkelContext) => {
    calls.push({ op, ctx });
    const h = opts.handlers?.[op];
    return h ? await h(ctx) : undefined;
  };
  const handlers: SkelHandlers = {
    add: async (ctx) => {
      calls.push({ op: "add", ctx });
      const h = opts.handlers?.add;
      return decodeResult(
        h
          ? (await h(ctx)) as Record<string, unknown>
          : { cniVersion: "1.1.0", ips: [{ address: "10.1.0.5/16", gateway: "10.1.0.1" }] },
      );
    },
    del: record("del") as SkelHandlers["del"],
    check: record("check") as SkelHandlers["check"],
    gc: record("gc") as SkelHandlers["gc"],
    status: record("status") as SkelHandlers["status"],
  };
  const stdout: string[] = [];
  let stdinReads = 0;
  const io: SkelIO = {
    env: { ...FULL_ENV, CNI_COMMAND: command, ...opts.env },
    readStdin(max: number) {
      stdinReads++;
      if (stdin instanceof Error) return Promise.reject(stdin);
      const bytes = typeof stdin === "string" ? new TextEncoder().encode(stdin) : stdin;
      return Promise.resolve(bytes.subarray(0, max + 1));
    },
    writeStdout(text: string) {
      stdout.push(text);
    },
  };
  const code = await dispatch(handlers, io, { maxStdinBytes: opts.max });
  assert.ok(stdout.length <= 1, "at most one write to stdout");
  const json = stdout.length ? JSON.parse(stdout[0]) : undefined;
  return { code, stdout, json, calls, stdinReads };
}

function conf(version: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ cniVersion: version, name: "manifold", type: "manifold", ...extra });
}

function assertError(r: Run, code: number, cniVersion = "1.1.0"): void {
  assert.equal(r.code, 1);
  assert.equal(r.json?.code, code, JSON.stringify(r.json));
  assert.equal(r.json?.cniVersion, cniVersion);
  assert.equal(typeof r.json?.msg, "string");
}

Deno.test("dispatch VERSION: prints the supported versions, needs no other env or stdin", async () => {
  const r = await run("VERSION", new Error("stdin must not be read"), {
    env: {
      CNI_CONTAINERID: undefined,
      CNI_NETNS: undefined,
      CNI_IFNAME: undefined,
      CNI_PATH: undefined,
    },
  });
  assert.equal(r.code, 0);
  assert.deepEqual(r.json, { cniVersion: "1.1.0", supportedVersions: [...SUPPORTED_VERSIONS] });
  assert.equal(r.stdinReads, 0);
  assert.equal(r.calls.length, 0);
});

for (const v of SUPPORTED_VERSIONS) {
  Deno.test(`dispatch ADD ${v}: the handler's result is converted to ${v}`, async () => {
    const r = await run("ADD", conf(v, { extra: { k: 1 } }));
    assert.equal(r.code, 0);
    assert.equal(r.json?.cniVersion, v);
    const fam = resultFamily(v);
    if (fam === "legacy") assert.deepEqual(r.json?.ip4, { ip: "10.1.0.5/16", gateway: "10.1.0.1" });
    else if (fam === "current") {
      assert.deepEqual(r.json?.ips, [{
        version: "4",
        address: "10.1.0.5/16",
        gateway: "10.1.0.1",
      }]);
    } else assert.deepEqual(r.json?.ips, [{ address: "10.1.0.5/16", gateway: "10.1.0.1" }]);
    const ctx = r.calls[0].ctx;
    assert.equal(ctx.cniVersion, v);
    assert.deepEqual(ctx.config.extra, { k: 1 });
    assert.equal(ctx.env.command, "ADD");
    assert.equal(ctx.env.ifName, "eth0");
    assert.deepEqual(ctx.env.path, ["/opt/cni/bin"]);
  });

  Deno.test(`dispatch DEL ${v}: no output, exit 0; CNI_NETNS may be absent`, async () => {
    const r = await run("DEL", conf(v), { env: { CNI_NETNS: undefined } });
    assert.equal(r.code, 0);
    assert.deepEqual(r.stdout, []);
    assert.equal(r.calls[0].op, "del");
  });

  Deno.test(`dispatch CHECK ${v}: allowed from 0.4.0 only`, async () => {
    const r = await run("CHECK", conf(v));
    if (["0.4.0", "1.0.0", "1.1.0"].includes(v)) {
      assert.equal(r.code, 0);
      assert.deepEqual(r.stdout, []);
      assert.equal(r.calls[0].op, "check");
    } else {
      assertError(r, 1, v);
      assert.equal(r.calls.length, 0);
    }
  });

  for (const op of ["GC", "STATUS"]) {
    Deno.test(`dispatch ${op} ${v}: allowed from 1.1.0 only, needs only CNI_PATH`, async () => {
      const r = await run(op, conf(v), {
        env: { CNI_CONTAINERID: undefined, CNI_NETNS: undefined, CNI_IFNAME: undefined },
      });
      if (v === "1.1.0") {
        assert.equal(r.code, 0);
        assert.deepEqual(r.stdout, []);
        assert.equal(r.calls[0].op, op.toLowerCase());
      } else {
        assertError(r, 1, v);
      }
    });
  }

  Deno.test(`dispatch ${v}: handler errors keep their code, others become 999`, async () => {
    const cni = await run("DEL", conf(v), {
      handlers: {
        del: () => Promise.reject(new CniError(11, "api unreachable", "dial tcp: timeout")),
      },
    });
    assertError(cni, 11, v);
    assert.deepEqual(cni.json, {
      cniVersion: v,
      code: 11,
      msg: "api unreachable",
      details: "dial tcp: timeout",
    });
    const plain = await run("ADD", conf(v), {
      handlers: { add: () => Promise.reject(new TypeError("x is undefined")) },
    });
    assertError(plain, 999, v);
    assert.equal(plain.json?.msg, "x is undefined");
  });
}

Deno.test("dispatch: missing or unknown CNI_COMMAND → 4 without reading stdin", async () => {
  for (const command of [undefined, "", "ATTACH"]) {
    const r = await run(command, new Error("stdin must not be read"));
    assertError(r, 4);
    assert.match(String(r.json?.msg), /CNI_COMMAND/);
    assert.equal(r.stdinReads, 0);
  }
});

Deno.test("dispatch: stdin over the cap → 7 naming the limit", async () => {
  const big = conf("1.0.0", { pad: "x".repeat(2000) });
  const r = await run("ADD", big, { max: 1000 });
  assertError(r, 7);
  assert.match(String(r.json?.msg), /1000 bytes/);
  assert.equal((await run("ADD", big, { max: big.length })).code, 0);
});

Deno.test("dispatch: default stdin cap is 1 MiB", async () => {
  const r = await run("ADD", conf("1.0.0", { pad: "x".repeat(1024 * 1024) }));
  assertError(r, 7);
  assert.match(String(r.json?.msg), /1048576 bytes/);
});

Deno.test("dispatch: stdin read failure → 5", async () => {
  assertError(await run("ADD", new Error("EIO")), 5);
});

Deno.test("dispatch: undecodable stdin → 6", async () => {
  for (const stdin of ["", "{", "[]", "42", "null", new Uint8Array([0xff, 0xfe, 0x7b])]) {
    assertError(await run("ADD", stdin), 6);
  }
  assertError(await run("ADD", JSON.stringify({ cniVersion: 1, name: "n" })), 6);
});

Deno.test("dispatch: unsupported cniVersion → 1; missing cniVersion means 0.1.0", async () => {
  const r = await run("ADD", conf("2.0.0"));
  assertError(r, 1);
  assert.match(String(r.json?.details), /2\.0\.0/);
  const legacy = await run("ADD", JSON.stringify({ name: "n", type: "manifold" }));
  assert.equal(legacy.code, 0);
  assert.equal(legacy.json?.cniVersion, "0.1.0");
  assert.ok("ip4" in (legacy.json ?? {}));
});

Deno.test("dispatch: environment errors → one code 4 naming every variable", async () => {
  const r = await run("ADD", conf("1.0.0"), {
    env: { CNI_CONTAINERID: undefined, CNI_IFNAME: "bad/if", CNI_PATH: "" },
  });
  assertError(r, 4, "1.0.0");
  for (const v of ["CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"]) {
    assert.match(String(r.json?.msg), new RegExp(v));
  }
  assert.equal(r.calls.length, 0);
});

Deno.test("dispatch: missing or invalid network name → 7", async () => {
  assertError(await run("ADD", JSON.stringify({ cniVersion: "1.0.0", type: "x" })), 7, "1.0.0");
  assertError(await run("ADD", conf("1.0.0", { name: "bad name" })), 7, "1.0.0");
});

Deno.test("dispatch: an ADD result that cannot be converted → 1, nothing else printed", async () => {
  const r = await run("ADD", conf("0.2.0"), {
    handlers: {
      add: () =>
        Promise.resolve({
          cniVersion: "1.0.0",
          ips: [{ address: "10.0.0.2/24" }, { address: "10.0.1.2/24" }],
        }),
    },
  });
  assertError(r, 1, "0.2.0");
  assert.equal(r.stdout.length, 1);
});

Deno.test("dispatch: a failing stdout write gives exit 1", async () => {
  const io: SkelIO = {
    env: { ...FULL_ENV, CNI_COMMAND: "VERSION" },
    readStdin: () => Promise.resolve(new Uint8Array()),
    writeStdout() {
      throw new Error("EPIPE");
    },
  };
  const noop = () => Promise.resolve();
  const code = await dispatch(
    {
      add: () => Promise.resolve(decodeResult({})),
      del: noop,
      check: noop,
      gc: noop,
      status: noop,
    },
    io,
  );
  assert.equal(code, 1);
});

const canSpawn = (["run", "read", "write", "env"] as const).every((name) =>
  Deno.permissions.querySync({ name }).state === "granted"
);

Deno.test({
  name: "denoSkelIO: a real process reads capped stdin and prints one JSON document",
  ignore: !canSpawn,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const skel = new URL("../../lib/cni/skel.ts", import.meta.url).href;
      const result = new URL("../../lib/cni/result.ts", import.meta.url).href;
      const main = `${dir}/main.ts`;
      await Deno.writeTextFile(
        main,
        `import { dispatch, denoSkelIO } from "${skel}";
import { decodeResult } from "${result}";
const ok = () => Promise.resolve();
const add = () =>
  Promise.resolve(decodeResult({ cniVersion: "1.1.0", ips: [{ address: "10.9.0.2/24" }] }));
Deno.exit(await dispatch({ add, del: ok, check: ok, gc: ok, status: ok }, denoSkelIO(),
  { maxStdinBytes: 4096 }));
`,
      );
      const config = new URL("../../deno.json", import.meta.url).pathname;
      const call = async (stdin: string) => {
        const child = new Deno.Command(Deno.execPath(), {
          args: ["run", "-A", "--config", config, main],
          env: { ...FULL_ENV, CNI_COMMAND: "ADD" },
          stdin: "piped",
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        const w = child.stdin.getWriter();
        await w.write(new TextEncoder().encode(stdin)).catch(() => {});
        await w.close().catch(() => {});
        const out = await child.output();
        return { code: out.code, stdout: new TextDecoder().decode(out.stdout) };
      };
      const ok = await call(conf("0.4.0"));
      assert.equal(ok.code, 0);
      assert.deepEqual(JSON.parse(ok.stdout), {
        cniVersion: "0.4.0",
        ips: [{ version: "4", address: "10.9.0.2/24" }],
      });
      const big = await call(conf("0.4.0", { pad: "x".repeat(200_000) }));
      assert.equal(big.code, 1);
      assert.equal(JSON.parse(big.stdout).code, 7);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
