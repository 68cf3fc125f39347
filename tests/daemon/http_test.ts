/**
 * `startDaemonHttp`: /healthz, /readyz flipping with ready(), /metrics parsed strictly as
 * Prometheus text (tests/support/prom_text.ts) with the counts the observer was fed, the
 * fallbacks file counted at scrape time, bounded label values, and the listener's errors.
 */

import assert from "node:assert/strict";
import { parseListenAddress, startDaemonHttp } from "../../lib/daemon/http.ts";
import { countLines, LineCounter } from "../../lib/daemon/metrics.ts";
import { parsePrometheusText, sampleValue } from "../support/prom_text.ts";

async function get(port: number, path: string, method = "GET") {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method });
  return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
}

Deno.test("/healthz answers ok; /readyz follows ready() with its reasons; 404 and 405", async () => {
  let ready = { ok: false, reasons: ["NAD watch not synced", "API unreachable: timeout"] };
  const http = await startDaemonHttp({ address: "127.0.0.1:0", ready: () => ready });
  try {
    assert.ok(http.addr.port > 0);
    assert.deepEqual(await get(http.addr.port, "/healthz"), {
      status: 200,
      type: "text/plain; charset=utf-8",
      body: "ok\n",
    });
    const notReady = await get(http.addr.port, "/readyz");
    assert.equal(notReady.status, 503);
    assert.equal(notReady.body, "not ready\nNAD watch not synced\nAPI unreachable: timeout\n");
    ready = { ok: true, reasons: [] };
    assert.deepEqual((await get(http.addr.port, "/readyz")).status, 200);
    assert.equal((await get(http.addr.port, "/readyz")).body, "ok\n");
    ready = { ok: false, reasons: ["API unreachable"] };
    assert.equal((await get(http.addr.port, "/readyz")).status, 503);
    assert.equal((await get(http.addr.port, "/healthz", "HEAD")).status, 200);
    assert.equal((await get(http.addr.port, "/nope")).status, 404);
    assert.equal((await get(http.addr.port, "/metrics", "POST")).status, 405);
  } finally {
    await http.close();
    await http.close(); // idempotent
  }
});

Deno.test("/readyz: a throwing ready() is a 503, not a crash", async () => {
  const http = await startDaemonHttp({
    address: "127.0.0.1:0",
    ready: () => {
      throw new Error("boom");
    },
  });
  try {
    const r = await get(http.addr.port, "/readyz");
    assert.equal(r.status, 503);
    assert.match(r.body, /readiness probe failed: Error: boom/);
    assert.equal((await get(http.addr.port, "/healthz")).status, 200);
  } finally {
    await http.close();
  }
});

