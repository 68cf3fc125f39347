/**
 * A traffic agent run inside a test network namespace (`ip netns exec NS deno run
 * --allow-net agent.ts`): reads commands from stdin, one per line, answers one line each.
 *
 * - `listen PORT…` → TCP listeners on `::` (IPv4 and IPv6) that accept and close; answers `ok`.
 * - `connect IP PORT TIMEOUT_MS` → a TCP connect; answers `ok` or `fail <reason>`.
 * - `udp-listen PORT…` → UDP echo servers on 0.0.0.0; answers `ok`.
 * - `udp IP PORT TIMEOUT_MS` → one datagram, `ok` when the echo comes back in time.
 *
 * @module
 */

import dgram from "node:dgram";

const enc = new TextEncoder();
const out = (s: string) => Deno.stdout.writeSync(enc.encode(`${s}\n`));

async function connect(ip: string, port: number, timeoutMs: number): Promise<string> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  try {
    const conn = await Promise.race([
      Deno.connect({ hostname: ip, port }),
      new Promise<never>((_, rej) =>
        ac.signal.addEventListener("abort", () => rej(new Error("timeout")))
      ),
    ]);
    conn.close();
    return "ok";
  } catch (e) {
    return `fail ${e instanceof Error ? e.message.split("\n")[0] : e}`;
  } finally {
    clearTimeout(timer);
  }
}

function udpEcho(port: number): Promise<void> {
  const sock = dgram.createSocket("udp4");
  sock.on("message", (msg, rinfo) => sock.send(msg, rinfo.port, rinfo.address));
  return new Promise((resolve) => sock.bind(port, "0.0.0.0", () => resolve()));
}

function udpPing(ip: string, port: number, timeoutMs: number): Promise<string> {
  const sock = dgram.createSocket(ip.includes(":") ? "udp6" : "udp4");
  return new Promise((resolve) => {
    const done = (r: string) => {
      clearTimeout(timer);
      sock.close();
      resolve(r);
    };
    const timer = setTimeout(() => done("fail timeout"), timeoutMs);
    sock.on("message", () => done("ok"));
    sock.on("error", (e) => done(`fail ${e.message}`));
    sock.send("ping", port, ip);
  });
}

async function serve(l: Deno.Listener): Promise<void> {
  for await (const c of l) c.close();
}

let buf = "";
const dec = new TextDecoder();
for await (const chunk of Deno.stdin.readable) {
  buf += dec.decode(chunk);
  let nl;
  while ((nl = buf.indexOf("\n")) >= 0) {
    const [cmd, ...args] = buf.slice(0, nl).trim().split(/\s+/);
    buf = buf.slice(nl + 1);
    if (cmd === "listen") {
      for (const p of args) serve(Deno.listen({ hostname: "::", port: Number(p) }));
      out("ok");
    } else if (cmd === "connect") {
      connect(args[0], Number(args[1]), Number(args[2])).then(out);
    } else if (cmd === "udp-listen") {
      Promise.all(args.map((p) => udpEcho(Number(p)))).then(() => out("ok"));
    } else if (cmd === "udp") {
      udpPing(args[0], Number(args[1]), Number(args[2])).then(out);
    } else out(`fail unknown command ${cmd}`);
  }
}
