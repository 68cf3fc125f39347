/**
 * A unix stream socket listener whose connections know their peer (`SO_PEERCRED`, `man 7
 * unix`): the pid, uid and gid of the process that connected, as the kernel recorded them at
 * `connect(2)`. Deno 2.9's `Deno.listen({transport: "unix"})` gives connections without a
 * descriptor to ask, so this one is built on libc (native/unix_socket.ts).
 *
 * Non-blocking sockets: `accept4`, `read` and `write` run on the main thread (where their
 * `errno` is read) and only waiting is done on a thread of Deno's blocking pool (`poll`), so a
 * request whose bytes are already there costs no thread hop. The listener waits on its socket
 * and an `eventfd` that {@link UnixListener.close} signals.
 *
 * @module
 */

import { errnoAt } from "../../native/libc.ts";
import { SOCK, UNIX_SOCKET_LIBC_PATH, UNIX_SOCKET_SYMBOLS } from "../../native/unix_socket.ts";

type Lib = Deno.DynamicLibrary<typeof UNIX_SOCKET_SYMBOLS>;
let lib: Lib | undefined;

function libc(): Lib {
  lib ??= Deno.dlopen(UNIX_SOCKET_LIBC_PATH, UNIX_SOCKET_SYMBOLS);
  return lib;
}

/** A failed libc call: `errno` and the call's name. */
export class SocketError extends Error {
  /** The `errno` value (e.g. 24 EMFILE). */
  readonly errno: number;

  /**
   * @param call the libc function
   * @param errno its `errno`
   */
  constructor(call: string, errno: number) {
    super(`${call} failed: errno ${errno}${errno === SOCK.EMFILE ? " (too many open files)" : ""}`);
    this.errno = errno;
  }
}

/**
 * Whether an error is the process or the system running out of descriptors (EMFILE, ENFILE).
 * @param e what `accept` threw
 * @returns true for errno 24 or 23
 */
export function outOfDescriptors(e: unknown): boolean {
  return e instanceof SocketError && (e.errno === SOCK.EMFILE || e.errno === SOCK.ENFILE);
}

/**
 * A spare descriptor (`/dev/null`), held to be given up when `accept` runs out of them, so a
 * waiting client can still be answered (closed with {@link releaseDescriptor}). Opened and
 * closed through libc, so it is free the moment it is released.
 * @returns the descriptor, or undefined when none is left
 */
export function reserveDescriptor(): number | undefined {
  const fd = libc().symbols.open(
    new TextEncoder().encode("/dev/null\0"),
    SOCK.O_RDONLY | SOCK.O_CLOEXEC,
  );
  return fd >= 0 ? fd : undefined;
}

/**
 * Closes a descriptor of {@link reserveDescriptor}.
 * @param fd the descriptor
 */
export function releaseDescriptor(fd: number): void {
  libc().symbols.close(fd);
}

/** The connecting process, as the kernel recorded it at `connect(2)` (`struct ucred`). */
export interface PeerCredentials {
  /** Its process id. */
  pid: number;
  /** Its effective user id. */
  uid: number;
  /** Its effective group id. */
  gid: number;
}

/** Waits until `fd` is ready for `events` or `timeoutMs` passed (-1: forever). */
async function pollOne(fds: number[], events: number, timeoutMs: number): Promise<number[]> {
  const buf = new Uint8Array(8 * fds.length);
  const view = new DataView(buf.buffer);
  fds.forEach((fd, i) => {
    view.setInt32(i * 8, fd, true);
    view.setInt16(i * 8 + 4, events, true);
  });
  const n = await libc().symbols.poll(buf, BigInt(fds.length), Math.round(timeoutMs));
  if (n <= 0) return [];
  return fds.filter((_, i) => view.getInt16(i * 8 + 6, true) !== 0);
}

