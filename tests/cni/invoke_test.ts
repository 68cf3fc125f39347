/**
 * Tests of lib/cni/invoke.ts. The decoding tests use {@link RecordingPluginExec} and
 * need no permissions; the process tests (real `/usr/lib/cni/host-local`, shell-script
 * plugins in a temp dir, timeout, ETXTBSY, output cap) run only with
 * `--allow-run --allow-read --allow-write` (e.g. `deno test -A tests/cni/`).
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import {
  findPlugin,
  type InvokeOptions,
  invokePlugin,
  ProcessPluginExec,
} from "../../lib/cni/invoke.ts";
import { execResponse, readExecRequest, RecordingPluginExec } from "../../lib/cni/exec_fake.ts";

const OPTS: InvokeOptions = {
  command: "ADD",
  containerId: "abc123",
  netns: "/var/run/netns/x",
  ifName: "net1",
  args: "IgnoreUnknown=1;K8S_POD_NAME=web",
  path: ["/opt/cni/bin", "/usr/lib/cni"],
  baseEnv: { PATH: "/usr/bin:/bin", CNI_COMMAND: "must-be-overridden" },
  timeoutMs: 5000,
};

async function rejectsWith(p: Promise<unknown>, code: number): Promise<CniError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof CniError, `expected CniError, got ${err}`);
    assert.equal(err.code, code, `${err.message}`);
    return err;
  }
  assert.fail("expected a rejection");
}

const canRunProcesses = (["run", "read", "write"] as const).every((name) =>
  Deno.permissions.querySync({ name }).state === "granted"
);

/* ---------- invokePlugin with the recording fake (pure) ---------- */

Deno.test("invokePlugin: sets exactly the libcni environment and writes the config", async () => {
  const exec = new RecordingPluginExec(() =>
    execResponse({ stdout: { cniVersion: "1.0.0", ips: [] } })
  );
  const config = { cniVersion: "1.0.0", name: "n", type: "bridge", extra: { a: 1 } };
  const out = await invokePlugin(exec, "/opt/cni/bin/bridge", config, OPTS);
  assert.deepEqual(out, { cniVersion: "1.0.0", ips: [] });
  assert.equal(exec.calls.length, 1);
  const call = exec.calls[0];
  assert.equal(call.path, "/opt/cni/bin/bridge");
  assert.equal(call.timeoutMs, 5000);
  assert.deepEqual(call.env, {
    PATH: "/usr/bin:/bin",
    CNI_COMMAND: "ADD",
    CNI_CONTAINERID: "abc123",
    CNI_NETNS: "/var/run/netns/x",
    CNI_IFNAME: "net1",
    CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAME=web",
    CNI_PATH: "/opt/cni/bin:/usr/lib/cni",
  });
  assert.deepEqual(readExecRequest(call), { command: "ADD", config });
});

Deno.test("invokePlugin: GC-style call sets the unused variables to empty strings", async () => {
  const exec = new RecordingPluginExec(() => execResponse());
  const out = await invokePlugin(exec, "/x/p", {}, { command: "GC", path: ["/x"], timeoutMs: 1 });
  assert.equal(out, undefined);
  assert.deepEqual(exec.calls[0].env, {
    CNI_COMMAND: "GC",
    CNI_CONTAINERID: "",
    CNI_NETNS: "",
    CNI_IFNAME: "",
    CNI_ARGS: "",
    CNI_PATH: "/x",
  });
});

Deno.test("invokePlugin: empty or whitespace stdout on success → undefined", async () => {
  for (const stdout of ["", "  \n"]) {
    const exec = new RecordingPluginExec(() => execResponse({ stdout }));
    assert.equal(await invokePlugin(exec, "/x/p", {}, OPTS), undefined);
  }
});

Deno.test("invokePlugin: bad JSON on success → code 6 with the raw text", async () => {
  const exec = new RecordingPluginExec(() => execResponse({ stdout: "{oops" }));
  const err = await rejectsWith(invokePlugin(exec, "/x/bridge", {}, OPTS), 6);
  assert.match(err.msg, /plugin bridge printed invalid JSON/);
  assert.equal(err.details, "{oops");
});

