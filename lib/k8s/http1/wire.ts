/**
 * The HTTP/1.1 wire of `transport.ts` (RFC 9112): one connection's socket with its read buffer
 * and its request order (pipelined GETs read their responses in the order written), a request's
 * bytes, and one response read off the connection — status line, headers (1xx skipped), a body
 * framed by `Content-Length`, `chunked` (§7.1) or the close, capped at
 * {@link MAX_RESPONSE_BYTES}.
 *
 * @module
 */

import { MAX_RESPONSE_BYTES, ResponseTooLargeError } from "../http_semantics.ts";
import type { TransportRequest } from "../transport_types.ts";
import type { ByteConn } from "../pinned_tls.ts";

const CRLF2 = new Uint8Array([13, 10, 13, 10]);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Response headers with case-insensitive `get`, like `Headers` (repeated names joined by ", "). */
export class ResponseHeaders {
  #map = new Map<string, string>();
  /** Adds a header line's value (a repeated name is joined with ", "). */
  add(name: string, value: string): void {
    const key = name.toLowerCase();
    const had = this.#map.get(key);
    this.#map.set(key, had === undefined ? value : `${had}, ${value}`);
  }
  /** The value of `name` (case-insensitive), or null when absent. */
  get(name: string): string | null {
    return this.#map.get(name.toLowerCase()) ?? null;
  }
}

/** Thrown when a connection ends before a complete response arrived. */
export class ConnectionClosedError extends Error {
  /**
   * The error for a connection that ended.
   * @param beforeResponse true when no byte of the response had arrived (a GET may be resent)
   * @param cause the socket's error (a reset, a failed write), when it ended so
   */
  constructor(readonly beforeResponse: boolean, cause?: unknown) {
    super(
      (beforeResponse
        ? "connection closed by the server before the response"
        : "connection closed in the middle of the response") +
        (cause === undefined ? "" : `: ${cause instanceof Error ? cause.message : cause}`),
      { cause },
    );
    this.name = "ConnectionClosedError";
  }
}

const BROKEN_CODES = new Set(["EPIPE", "ECONNRESET", "ECONNABORTED"]);

/**
 * Whether `err` says the peer ended the connection: a reset, a broken pipe, an end of stream
 * inside TLS (`Deno.errors`; the `code` of a `node:tls` socket's error).
 * @param err a socket's read or write error
 * @returns true for those; false for anything else (a malformed answer, an abort)
 */
export function connectionBroken(err: unknown): boolean {
  return err instanceof Deno.errors.BrokenPipe || err instanceof Deno.errors.ConnectionReset ||
    err instanceof Deno.errors.ConnectionAborted || err instanceof Deno.errors.UnexpectedEof ||
    BROKEN_CODES.has((err as { code?: string } | undefined)?.code ?? "");
}

/**
 * A socket with a read buffer, and the requests written on it whose responses are not read
 * yet: one, or with pipelining up to the transport's depth, answered in the order written
 * (RFC 9112 §9.3.2).
 */