/** One accepted connection (the read/write/close shape of `Deno.Conn`). */
export class UnixConnection {
  #fd: number;
  #closed = false;
  /** Bound on each wait for bytes or buffer space, ms (the server's idle timeout). */
  deadline = Infinity;

  /** @param fd the accepted, non-blocking descriptor (owned from now on) */
  constructor(fd: number) {
    this.#fd = fd;
  }

  /**
   * The peer's credentials (`getsockopt(SO_PEERCRED)`).
   * @returns pid, uid, gid
   * @throws {SocketError} when the call fails
   */
  peer(): PeerCredentials {
    const l = libc();
    const buf = new Uint8Array(SOCK.UCRED_SIZE);
    const len = new Uint32Array([SOCK.UCRED_SIZE]);
    if (l.symbols.getsockopt(this.#fd, SOCK.SOL_SOCKET, SOCK.SO_PEERCRED, buf, len) !== 0) {
      throw new SocketError("getsockopt(SO_PEERCRED)", errnoAt(l.symbols));
    }
    const v = new DataView(buf.buffer);
    return { pid: v.getInt32(0, true), uid: v.getUint32(4, true), gid: v.getUint32(8, true) };
  }

  /**
   * Reads what is there (waiting for it until {@link UnixConnection.deadline}).
   * @param buf where to read
   * @returns the bytes read, or null at the end of the stream, a closed connection or the
   *   deadline
   */
  async read(buf: Uint8Array): Promise<number | null> {
    const l = libc();
    for (;;) {
      if (this.#closed) return null;
      const n = Number(l.symbols.read(this.#fd, buf, BigInt(buf.length)));
      if (n > 0) return n;
      if (n === 0) return null;
      const e = errnoAt(l.symbols);
      if (e === SOCK.EINTR) continue;
      if (e !== SOCK.EAGAIN) return null;
      const left = this.deadline - performance.now();
      if (left <= 0) return null;
      const ready = await pollOne([this.#fd], SOCK.POLLIN, Math.min(left, 2 ** 31 - 1));
      if (ready.length === 0 && this.deadline - performance.now() <= 0) return null;
    }
  }

  /**
   * Writes some of `buf` (waiting for buffer space until {@link UnixConnection.deadline}).
   * @param buf the bytes
   * @returns how many were written
   * @throws {SocketError} when the peer is gone or the deadline passed
   */
  async write(buf: Uint8Array): Promise<number> {
    const l = libc();
    for (;;) {
      if (this.#closed) throw new SocketError("write on a closed connection", 9);
      const n = Number(l.symbols.write(this.#fd, buf, BigInt(buf.length)));
      if (n >= 0) return n;
      const e = errnoAt(l.symbols);
      if (e === SOCK.EINTR) continue;
      if (e !== SOCK.EAGAIN) throw new SocketError("write", e);
      const left = this.deadline - performance.now();
      if (left <= 0) throw new SocketError("write (deadline)", SOCK.EAGAIN);
      await pollOne([this.#fd], SOCK.POLLOUT, Math.min(left, 2 ** 31 - 1));
    }
  }

  /**
   * Reads and drops what the peer sends, until it closes or for at most `ms` (0: what has
   * arrived): closing with unread bytes would make the kernel reset the connection, and the
   * peer lose its answer.
   * @param ms bound, ms
   */
  async drain(ms: number): Promise<void> {
    this.deadline = performance.now() + ms;
    const scratch = new Uint8Array(64 * 1024);
    while (await this.read(scratch) !== null) { /* dropped */ }
  }

  /** Closes the descriptor. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    libc().symbols.close(this.#fd);
  }
}

/** A listening socket (see the module doc). */
export class UnixListener {
  #fd: number;
  #wake: number;
  #closed = false;

  private constructor(fd: number, wake: number) {
    this.#fd = fd;
    this.#wake = wake;
  }

  /**
   * Creates, binds and listens on `path` (which must not exist).
   * @param path the socket path, at most 107 bytes
   * @param backlog `listen(2)` backlog
   * @returns the listener
   * @throws {SocketError} from `socket`, `bind` or `listen`; Error for a path too long
   */
  static listen(path: string, backlog = 512): UnixListener {
    const l = libc();
    const name = new TextEncoder().encode(path);
    if (name.length > SOCK.SOCKADDR_UN_SIZE - 3) {
      throw new Error(`socket path of ${name.length} bytes is too long (at most 107): ${path}`);
    }
    const addr = new Uint8Array(SOCK.SOCKADDR_UN_SIZE);
    new DataView(addr.buffer).setUint16(0, SOCK.AF_UNIX, true);
    addr.set(name, 2);
    const fd = l.symbols.socket(
      SOCK.AF_UNIX,
      SOCK.SOCK_STREAM | SOCK.SOCK_NONBLOCK | SOCK.SOCK_CLOEXEC,
      0,
    );
    if (fd < 0) throw new SocketError("socket", errnoAt(l.symbols));
    if (l.symbols.bind(fd, addr, 2 + name.length + 1) !== 0) {
      const e = errnoAt(l.symbols);
      l.symbols.close(fd);
      throw new SocketError(`bind ${path}`, e);
    }
    if (l.symbols.listen(fd, backlog) !== 0) {
      const e = errnoAt(l.symbols);
      l.symbols.close(fd);
      throw new SocketError("listen", e);
    }
    const wake = l.symbols.eventfd(0, SOCK.EFD_NONBLOCK | SOCK.EFD_CLOEXEC);
    if (wake < 0) {
      const e = errnoAt(l.symbols);
      l.symbols.close(fd);
      throw new SocketError("eventfd", e);
    }
    return new UnixListener(fd, wake);
  }

  /**
   * The next connection.
   * @returns the connection
   * @throws {SocketError} when `accept4` fails (e.g. errno 24 EMFILE); Error "closed" after
   *   {@link UnixListener.close}
   */
  async accept(): Promise<UnixConnection> {
    const l = libc();
    for (;;) {
      if (this.#closed) throw new Error("listener closed");
      const fd = l.symbols.accept4(this.#fd, null, null, SOCK.SOCK_NONBLOCK | SOCK.SOCK_CLOEXEC);
      if (fd >= 0) return new UnixConnection(fd);
      const e = errnoAt(l.symbols);
      if (e === SOCK.EINTR || e === SOCK.ECONNABORTED) continue;
      if (e !== SOCK.EAGAIN) throw new SocketError("accept4", e);
      await pollOne([this.#fd, this.#wake], SOCK.POLLIN, -1);
    }
  }

  /**
   * A connection already waiting, without waiting for one.
   * @returns the connection, or undefined when none is waiting
   * @throws {SocketError} when `accept4` fails otherwise (e.g. errno 24 EMFILE)
   */
  tryAccept(): UnixConnection | undefined {
    const l = libc();
    for (;;) {
      if (this.#closed) return undefined;
      const fd = l.symbols.accept4(this.#fd, null, null, SOCK.SOCK_NONBLOCK | SOCK.SOCK_CLOEXEC);
      if (fd >= 0) return new UnixConnection(fd);
      const e = errnoAt(l.symbols);
      if (e === SOCK.EINTR || e === SOCK.ECONNABORTED) continue;
      if (e === SOCK.EAGAIN) return undefined;
      throw new SocketError("accept4", e);
    }
  }

  /** Stops accepting: a pending {@link UnixListener.accept} rejects. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const l = libc();
    l.symbols.write(this.#wake, new BigUint64Array([1n]), 8n); // wakes the poll
    l.symbols.shutdown(this.#fd, SOCK.SHUT_RDWR);
    l.symbols.close(this.#fd);
    // The eventfd is closed once the waiting poll has returned (it may still watch it).
    const wake = this.#wake;
    setTimeout(() => l.symbols.close(wake), 100);
  }
}
