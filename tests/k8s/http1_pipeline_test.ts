/**
 * Tests of GET pipelining in lib/k8s/http1/ (RFC 9112 §9.3.2) against a scripted plain-TCP
 * server that records which connection every request arrived on and answers in order, as Go's
 * net/http (kube-apiserver) does; only this server can be told to close or stall at an exact
 * point. The real kube-apiserver case is tests/realapi/pipeline_test.ts.
 */

import assert from "node:assert/strict";
import { Http1Transport, MAX_PIPELINE_DEPTH } from "../../lib/k8s/http1/mod.ts";
import { createTransport } from "../../lib/k8s/transport.ts";
import { okResponse, type ScriptedConn, withScriptedServer } from "../support/scripted_http.ts";

/** What the server does with one request: answer (keep-alive), answer then close, or close. */
type Reply = { body: string; close?: boolean; delayMs?: number } | "drop";

interface Seen {
  /** Per connection (in accept order), the paths of the requests received on it. */
  readonly conns: string[][];
}

/**
 * A server answering the requests of each connection in arrival order. `hold`: on the first
 * connection, after the first request, wait until that many requests arrived (or 2 s) before
 * answering the next one, so pipelined requests are all in before the answers go out.
 */
async function withServer(
  policy: (conn: number, index: number, path: string) => Reply,
  hold: number,
  fn: (url: string, seen: Seen) => Promise<void>,
) {
  const script = async (c: ScriptedConn) => {
    for (let i = 0;; i++) {
      if (c.index === 0 && i === 1) await c.request(hold - 1, 2000);
      const req = await c.request(i);
      if (!req) break;
      const reply = policy(c.index, i, req.path);
      if (reply === "drop") break;
      if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
      await c.send(okResponse(reply.body, reply.close));
      if (reply.close) break;
    }
    c.close();
  };
  await withScriptedServer({ script }, async (server) => {
    await fn(server.url, {
      get conns() {
        return server.paths();
      },
    });
  });
}

const get = (t: Http1Transport, url: string, signal = new AbortController().signal) =>
  t.send({ method: "GET", url, headers: { accept: "application/json" }, signal });

const echo = (_c: number, _i: number, path: string): Reply => ({ body: path });

Deno.test("http1 pipelining: concurrent GETs share the kept-alive connection, each gets its own answer", async () => {
  await withServer(echo, 4, async (url, seen) => {
    const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false }, {
      pipelineDepth: 4,
    });
    try {
      assert.equal((await get(t, `${url}/pod`)).body, "/pod");
      const paths = ["/nad-a", "/nad-b", "/nad-c"];
      const bodies = await Promise.all(paths.map((p) => get(t, `${url}${p}`)));
      assert.deepEqual(bodies.map((b) => b.body), paths);
      assert.deepEqual(seen.conns, [["/pod", ...paths]]);
      // Back in the pool afterwards: the next GET reuses it.
      assert.equal((await get(t, `${url}/after`)).body, "/after");
      assert.equal(seen.conns.length, 1);
    } finally {
      t.close();
    }
  });
});

Deno.test("http1 pipelining: GETs sent before any connection exists wait for the one being opened", async () => {
  await withServer(echo, 3, async (url, seen) => {
    const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false }, {
      pipelineDepth: 4,
    });
    try {
      const paths = ["/a", "/b", "/c", "/d", "/e"];
      const bodies = await Promise.all(paths.map((p) => get(t, `${url}${p}`)));
      assert.deepEqual(bodies.map((b) => b.body), paths);
      // Four on the first connection (the depth), the fifth on a second one.
      assert.deepEqual(seen.conns, [["/a", "/b", "/c", "/d"], ["/e"]]);
    } finally {
      t.close();
    }
  });
});

