/**
 * A loopback TCP proxy for tests and benchmarks: forwards every connection to a target
 * (`host:port`, e.g. a kube-apiserver; TLS passes through untouched), adding `delayMs` to
 * every chunk in each direction (so a request/answer exchange gains 2 × `delayMs`, one RTT),
 * and can hold all traffic (`pause()`: an API server that stopped answering, connections kept
 * open) and let it flow again (`resume()`). Order within a direction is kept.
 *
 * @module
 */

/** A running proxy. */
export interface TcpProxy {
  /** `127.0.0.1`'s port it listens on. */
  port: number;
  /** Delay added to each chunk, each way, ms; may be changed at any time. */
  delayMs: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Holds every byte (both directions) until {@link TcpProxy.resume}. */
  pause(): void;
  /** Lets held bytes flow again. */
  resume(): void;
  /**
   * Black-holes every connection open now: from now on their bytes (both directions) are
   * dropped silently and the connections stay open, as a dead NAT entry or a crashed middlebox
   * does; connections accepted later flow normally.
   * @returns how many connections were black-holed
   */
  blackhole(): number;
  /**
   * Drops every connection open now: both sides closed at once, without a word (no TLS
   * `close_notify`), as a middlebox, a NAT timeout or a load balancer drops an idle connection;
   * connections accepted later flow normally.
   * @returns how many connections were dropped
   */
  cut(): number;
  /** Closes the listener and every connection; idempotent. */
  close(): Promise<void>;
}

/**
 * Starts a proxy on `127.0.0.1:<free port>` to `target`.
 * @param target where connections go, e.g. `{ hostname: "127.0.0.1", port: 6443 }`
 * @param opts `delayMs`: added to each chunk each way (default 0)
 * @returns the running proxy; always `close()` it
 */
export function startTcpProxy(
  target: { hostname: string; port: number },
  opts: { delayMs?: number } = {},
): TcpProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.TcpConn>();
  let gate: Promise<void> | undefined;
  let open: (() => void) | undefined;
  let accepted = 0;
  const holed = new Set<Deno.Conn>();
  const proxy: TcpProxy = {
    port: (listener.addr as Deno.NetAddr).port,
    delayMs: opts.delayMs ?? 0,
    get accepted() {
      return accepted;
    },
    pause() {
      gate ??= new Promise((r) => open = r);
    },
    resume() {
      open?.();
      gate = open = undefined;
    },
    blackhole() {
      for (const c of conns) holed.add(c);
      return conns.size / 2;
    },
    cut() {
      const n = conns.size / 2;
      for (const c of conns) closeQuietly(c);
      return n;
    },
    async close() {
      proxy.resume();
      try {
        listener.close();
      } catch { /* closed */ }
      for (const c of conns) closeQuietly(c);
      await serving;
    },
  };
  const pipe = async (src: Deno.Conn, dst: Deno.Conn) => {
    const queue: { at: number; data: Uint8Array }[] = [];
    let wake: (() => void) | undefined;
    let ended = false;
    const reading = (async () => {
      const buf = new Uint8Array(64 * 1024);
      for (;;) {
        const n = await src.read(buf);
        if (n === null) break;
        queue.push({ at: performance.now() + proxy.delayMs, data: buf.slice(0, n) });
        wake?.();
      }
    })().catch(() => {}).finally(() => {
      ended = true;
      wake?.();
    });
    try {
      for (;;) {
        while (queue.length === 0 && !ended) await new Promise<void>((r) => wake = r);
        wake = undefined;
        const head = queue.shift();
        if (!head) break;
        const wait = head.at - performance.now();
        if (wait > 0.5) await new Promise((r) => setTimeout(r, wait));
        while (gate) await gate;
        if (holed.has(src) || holed.has(dst)) continue;
        for (let off = 0; off < head.data.length;) {
          off += await dst.write(head.data.subarray(off));
        }
      }
      await dst.closeWrite().catch(() => {});
    } catch {
      closeQuietly(src);
      closeQuietly(dst);
    }
    await reading;
  };
  const serving = (async () => {
    for await (const client of listener) {
      accepted++;
      conns.add(client);
      client.setNoDelay(true);
      void (async () => {
        let upstream: Deno.TcpConn | undefined;
        try {
          const up = await Deno.connect(target);
          up.setNoDelay(true);
          upstream = up;
          conns.add(upstream);
          await Promise.all([pipe(client, upstream), pipe(upstream, client)]);
        } catch {
          /* a side went away */
        } finally {
          closeQuietly(client);
          if (upstream) closeQuietly(upstream);
          conns.delete(client);
          holed.delete(client);
          if (upstream) {
            conns.delete(upstream);
            holed.delete(upstream);
          }
        }
      })();
    }
  })().catch(() => {});
  return proxy;
}

function closeQuietly(c: Deno.Conn): void {
  try {
    c.close();
  } catch { /* closed */ }
}
