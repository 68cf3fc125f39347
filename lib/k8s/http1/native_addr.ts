/**
 * Addresses for native_tls.ts: an IP literal parsed to its bytes, a `struct sockaddr_in(6)`
 * built from it, and a host name resolved with `getaddrinfo(3)` (`/etc/hosts`, then DNS, as
 * `Deno.connect` resolves; on another thread).
 *
 * @module
 */

import { SSL } from "../../../native/libssl.ts";
import { nativeColdLib } from "./native_context.ts";

const encoder = new TextEncoder();

/**
 * An IP literal's bytes (4 or 16), or undefined for a name. IPv6 in the forms a URL's host
 * takes (`new URL` writes it compressed, lower case, no zone, IPv4 tail rewritten as hex).
 * @param host an IPv4 dotted quad, an IPv6 literal without brackets, or a name
 * @returns the address bytes in network order, or undefined
 * @example parseIp("10.96.0.1") // Uint8Array [10, 96, 0, 1]
 */
export function parseIp(host: string): Uint8Array | undefined {
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (v4) {
    const b = v4.slice(1).map(Number);
    return b.every((x) => x <= 255) ? new Uint8Array(b) : undefined;
  }
  if (!/^[0-9a-fA-F:]+$/.test(host) || !host.includes(":")) return undefined;
  const halves = host.split("::");
  if (halves.length > 2) return undefined;
  const groups = (s: string) => s === "" ? [] : s.split(":");
  const head = groups(halves[0]);
  const tail = halves.length === 2 ? groups(halves[1]) : [];
  const fill = 8 - head.length - tail.length;
  if (halves.length === 2 ? fill < 1 : fill !== 0) return undefined;
  const all = [...head, ...Array(halves.length === 2 ? fill : 0).fill("0"), ...tail];
  if (all.some((g) => g.length === 0 || g.length > 4)) return undefined;
  const out = new Uint8Array(16);
  all.forEach((g, i) => {
    const v = parseInt(g, 16);
    out[2 * i] = v >> 8;
    out[2 * i + 1] = v & 0xff;
  });
  return out;
}

/**
 * A `struct sockaddr_in` (16 bytes) or `sockaddr_in6` (28; flow info and scope 0): the family
 * in host order (little-endian on x86-64 and arm64), the port and address in network order
 * (netinet/in.h).
 * @param ip 4 or 16 address bytes ({@link parseIp})
 * @param port the TCP port
 * @returns the bytes, in a store of their own (never moved by the GC)
 * @example sockaddr(new Uint8Array([127, 0, 0, 1]), 443).length // 16
 */
export function sockaddr(ip: Uint8Array, port: number): Uint8Array {
  const sa = new Uint8Array(new ArrayBuffer(ip.length === 4 ? 16 : 28));
  const view = new DataView(sa.buffer);
  view.setUint16(0, ip.length === 4 ? SSL.AF_INET : SSL.AF_INET6, true);
  view.setUint16(2, port, false);
  sa.set(ip, ip.length === 4 ? 4 : 8);
  return sa;
}

/**
 * The stream addresses of a host name (`getaddrinfo(3)` with `AI_ADDRCONFIG`, on a thread of
 * Deno's blocking pool), as sockaddrs in the resolver's order, duplicates dropped.
 * @param host a name (not an IP literal)
 * @param port the TCP port written into each
 * @param signal checked once the lookup returns (the lookup itself is not interrupted)
 * @returns IPv4 and IPv6 sockaddrs, maybe none
 * @throws {Deno.errors.NotFound} when the lookup fails (the `EAI_*` code in the message); the
 *   signal's reason when it was aborted meanwhile
 */
export async function resolve(
  host: string,
  port: number,
  signal?: AbortSignal,
): Promise<Uint8Array[]> {
  const C = nativeColdLib();
  const node = encoder.encode(host + "\0");
  const service = encoder.encode(`${port}\0`);
  const nodeBuf = new Uint8Array(new ArrayBuffer(node.length));
  nodeBuf.set(node);
  const serviceBuf = new Uint8Array(new ArrayBuffer(service.length));
  serviceBuf.set(service);
  const hints = new DataView(new ArrayBuffer(SSL.ADDRINFO_SIZE));
  hints.setInt32(0, 0x20, true); // AI_ADDRCONFIG
  hints.setInt32(8, SSL.SOCK_STREAM, true);
  const res = new BigUint64Array(new ArrayBuffer(8));
  const rc = await C.getaddrinfo(nodeBuf, serviceBuf, new Uint8Array(hints.buffer), res);
  const first = Deno.UnsafePointer.create(res[0]);
  if (rc !== 0 || first === null) {
    signal?.throwIfAborted();
    throw new Deno.errors.NotFound(`failed to look up ${host} (getaddrinfo error ${rc})`);
  }
  const out: Uint8Array[] = [];
  try {
    for (let p: Deno.PointerValue = first; p !== null;) {
      const view: Deno.UnsafePointerView = new Deno.UnsafePointerView(p);
      const family = view.getInt32(4);
      const len = view.getUint32(16);
      const addr = view.getPointer(24);
      if (addr !== null && (family === SSL.AF_INET || family === SSL.AF_INET6)) {
        const sa = new Uint8Array(new ArrayBuffer(len));
        sa.set(new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(addr, len)));
        if (!out.some((o) => o.length === sa.length && o.every((b, i) => b === sa[i]))) {
          out.push(sa);
        }
      }
      p = view.getPointer(40);
    }
  } finally {
    C.freeaddrinfo(first);
  }
  signal?.throwIfAborted();
  return out;
}