Deno.test("http1 pipelining: off by default, and never deeper than the depth", async () => {
  await withServer(echo, 1, async (url, seen) => {
    const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false });
    try {
      await get(t, `${url}/pod`);
      await Promise.all(["/a", "/b"].map((p) => get(t, `${url}${p}`)));
      assert.equal(seen.conns.length, 2); // the second GET opened a connection
    } finally {
      t.close();
    }
  });
  await withServer(echo, 3, async (url, seen) => {
    const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false }, {
      pipelineDepth: 2,
    });
    try {
      await get(t, `${url}/pod`);
      const paths = ["/a", "/b", "/c", "/d"];
      const bodies = await Promise.all(paths.map((p) => get(t, `${url}${p}`)));
      assert.deepEqual(bodies.map((b) => b.body), paths);
      assert.ok(seen.conns.every((c) => c.length <= 3), JSON.stringify(seen.conns));
      assert.deepEqual(seen.conns[0].slice(0, 3), ["/pod", "/a", "/b"]);
    } finally {
      t.close();
    }
  });
});

for (const how of ["Connection: close", "a close without answer"]) {
  Deno.test(`http1 pipelining: ${how} before queued GETs' answers sends them again once, together on one new connection`, async () => {
    const policy = (c: number, i: number, path: string): Reply => {
      if (c === 0 && i === 1) {
        return how === "Connection: close" ? { body: path, close: true } : "drop";
      }
      return { body: path };
    };
    await withServer(policy, 4, async (url, seen) => {
      const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false }, {
        pipelineDepth: 4,
      });
      try {
        await get(t, `${url}/pod`);
        const paths = ["/a", "/b", "/c"];
        const results = await Promise.allSettled(paths.map((p) => get(t, `${url}${p}`)));
        // The three were written on the first connection at once.
        assert.deepEqual(seen.conns[0], ["/pod", ...paths]);
        assert.deepEqual(results.map((r) => r.status === "fulfilled" && r.value.body), paths);
        // Sent again, together on one new connection: those without an answer there (/a too
        // when it got none: it had taken the kept-alive connection).
        assert.deepEqual(
          seen.conns.slice(1),
          [how === "Connection: close" ? ["/b", "/c"] : paths],
        );
      } finally {
        t.close();
      }
    });
  });
}

Deno.test("http1 pipelining: a PATCH is never pipelined, and no GET is pipelined behind it", async () => {
  // PATCHes and /a answered late, so their connections are busy while the others are sent.
  const policy = (_c: number, _i: number, path: string): Reply => ({
    body: path,
    delayMs: path === "/a" || path.startsWith("/status") ? 200 : 0,
  });
  await withServer(policy, 1, async (url, seen) => {
    const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false }, {
      pipelineDepth: 4,
    });
    const patch = (path: string) =>
      t.send({
        method: "PATCH",
        url: `${url}${path}`,
        headers: { "content-type": "application/merge-patch+json" },
        body: "{}",
        signal: new AbortController().signal,
      });
    try {
      await get(t, `${url}/pod`);
      const p1 = patch("/status"); // takes the kept-alive connection
      const a = get(t, `${url}/a`); // not behind the PATCH: a new connection
      for (let ms = 0; (seen.conns[1]?.length ?? 0) < 1 && ms < 3000; ms += 10) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const rest = ["/b", "/c"].map((p) => get(t, `${url}${p}`)); // behind /a
      const p2 = patch("/status2"); // not behind the GETs: a new connection
      assert.equal((await p1).body, "/status");
      assert.deepEqual((await Promise.all([a, ...rest])).map((r) => r.body), ["/a", "/b", "/c"]);
      assert.equal((await p2).body, "/status2");
      assert.deepEqual(seen.conns, [
        ["/pod", "PATCH /status"],
        ["/a", "/b", "/c"],
        ["PATCH /status2"],
      ]);
    } finally {
      t.close();
    }
  });
});

Deno.test("http1 pipelining: an aborted GET, queued or being read, leaves the others' answers right", async () => {
  for (const aborted of ["/b", "/a"]) { // queued behind a slow /a; /a itself while read
    const policy = (c: number, _i: number, path: string): Reply =>
      c === 0 && path === "/a" ? { body: path, delayMs: 300 } : { body: path };
    await withServer(policy, 4, async (url, seen) => {
      const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false }, {
        pipelineDepth: 4,
      });
      try {
        await get(t, `${url}/pod`);
        const stop = new AbortController();
        const paths = ["/a", "/b", "/c"];
        const pending = paths.map((p) =>
          get(t, `${url}${p}`, p === aborted ? stop.signal : undefined)
        );
        for (let ms = 0; seen.conns[0].length < 4 && ms < 3000; ms += 10) {
          await new Promise((r) => setTimeout(r, 10));
        }
        stop.abort(new DOMException("Request timed out", "TimeoutError"));
        const results = await Promise.allSettled(pending);
        assert.deepEqual(seen.conns[0], ["/pod", ...paths]);
        paths.forEach((p, i) => {
          const r = results[i];
          if (p === aborted) {
            assert.ok(r.status === "rejected" && r.reason.name === "TimeoutError", p);
          } else {
            assert.ok(r.status === "fulfilled", `${p}: ${r.status === "rejected" && r.reason}`);
            assert.equal(r.value.body, p);
          }
        });
        assert.equal((await get(t, `${url}/after`)).body, "/after");
      } finally {
        t.close();
      }
    });
  }
});