Deno.test("/metrics parses as Prometheus text and counts what the observer was fed", async () => {
  const dir = await Deno.makeTempDir();
  const fallbackFile = `${dir}/fallbacks`;
  const http = await startDaemonHttp({
    address: "127.0.0.1:0",
    ready: () => ({ ok: true, reasons: [] }),
    fallbackFile,
  });
  try {
    const o = http.observer;
    o.cniRequest("ADD", "success", 0.012);
    o.cniRequest("ADD", "success", 0.3);
    o.cniRequest("ADD", "error", 2);
    o.cniRequest("DEL", "success", 0.004);
    o.cniRequest("bogus\ncommand", "error", 0.001); // bounded: reported as "other"
    o.delegate("bridge", "ADD", 0.02);
    o.delegate("bridge", "ADD", 0.04);
    o.delegate("macvlan", "DEL", 0.007);
    o.apiRequest("PATCH", 200);
    o.apiRequest("PATCH", 200);
    o.apiRequest("get", 404);
    o.apiRequest("GET", 0);
    o.attachments(7);
    o.attachments(5);

    const first = await get(http.addr.port, "/metrics");
    assert.equal(first.status, 200);
    assert.match(first.type!, /^text\/plain; version=0\.0\.4/);
    const m = parsePrometheusText(first.body);
    assert.equal(m.get("manifold_cni_requests_total")?.type, "counter");
    assert.equal(
      sampleValue(m, "manifold_cni_requests_total", { command: "ADD", result: "success" }),
      2,
    );
    assert.equal(
      sampleValue(m, "manifold_cni_requests_total", { command: "ADD", result: "error" }),
      1,
    );
    assert.equal(
      sampleValue(m, "manifold_cni_requests_total", { command: "DEL", result: "success" }),
      1,
    );
    assert.equal(
      sampleValue(m, "manifold_cni_requests_total", { command: "other", result: "error" }),
      1,
    );
    assert.equal(m.get("manifold_cni_request_duration_seconds")?.type, "histogram");
    const h = "manifold_cni_request_duration_seconds";
    assert.equal(sampleValue(m, `${h}_count`, { command: "ADD" }), 3);
    assert.ok(Math.abs(sampleValue(m, `${h}_sum`, { command: "ADD" })! - 2.312) < 1e-9);
    assert.equal(sampleValue(m, `${h}_bucket`, { command: "ADD", le: "0.025" }), 1);
    assert.equal(sampleValue(m, `${h}_bucket`, { command: "ADD", le: "0.5" }), 2);
    assert.equal(sampleValue(m, `${h}_bucket`, { command: "ADD", le: "+Inf" }), 3);
    const d = "manifold_delegate_duration_seconds";
    assert.equal(m.get(d)?.type, "histogram");
    assert.equal(sampleValue(m, `${d}_count`, { plugin: "bridge", command: "ADD" }), 2);
    assert.equal(sampleValue(m, `${d}_count`, { plugin: "macvlan", command: "DEL" }), 1);
    assert.equal(sampleValue(m, "manifold_api_requests_total", { verb: "PATCH", code: "200" }), 2);
    assert.equal(sampleValue(m, "manifold_api_requests_total", { verb: "GET", code: "404" }), 1);
    assert.equal(sampleValue(m, "manifold_api_requests_total", { verb: "GET", code: "0" }), 1);
    assert.equal(m.get("manifold_attachments")?.type, "gauge");
    assert.equal(sampleValue(m, "manifold_attachments"), 5);
    // No fallbacks file yet: 0.
    assert.equal(m.get("manifold_fallback_total")?.type, "counter");
    assert.equal(sampleValue(m, "manifold_fallback_total"), 0);
    // Process metrics, unprefixed standard names.
    assert.ok(sampleValue(m, "process_resident_memory_bytes")! > 1024 * 1024);
    assert.ok(sampleValue(m, "process_cpu_seconds_total")! > 0);
    assert.ok(sampleValue(m, "process_start_time_seconds")! > 1.7e9);
    // Counted through libc (prom-client's read /proc/self, refused without --allow-all).
    assert.ok(sampleValue(m, "process_open_fds")! > 3);
    assert.ok(sampleValue(m, "process_max_fds")! >= sampleValue(m, "process_open_fds")!);
    for (const [name, f] of m) assert.ok(f.help, `HELP for ${name}`);

    // The forwarder appends one line per fallback; counted at each scrape.
    await Deno.writeTextFile(fallbackFile, "1764000000000 socket absent\n1764000000001 refused\n");
    let again = parsePrometheusText((await get(http.addr.port, "/metrics")).body);
    assert.equal(sampleValue(again, "manifold_fallback_total"), 2);
    await Deno.writeTextFile(fallbackFile, "1764000000002 refused\n", { append: true });
    o.cniRequest("ADD", "success", 0.01);
    again = parsePrometheusText((await get(http.addr.port, "/metrics")).body);
    assert.equal(sampleValue(again, "manifold_fallback_total"), 3);
    assert.equal(
      sampleValue(again, "manifold_cni_requests_total", { command: "ADD", result: "success" }),
      3,
    );
  } finally {
    await http.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("process metrics are real under the daemon's own permissions (no --allow-all)", async () => {
  const root = new URL("../../", import.meta.url);
  const flags = (await Deno.readTextFile(new URL("scripts/permissions", root)))
    .split(/\s+/).filter((f) => f);
  assert.ok(!flags.includes("-A") && !flags.includes("--allow-all"), "the test needs the real set");
  const script = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(
      script,
      `import { createDaemonMetrics } from "${new URL("lib/daemon/metrics.ts", root).href}";
       const m = createDaemonMetrics();
       console.log(await m.scrape());
       m.clear();`,
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--cached-only",
        "--config",
        new URL("deno.json", root).pathname,
        ...flags,
        script,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const m = parsePrometheusText(new TextDecoder().decode(out.stdout));
    assert.ok(sampleValue(m, "process_resident_memory_bytes")! > 10 * 1024 * 1024);
    assert.ok(sampleValue(m, "process_cpu_seconds_total")! > 0);
    for (const [name, f] of m) {
      if (name.startsWith("process_")) {
        for (const s of f.samples) assert.ok(s.value !== 0 || name.endsWith("_total"), s.name);
      }
    }
  } finally {
    await Deno.remove(script);
  }
});

Deno.test("countLines: missing file 0, an unterminated last line counts", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assert.equal(await countLines(`${dir}/absent`), 0);
    await Deno.writeTextFile(`${dir}/f`, "");
    assert.equal(await countLines(`${dir}/f`), 0);
    await Deno.writeTextFile(`${dir}/f`, "a\nb");
    assert.equal(await countLines(`${dir}/f`), 2);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("LineCounter: reads only appended bytes; a replaced or truncated file is recounted", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/fallbacks`;
  try {
    const c = new LineCounter(path);
    assert.equal(await c.count(), 0);
    await Deno.writeTextFile(path, "a\nb\nc");
    assert.equal(await c.count(), 3);
    await Deno.writeTextFile(path, "c\nd\n", { append: true }); // completes "c", adds "d"
    assert.equal(await c.count(), 4);
    assert.equal(await c.count(), 4);
    await Deno.writeTextFile(path, "x\n"); // truncated and rewritten: shorter
    assert.equal(await c.count(), 1);
    await Deno.writeTextFile(`${path}.new`, "1\n2\n3\n4\n5\n6\n");
    await Deno.rename(`${path}.new`, path); // replaced: another inode
    assert.equal(await c.count(), 6);
    await Deno.remove(path);
    assert.equal(await c.count(), 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("listen address: HOST:PORT and [v6]:PORT; invalid shapes and a taken port throw", async () => {
  assert.deepEqual(parseListenAddress("127.0.0.1:9091"), { hostname: "127.0.0.1", port: 9091 });
  assert.deepEqual(parseListenAddress("[::1]:0"), { hostname: "::1", port: 0 });
  for (const bad of ["9091", "127.0.0.1", "127.0.0.1:70000", ":9091", "::1:9091", "a b:1"]) {
    assert.throws(() => parseListenAddress(bad), /invalid listen address/, bad);
  }
  const ready = () => ({ ok: true, reasons: [] });
  await assert.rejects(startDaemonHttp({ address: "nope", ready }), /invalid listen address/);
  const first = await startDaemonHttp({ address: "127.0.0.1:0", ready });
  try {
    await assert.rejects(
      startDaemonHttp({ address: `127.0.0.1:${first.addr.port}`, ready }),
      Deno.errors.AddrInUse,
    );
  } finally {
    await first.close();
  }
});