export class Connection {
  #conn: ByteConn;
  #buf = new Uint8Array(0);
  #scratch = new Uint8Array(64 * 1024);
  #writing: Promise<unknown> = Promise.resolve();
  /** Settles when the last request queued has been answered (or given up); the next one reads then. */
  #tail: Promise<void> = Promise.resolve();
  /** Bytes of the current response received so far (0: nothing yet). */
  received = 0;
  /** Requests written (or being written) whose responses are not read yet. */
  outstanding = 0;
  /** Only GETs are outstanding: another GET may be pipelined behind them. */
  getsOnly = true;
  /** Takes no new request and is not kept once its outstanding ones are done. */
  closing = false;
  /** The socket is closed: a request whose turn comes now gets no answer on it. */
  closed = false;
  /**
   * Wraps a connected socket.
   * @param conn the connected (TLS or plain TCP) socket
   */
  constructor(conn: ByteConn) {
    this.#conn = conn;
  }
  /** Writes `bytes` after the writes queued before (a request is never interleaved). */
  write(bytes: Uint8Array): Promise<void> {
    const done = this.#writing.then(async () => {
      for (let off = 0; off < bytes.length;) off += await this.#conn.write(bytes.subarray(off));
    });
    this.#writing = done.catch(() => {});
    return done;
  }
  /**
   * Queues one request (synchronously, in the order its bytes are written).
   * @returns `turn`, settled when the responses before it are read, and `done`, to call once
   *   its own response is read or abandoned
   */
  enqueue(method: string): { turn: Promise<void>; done: () => void } {
    const turn = this.#tail;
    let done!: () => void;
    this.#tail = new Promise<void>((r) => done = r);
    this.outstanding++;
    if (method !== "GET") this.getsOnly = false;
    return { turn, done };
  }
  /** Starts reading a response: bytes already buffered (read with the previous one) count. */
  startResponse(): void {
    this.received = this.#buf.length;
  }
  /**
   * Reads more bytes into the buffer; false at end of stream. The buffer is a view whose
   * backing store grows by doubling: a 2.5 MB list page read 16 KiB at a time used to copy
   * the whole buffer at every read (≈ 200 MB of short-lived ArrayBuffers per page).
   */
  async #fill(): Promise<boolean> {
    const n = await this.#conn.read(this.#scratch);
    if (n === null) return false;
    this.received += n;
    const buf = this.#buf;
    const end = buf.byteOffset + buf.length;
    if (end + n <= buf.buffer.byteLength) { // room after the unread bytes: append in place
      new Uint8Array(buf.buffer, end, n).set(this.#scratch.subarray(0, n));
      this.#buf = new Uint8Array(buf.buffer, buf.byteOffset, buf.length + n);
    } else {
      const next = new Uint8Array(Math.max(this.#scratch.length, 2 * (buf.length + n)));
      next.set(buf);
      next.set(this.#scratch.subarray(0, n), buf.length);
      this.#buf = next.subarray(0, buf.length + n);
    }
    return true;
  }

  /** Drops the consumed bytes (`n` from the start); an emptied buffer frees its store. */
  #consume(n: number): void {
    this.#buf = n === this.#buf.length ? new Uint8Array(0) : this.#buf.subarray(n);
  }
  /** Bytes up to and excluding `sep` (consumed with it); null at end of stream. */
  async readUntil(sep: Uint8Array, max: number): Promise<Uint8Array | null> {
    let from = 0;
    for (;;) {
      const at = indexOf(this.#buf, sep, from);
      if (at >= 0) {
        const out = this.#buf.slice(0, at);
        this.#consume(at + sep.length);
        return out;
      }
      if (this.#buf.length > max) {
        throw new Error(`response header or chunk line over ${max} bytes`);
      }
      from = Math.max(0, this.#buf.length - sep.length + 1);
      if (!await this.#fill()) return null;
    }
  }
  /** Exactly `n` bytes; null when the stream ends first. */
  async readExact(n: number): Promise<Uint8Array | null> {
    while (this.#buf.length < n) if (!await this.#fill()) return null;
    const out = this.#buf.slice(0, n);
    this.#consume(n);
    return out;
  }
  /** Everything until the peer closes, at most `max` bytes. */
  async readToEnd(max: number): Promise<Uint8Array> {
    while (await this.#fill()) if (this.#buf.length > max) throw tooLarge();
    const out = this.#buf;
    this.#buf = new Uint8Array(0);
    return out;
  }
  /** Closes the socket (idempotent); reads in progress fail. */
  close(): void {
    this.closing = this.closed = true;
    try {
      this.#conn.close();
    } catch { /* already closed */ }
  }
}

function tooLarge(): Error {
  return new ResponseTooLargeError(MAX_RESPONSE_BYTES);
}

function indexOf(hay: Uint8Array, needle: Uint8Array, from: number): number {
  outer: for (let i = from; i <= hay.length - needle.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/**
 * The bytes of one request (RFC 9112 §3: request line, `host`, the request's headers,
 * `content-length` with a body).
 * @throws Error when a header name or value holds CR or LF (header injection)
 */
export function encodeRequest(req: TransportRequest): Uint8Array {
  const target = new URL(req.url);
  const body = req.body === undefined ? undefined : encoder.encode(req.body);
  let head = `${req.method} ${target.pathname}${target.search} HTTP/1.1\r\n` +
    `host: ${target.host}\r\n`;
  for (const [k, v] of Object.entries(req.headers)) {
    if (/[\r\n]/.test(k + v)) throw new Error(`invalid header ${k}`);
    head += `${k}: ${v}\r\n`;
  }
  if (body) head += `content-length: ${body.length}\r\n`;
  head += "\r\n";
  const headBytes = encoder.encode(head);
  if (!body) return headBytes;
  const all = new Uint8Array(headBytes.length + body.length);
  all.set(headBytes);
  all.set(body, headBytes.length);
  return all;
}

/** Reads one response (status line, headers, framed body). */
export async function readResponse(
  conn: Connection,
  method: string,
): Promise<{ status: number; headers: ResponseHeaders; body: string; keepAlive: boolean }> {
  let status = 0;
  let version = "";
  let headers = new ResponseHeaders();
  // Skip 1xx interim responses.
  for (;;) {
    const head = await conn.readUntil(CRLF2, 64 * 1024);
    if (head === null) throw new ConnectionClosedError(conn.received === 0);
    const lines = decoder.decode(head).split("\r\n");
    const m = /^HTTP\/(1\.[01]) (\d{3})(?: .*)?$/.exec(lines[0]);
    if (!m) throw new Error(`malformed HTTP status line: ${lines[0].slice(0, 80)}`);
    version = m[1];
    status = Number(m[2]);
    headers = new ResponseHeaders();
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      if (colon <= 0) throw new Error(`malformed HTTP header line: ${line.slice(0, 80)}`);
      headers.add(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
    }
    if (status >= 200 || status === 101) break;
  }
  const connection = (headers.get("connection") ?? "").toLowerCase();
  let keepAlive = version === "1.1"
    ? !connection.includes("close")
    : connection.includes("keep-alive");
  let bytes: Uint8Array;
  const te = (headers.get("transfer-encoding") ?? "").toLowerCase();
  const length = headers.get("content-length");
  const bodiless = method === "HEAD" || status === 204 || status === 304;
  // No request may follow on this connection once its head says so (RFC 9112 §9.6: `close`;
  // §6.3: a body read to the close): none is pipelined behind while the body is read.
  if (!keepAlive || (!bodiless && !te.includes("chunked") && length === null)) {
    conn.closing = true;
  }
  if (bodiless) {
    bytes = new Uint8Array(0);
  } else if (te.includes("chunked")) {
    bytes = await readChunked(conn);
  } else if (length !== null) {
    const n = Number(length);
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`invalid content-length ${length}`);
    if (n > MAX_RESPONSE_BYTES) throw tooLarge();
    const got = await conn.readExact(n);
    if (got === null) throw new ConnectionClosedError(false);
    bytes = got;
  } else {
    bytes = await conn.readToEnd(MAX_RESPONSE_BYTES);
    keepAlive = false;
  }
  return { status, headers, body: decoder.decode(bytes), keepAlive };
}

/** A `Transfer-Encoding: chunked` body (RFC 9112 §7.1); trailers are read and dropped. */
async function readChunked(conn: Connection): Promise<Uint8Array> {
  const CRLF = CRLF2.subarray(0, 2);
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const line = await conn.readUntil(CRLF, 4096);
    if (line === null) throw new ConnectionClosedError(false);
    const size = parseInt(decoder.decode(line).split(";")[0].trim(), 16);
    if (!Number.isSafeInteger(size) || size < 0) throw new Error("malformed chunk size");
    if (size === 0) {
      for (;;) { // trailers until an empty line
        const t = await conn.readUntil(CRLF, 64 * 1024);
        if (t === null) throw new ConnectionClosedError(false);
        if (t.length === 0) break;
      }
      break;
    }
    total += size;
    if (total > MAX_RESPONSE_BYTES) throw tooLarge();
    const data = await conn.readExact(size + 2);
    if (data === null) throw new ConnectionClosedError(false);
    parts.push(data.subarray(0, size));
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