/**
 * A server whose first connection answers its first request with `head` and half of a 4-byte
 * body, then waits until the test calls `finish` to send the rest (and close, as `head` says);
 * other connections answer each GET with its path.
 */
async function withSlowBody(
  head: string,
  fn: (url: string, paths: () => string[][], finish: () => void) => Promise<void>,
) {
  let finish!: () => void;
  const finished = new Promise<void>((r) => finish = r);
  const script = async (c: ScriptedConn) => {
    for (let i = 0;; i++) {
      const req = await c.request(i);
      if (!req) return;
      if (c.index > 0) {
        await c.send(okResponse(req.path));
      } else if (i === 0) {
        await c.send(`${head}\r\nab`);
        (async () => {
          await finished;
          await c.send("cd").catch(() => {});
          c.close();
        })();
      }
    }
  };
  try {
    await withScriptedServer({ script }, (server) => fn(server.url, server.paths, finish));
  } finally {
    finish();
  }
}

for (
  const [name, head] of [
    ["Connection: close", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n"],
    ["a body read to the close", "HTTP/1.1 200 OK\r\n"],
    ["HTTP/1.0 without keep-alive", "HTTP/1.0 200 OK\r\nContent-Length: 4\r\n"],
  ]
) {
  Deno.test(`http1 pipelining: no GET is pipelined behind a response whose head ends the connection (${name})`, async () => {
    await withSlowBody(head, async (url, paths, finish) => {
      const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false }, {
        pipelineDepth: 4,
      });
      try {
        const first = get(t, `${url}/first`);
        // The head and half the body have been sent; the client reads the head at once (the
        // wait only has to outlast that read), then waits for the rest of the body.
        while (paths()[0]?.length !== 1) await new Promise((r) => setTimeout(r, 10));
        await new Promise((r) => setTimeout(r, 300));
        const second = get(t, `${url}/second`);
        await new Promise((r) => setTimeout(r, 100));
        finish();
        assert.equal((await first).body, "abcd");
        assert.equal((await second).body, "/second");
        // RFC 9112 §9.6: nothing more is sent on a connection whose response said it ends.
        assert.deepEqual(paths(), [["/first"], ["/second"]]);
      } finally {
        t.close();
      }
    });
  });
}

Deno.test("http1 pipelining: a GET waiting for another GET's connection to open honours its own abort", async () => {
  // A TLS server that accepts and never answers the handshake: the first GET's open hangs.
  await withScriptedServer({ parse: false }, async (server) => {
    const url = server.url.replace("http:", "https:");
    const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false }, {
      pipelineDepth: 4,
    });
    const opener = new AbortController();
    const joiner = new AbortController();
    try {
      const first = get(t, `${url}/first`, opener.signal);
      first.catch(() => {});
      const second = get(t, `${url}/second`, joiner.signal);
      let settled: PromiseSettledResult<unknown> | undefined;
      second.then(
        (value) => settled = { status: "fulfilled", value },
        (reason) => settled = { status: "rejected", reason },
      );
      while (server.conns.length === 0) await new Promise((r) => setTimeout(r, 10));
      joiner.abort(new DOMException("Request timed out", "TimeoutError"));
      // Its caller's deadline, not the first GET's, bounds it: it gives up while the other
      // connection is still being opened.
      for (let ms = 0; !settled && ms < 3000; ms += 10) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const early = settled;
      opener.abort(new DOMException("Request timed out", "TimeoutError"));
      await Promise.allSettled([first, second]);
      assert.ok(early, "the aborted GET waited for the other GET's connection");
      assert.equal(early.status, "rejected");
      assert.equal((early as PromiseRejectedResult).reason.name, "TimeoutError");
      assert.equal(server.conns.length, 1); // it opened no connection of its own
    } finally {
      t.close();
    }
  });
});