Deno.test("invokePlugin: a valid error JSON on stdout is preserved", async () => {
  const exec = new RecordingPluginExec(() =>
    execResponse({
      code: 1,
      stdout: { cniVersion: "1.0.0", code: 7, msg: "bad ipam", details: "subnet missing" },
      stderr: "noise",
    })
  );
  const err = await rejectsWith(invokePlugin(exec, "/x/bridge", {}, OPTS), 7);
  assert.equal(err.msg, "bad ipam");
  assert.equal(err.details, "subnet missing");
});

Deno.test("invokePlugin: STATUS codes 50/51 and plugin-specific codes are preserved", async () => {
  for (const code of [50, 51, 123]) {
    const exec = new RecordingPluginExec(() =>
      execResponse({ code: 1, stdout: { code, msg: "not ready" } })
    );
    const err = await rejectsWith(invokePlugin(exec, "/x/p", {}, OPTS), code);
    assert.equal(err.msg, "not ready");
    assert.equal(err.details, "");
  }
});

Deno.test("invokePlugin: empty stdout → message from stderr (999)", async () => {
  const exec = new RecordingPluginExec(() =>
    execResponse({ code: 2, stderr: "panic: runtime error\n" })
  );
  const err = await rejectsWith(invokePlugin(exec, "/x/bridge", {}, OPTS), 999);
  assert.equal(err.msg, "plugin bridge failed: panic: runtime error");
  assert.match(err.details, /exited with code 2/);
});

Deno.test("invokePlugin: empty stdout with a CNI error JSON on stderr keeps its code", async () => {
  const exec = new RecordingPluginExec(() =>
    execResponse({ code: 1, stderr: JSON.stringify({ code: 11, msg: "try later" }) })
  );
  const err = await rejectsWith(invokePlugin(exec, "/x/p", {}, OPTS), 11);
  assert.equal(err.msg, "try later");
});

Deno.test("invokePlugin: no output at all, or killed by a signal", async () => {
  const silent = new RecordingPluginExec(() => execResponse({ code: 3 }));
  const e1 = await rejectsWith(invokePlugin(silent, "/x/p", {}, OPTS), 999);
  assert.match(e1.msg, /plugin p failed with no error message/);
  const killed = new RecordingPluginExec(() => execResponse({ code: 137, signal: "SIGSEGV" }));
  const e2 = await rejectsWith(invokePlugin(killed, "/x/p", {}, OPTS), 999);
  assert.match(e2.details, /killed by SIGSEGV/);
});

Deno.test("invokePlugin: unparsable or non-error stdout on failure → 999 with raw text", async () => {
  for (const stdout of ["Segmentation fault", '{"code":"7","msg":"x"}', "[1,2]", '{"msg":"x"}']) {
    const exec = new RecordingPluginExec(() => execResponse({ code: 1, stdout, stderr: "err" }));
    const err = await rejectsWith(invokePlugin(exec, "/x/macvlan", {}, OPTS), 999);
    assert.equal(err.msg, "plugin macvlan failed");
    assert.ok(err.details.includes(stdout), err.details);
    assert.match(err.details, /stderr: err/);
  }
});

Deno.test("invokePlugin: error details that are not strings are stringified", async () => {
  const exec = new RecordingPluginExec(() =>
    execResponse({ code: 1, stdout: { code: 7, msg: "m", details: { a: 1 } } })
  );
  const err = await rejectsWith(invokePlugin(exec, "/x/p", {}, OPTS), 7);
  assert.equal(err.details, '{"a":1}');
});

Deno.test("invokePlugin: timeout → code 11", async () => {
  const exec = new RecordingPluginExec(() =>
    execResponse({ code: 137, signal: "SIGKILL", timedOut: true, stderr: "slow" })
  );
  const err = await rejectsWith(
    invokePlugin(exec, "/x/dhcp", {}, { ...OPTS, timeoutMs: 250 }),
    11,
  );
  assert.equal(err.msg, "plugin dhcp timed out after 250 ms");
  assert.equal(err.details, "slow");
});

Deno.test("invokePlugin: an exec that throws propagates", async () => {
  const exec = new RecordingPluginExec(() => {
    throw new CniError(11, "busy");
  });
  await rejectsWith(invokePlugin(exec, "/x/p", {}, OPTS), 11);
});

