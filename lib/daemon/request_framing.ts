/**
 * The request framing of the daemon socket (lib/daemon/server.ts): reading one request (a
 * length-prefixed header and stdin, lib/daemon/protocol.ts) within the idle timeout, each length
 * checked before its bytes are read, and writing one framed answer.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../cni/errors.ts";
import { type DaemonAnswer, forwardedEnv, frame, PROTOCOL_VERSION } from "./protocol.ts";
import type { CniRequest } from "./service.ts";
import type { UnixConnection } from "./unix_listener.ts";

/** Thrown by {@link readRequest} for a connection closed before its first byte. */
export const PROBE = Symbol("probe");
/** Buffer grown as a frame's bytes arrive, bytes: the first allocation. */
const READ_CHUNK = 64 * 1024;

/** The bounds of {@link readRequest}. */
export interface RequestLimits {
  /** Largest header, bytes. */
  maxHeader: number;
  /** Largest stdin, bytes. */
  maxStdin: number;
  /** Time to receive the complete request, ms. */
  idleMs: number;
}

/**
 * Reads both frames within the idle timeout; each length is checked before its bytes are
 * read, and buffers grow as bytes arrive.
 * @param conn the accepted connection (its `deadline` is set)
 * @param limits see {@link RequestLimits}
 * @returns the request (only the forwarded CNI variables of its env)
 * @throws {CniError} 5, 6 or 7; `PROBE` when the peer closed before sending any byte
 */
export async function readRequest(
  conn: UnixConnection,
  limits: RequestLimits,
): Promise<CniRequest> {
  const { maxHeader, maxStdin, idleMs } = limits;
  conn.deadline = performance.now() + idleMs; // reads give up then: an idle client is dropped
  {
    let received = 0;
    const read = async (n: number): Promise<Uint8Array> => {
      let buf = new Uint8Array(Math.min(n, READ_CHUNK));
      for (let off = 0; off < n;) {
        if (off === buf.length) { // grow only as the bytes come
          const bigger = new Uint8Array(Math.min(n, buf.length * 2));
          bigger.set(buf);
          buf = bigger;
        }
        const got = await conn.read(buf.subarray(off));
        const timedOut = performance.now() >= conn.deadline;
        if (got === null && received === 0 && !timedOut) throw PROBE;
        if (got === null) {
          throw new CniError(
            CniErrorCode.IoFailure,
            timedOut ? `request not received within ${idleMs} ms` : "truncated request",
          );
        }
        off += got;
        received += got;
      }
      return buf;
    };
    const length = async (what: string, max: number) => {
      const n = new DataView((await read(4)).buffer).getUint32(0);
      if (n > max) {
        throw new CniError(
          CniErrorCode.InvalidNetworkConfig,
          `request ${what} of ${n} bytes exceeds the limit of ${max} bytes`,
        );
      }
      return n;
    };
    const header = await read(await length("header", maxHeader));
    let parsed: unknown;
    try {
      parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(header));
    } catch (e) {
      throw new CniError(CniErrorCode.DecodingFailure, "malformed request header", String(e));
    }
    const h = parsed as { v?: unknown; env?: unknown };
    if (
      typeof h !== "object" || h === null || h.v !== PROTOCOL_VERSION ||
      typeof h.env !== "object" || h.env === null || Array.isArray(h.env) ||
      !Object.values(h.env).every((v) => typeof v === "string")
    ) {
      throw new CniError(
        CniErrorCode.DecodingFailure,
        `request header must be {"v": ${PROTOCOL_VERSION}, "env": {NAME: string}}`,
      );
    }
    const stdin = await read(await length("stdin", maxStdin));
    // Only the per-invocation CNI variables (protocol.ts REQUEST_ENV): the rest is the daemon's.
    return { env: forwardedEnv(h.env as Record<string, unknown>), stdin };
  }
}

/**
 * Writes one framed answer (protocol.ts `frame`: a 4-byte big-endian length, then its JSON).
 *
 * @param conn the connection
 * @param answer the answer
 * @returns when every byte is written
 * @throws what the connection's `write` throws (the client went away, the deadline passed)
 */
export async function writeAnswer(conn: UnixConnection, answer: DaemonAnswer): Promise<void> {
  const bytes = frame(new TextEncoder().encode(JSON.stringify(answer)));
  for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
}