Deno.test("http1 pipelining: createTransport's pipelineGets pipelines up to the transport's depth; the request layer leaves the depth to it", async () => {
  await withServer(echo, 4, async (url, seen) => {
    const t = createTransport({ server: url, insecureSkipTlsVerify: false }, {}, {
      pipelineGets: true,
    });
    try {
      const paths = ["/a", "/b", "/c", "/d", "/e"];
      const bodies = await Promise.all(
        paths.map((p) =>
          t.send({
            method: "GET",
            url: `${url}${p}`,
            headers: {},
            signal: new AbortController().signal,
          })
        ),
      );
      assert.deepEqual(bodies.map((b) => b.body), paths);
      assert.equal(MAX_PIPELINE_DEPTH, 4);
      assert.deepEqual(seen.conns, [["/a", "/b", "/c", "/d"], ["/e"]]);
    } finally {
      t.close();
    }
  });
  // The depth is the transport's: the request layer imports nothing of http1/.
  const source = await Deno.readTextFile(new URL("../../lib/k8s/request.ts", import.meta.url));
  const imports = [...source.matchAll(/^import [^;]*? from "([^"]+)";/gms)].map((m) => m[1]);
  assert.ok(imports.includes("./transport.ts"), imports.join(", "));
  assert.deepEqual(imports.filter((i) => i.includes("http1")), []);
});

/**
 * Reads one connection's requests as bytes (a request head may be MiBs long), calling `onHead`
 * with each request's path once its head is in; stops when `onHead` returns false or the
 * client ends.
 */
async function readHeads(conn: Deno.Conn, onHead: (path: string) => Promise<boolean>) {
  const buf = new Uint8Array(256 * 1024);
  let line = ""; // the start of the current head (its request line)
  let tail = ""; // the last 3 bytes seen, to find "\r\n\r\n" across reads
  for (;;) {
    const n = await conn.read(buf).catch(() => null);
    if (n === null) return;
    let text = tail + new TextDecoder("latin1").decode(buf.subarray(0, n));
    for (let end; (end = text.indexOf("\r\n\r\n")) >= 0;) {
      line += text.slice(0, Math.min(end, 200));
      if (!await onHead(line.split(" ")[1])) return;
      line = "";
      text = text.slice(end + 4);
    }
    if (line.length < 200) line += text.slice(0, 200);
    tail = text.slice(-3);
  }
}

Deno.test("http1 pipelining: a GET whose write fails after the GETs before it were answered is sent again once", async () => {
  // The second GET's head is 32 MiB, more than the socket buffers hold, so its write is still
  // going when the server answers the first GET (keep-alive) and closes with the rest unread:
  // the kernel resets the connection and the write fails (ECONNRESET/EPIPE) after the first
  // GET's answer arrived. Another connection answers every GET.
  const big = "x".repeat(32 * 1024 * 1024);
  const script = async (c: ScriptedConn) => {
    await readHeads(c.conn, async (path) => {
      await c.send(okResponse(path));
      return c.index > 0; // the first connection: one answer, then the reset
    });
    c.close();
  };
  await withScriptedServer({ script, parse: false }, async (server) => {
    const t = new Http1Transport({ server: server.url, insecureSkipTlsVerify: false }, {
      pipelineDepth: 4,
    });
    try {
      const signal = new AbortController().signal;
      const a = get(t, `${server.url}/a`);
      const b = t.send({ method: "GET", url: `${server.url}/b`, headers: { big }, signal });
      const [ra, rb] = await Promise.allSettled([a, b]);
      assert.equal(ra.status === "fulfilled" && ra.value.body, "/a");
      assert.ok(
        rb.status === "fulfilled",
        `the second GET failed: ${rb.status === "rejected" && rb.reason}`,
      );
      assert.equal(rb.value.body, "/b");
      assert.equal(server.conns.length, 2); // sent again once, on a new connection
    } finally {
      t.close();
    }
  });
});