/* ---------- findPlugin ---------- */

Deno.test("findPlugin: path traversal and unsafe names → code 7 before any lookup", async () => {
  for (const type of ["", "../../bin/sh", "/bin/sh", "sub/plugin", "..", "a\0b"]) {
    await rejectsWith(findPlugin(type, ["/usr/lib/cni"]), 7);
  }
});

Deno.test({
  name: "findPlugin: first directory with an executable regular file wins",
  ignore: !canRunProcesses,
  async fn() {
    const a = await Deno.makeTempDir();
    const b = await Deno.makeTempDir();
    const c = await Deno.makeTempDir();
    try {
      await Deno.writeTextFile(`${a}/p`, "not executable", { mode: 0o644 });
      await Deno.mkdir(`${b}/p`); // a directory is not a plugin
      await Deno.writeTextFile(`${c}/p`, "#!/bin/sh\n", { mode: 0o755 });
      await Deno.writeTextFile(`${b}/q`, "#!/bin/sh\n", { mode: 0o755 });
      assert.equal(await findPlugin("p", ["", `${a}/missing`, a, b, `${c}/`]), `${c}/p`);
      assert.equal(await findPlugin("q", [b, c]), `${b}/q`);
      const err = await rejectsWith(findPlugin("nope", [a, b]), 7);
      assert.equal(err.msg, `failed to find plugin "nope" in path [${a} ${b}]`);
    } finally {
      for (const d of [a, b, c]) await Deno.remove(d, { recursive: true });
    }
  },
});

/* ---------- real processes ---------- */

async function writeScript(dir: string, name: string, body: string): Promise<string> {
  const path = `${dir}/${name}`;
  await Deno.writeTextFile(path, `#!/bin/bash\n${body}\n`, { mode: 0o755 });
  return path;
}

Deno.test({
  name: "ProcessPluginExec: real host-local VERSION, ADD and DEL",
  ignore: !canRunProcesses,
  async fn() {
    try {
      await Deno.stat("/usr/lib/cni/host-local");
    } catch {
      return; // Reference plugins not installed.
    }
    const exec = new ProcessPluginExec();
    const dataDir = await Deno.makeTempDir();
    try {
      const path = await findPlugin("host-local", ["/usr/lib/cni"]);
      const version = await invokePlugin(exec, path, { cniVersion: "1.0.0" }, {
        command: "VERSION",
        path: ["/usr/lib/cni"],
        timeoutMs: 10_000,
      }) as Record<string, unknown>;
      assert.ok((version.supportedVersions as string[]).includes("1.0.0"));

      const config = {
        cniVersion: "1.0.0",
        name: "manifold-test",
        ipam: { type: "host-local", ranges: [[{ subnet: "10.250.7.0/24" }]], dataDir },
      };
      const opts: InvokeOptions = {
        command: "ADD",
        containerId: "manifoldtest1",
        netns: "/proc/self/ns/net",
        ifName: "net1",
        path: ["/usr/lib/cni"],
        timeoutMs: 10_000,
      };
      const result = await invokePlugin(exec, path, config, opts) as Record<string, unknown>;
      assert.equal(result.cniVersion, "1.0.0");
      assert.deepEqual((result.ips as { address: string }[])[0].address, "10.250.7.2/24");
      assert.equal(await invokePlugin(exec, path, config, { ...opts, command: "DEL" }), undefined);

      // A real plugin error: host-local does not speak 1.1.0.
      const err = await rejectsWith(
        invokePlugin(exec, path, { ...config, cniVersion: "1.1.0" }, opts),
        1,
      );
      assert.equal(err.msg, "incompatible CNI versions");
    } finally {
      await Deno.remove(dataDir, { recursive: true });
    }
  },
});

Deno.test({
  name: "ProcessPluginExec: clean environment, stdin and exit status",
  ignore: !canRunProcesses,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = await writeScript(
        dir,
        "echo-plugin",
        `conf=$(cat)
printf '{"cniVersion":"1.0.0","env":"%s","conf":%s}' "$(env | sort | tr '\\n' ' ')" "$conf"`,
      );
      const exec = new ProcessPluginExec();
      const out = await invokePlugin(exec, path, { name: "n", k: [1] }, {
        command: "ADD",
        containerId: "c1",
        netns: "/proc/self/ns/net",
        ifName: "eth0",
        path: [dir],
        baseEnv: { FOO: "bar" },
        timeoutMs: 10_000,
      }) as Record<string, unknown>;
      assert.deepEqual(out.conf, { name: "n", k: [1] });
      const env = String(out.env);
      assert.match(env, /CNI_COMMAND=ADD /);
      assert.match(env, /CNI_CONTAINERID=c1 /);
      assert.match(env, /FOO=bar /);
      assert.doesNotMatch(env, /HOME=/); // nothing inherited from the test process

      const failing = await writeScript(dir, "fail", `echo "boom" >&2; exit 3`);
      const res = await exec.exec({
        path: failing,
        stdin: new Uint8Array(),
        env: {},
        timeoutMs: 10_000,
      });
      assert.equal(res.code, 3);
      assert.equal(res.signal, null);
      assert.equal(new TextDecoder().decode(res.stderr), "boom\n");
      assert.equal(res.timedOut, false);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "ProcessPluginExec: SIGKILL on timeout, even when a grandchild holds the pipes",
  ignore: !canRunProcesses,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = await writeScript(dir, "slow", `echo started >&2; sleep 3; echo '{}'`);
      const exec = new ProcessPluginExec({ drainGraceMs: 100 });
      const started = performance.now();
      const res = await exec.exec({ path, stdin: new Uint8Array(), env: {}, timeoutMs: 300 });
      const ms = performance.now() - started;
      assert.equal(res.timedOut, true);
      assert.equal(res.signal, "SIGKILL");
      assert.ok(ms < 2000, `took ${ms} ms`);
      const err = await rejectsWith(
        invokePlugin(exec, path, {}, { command: "ADD", path: [dir], timeoutMs: 300 }),
        11,
      );
      assert.equal(err.msg, "plugin slow timed out after 300 ms");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "ProcessPluginExec: retries ETXTBSY while the binary is open for writing",
  ignore: !canRunProcesses,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = await writeScript(dir, "fresh", `echo '{"cniVersion":"1.0.0"}'`);
      // Held open for writing: execve fails with ETXTBSY until it is closed.
      const file = await Deno.open(path, { write: true });
      const closer = setTimeout(() => file.close(), 80);
      const exec = new ProcessPluginExec({ spawnRetries: 6, retryDelayMs: 20 });
      const res = await exec.exec({ path, stdin: new Uint8Array(), env: {}, timeoutMs: 10_000 });
      clearTimeout(closer);
      assert.equal(res.code, 0);
      assert.equal(new TextDecoder().decode(res.stdout).trim(), '{"cniVersion":"1.0.0"}');

      // Still busy after every retry → code 11.
      const busy = await Deno.open(path, { write: true });
      try {
        const impatient = new ProcessPluginExec({ spawnRetries: 2, retryDelayMs: 5 });
        const err = await rejectsWith(
          impatient.exec({ path, stdin: new Uint8Array(), env: {}, timeoutMs: 1000 }),
          11,
        );
        assert.match(err.details, /after 3 attempts/);
      } finally {
        busy.close();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "ProcessPluginExec: output is capped, unread stdin does not hang, missing binary fails",
  ignore: !canRunProcesses,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const loud = await writeScript(dir, "loud", `head -c 300000 /dev/zero`);
      const exec = new ProcessPluginExec({ maxOutputBytes: 1000 });
      const res = await exec.exec({
        path: loud,
        stdin: new Uint8Array(),
        env: {},
        timeoutMs: 10_000,
      });
      assert.equal(res.code, 0);
      assert.equal(res.stdout.length, 1000);
      assert.equal(res.truncated, true);

      const deaf = await writeScript(dir, "deaf", `exit 0`);
      const big = new Uint8Array(4 * 1024 * 1024);
      const r2 = await new ProcessPluginExec().exec({
        path: deaf,
        stdin: big,
        env: {},
        timeoutMs: 10_000,
      });
      assert.equal(r2.code, 0);
      assert.equal(r2.timedOut, false);

      await rejectsWith(
        exec.exec({ path: `${dir}/missing`, stdin: new Uint8Array(), env: {}, timeoutMs: 1000 }),
        999,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
