/**
 * The real {@link NetlinkTransport}: a `NETLINK_ROUTE` socket opened through libmnl
 * (`mnl_socket_open2`/`mnl_socket_bind`), or through plain libc `socket`/`bind` when libmnl
 * cannot be loaded — logged once per process. The only module that imports `native/`.
 *
 * A netlink socket belongs to the network namespace it was created in. To reach a pod's
 * namespace the calling thread `setns`es into it, creates the socket, and `setns`es back,
 * synchronously and in `try/finally`; if switching back fails the process exits rather than
 * go on in the wrong namespace.
 *
 * @module
 */

import {
  type Libc,
  type Libmnl,
  LIBMNL_PATH,
  LIBMNL_PATH_ENV,
  O_RDONLY_CLOEXEC,
  openLibc,
  openLibmnl,
  readErrno,
} from "../../native/mod.ts";
import { type Logger, nullLogger } from "../log/mod.ts";
import { HOST_LITTLE_ENDIAN } from "./attributes.ts";
import {
  AF_NETLINK,
  NETLINK_CAP_ACK,
  NETLINK_EXT_ACK,
  NETLINK_ROUTE,
  SOL_NETLINK,
} from "./constants.ts";
import { NetlinkError, NetnsError } from "./errors.ts";
import type { NetlinkTransport } from "./transport.ts";
import { errorText } from "../util/text.ts";

/** `SOCK_RAW` (bits/socket_type.h). */
const SOCK_RAW = 3;
/** `SOCK_CLOEXEC` (bits/socket_type.h). */
const SOCK_CLOEXEC = 0o2000000;
/** `CLONE_NEWNET` (linux/sched.h). */
const CLONE_NEWNET = 0x40000000;
/** `SOL_SOCKET`, `SO_RCVTIMEO` (asm-generic/socket.h, 64-bit `struct timeval`). */
const SOL_SOCKET = 1;
const SO_RCVTIMEO = 20;
/** `MSG_TRUNC` (bits/socket.h): return the real length of a longer datagram. */
const MSG_TRUNC = 0x20;
const EINTR = 4;
const ENOSPC = 28;
/** `sizeof(struct sockaddr_nl)` (linux/netlink.h). */
const SOCKADDR_NL_LEN = 12;

/** Default receive buffer: 64 KiB, above the kernel's 32 KiB dump skb cap (net/netlink/af_netlink.c). */
export const DEFAULT_RECEIVE_BUFFER = 65536;

/** Which library carries the socket calls. */
export type NetlinkBackend = "libmnl" | "libc";

/** Options of {@link openNetlinkSocket}. */
export interface OpenNetlinkSocketOptions {
  /**
   * Network namespace to open the socket in: a path (`/var/run/netns/x`,
   * `/proc/<pid>/ns/net`, `CNI_NETNS`) or a bare name under `/var/run/netns`. Default: the
   * calling thread's namespace.
   */
  netns?: string;
  /**
   * libmnl to load; default `$MANIFOLD_LIBMNL_PATH`, else `libmnl.so.0`. A path that cannot
   * be loaded selects the libc fallback.
   */
  libmnlPath?: string;
  /** Where the one-time fallback warning and fatal namespace errors go. */
  logger?: Logger;
  /** Receive buffer size in bytes (default {@link DEFAULT_RECEIVE_BUFFER}). */
  receiveBufferSize?: number;
  /** `SO_RCVTIMEO` in ms so a missing reply cannot hang the plugin (default 5000; 0 = none). */
  receiveTimeoutMs?: number;
}

/**
 * Resolves a netns name or path to a path.
 *
 * @param netns `"/proc/123/ns/net"`, `"/var/run/netns/x"` or `"x"`
 * @returns the path; a name without `/` maps to `/var/run/netns/<name>`
 * @example resolveNetnsPath("pod1") // "/var/run/netns/pod1"
 */
export function resolveNetnsPath(netns: string): string {
  return netns.includes("/") ? netns : `/var/run/netns/${netns}`;
}

const failedLibmnl = new Set<string>();

function envLibmnlPath(): string | undefined {
  try {
    return Deno.env.get(LIBMNL_PATH_ENV) || undefined;
  } catch {
    return undefined; // no --allow-env: use the default
  }
}

function loadLibmnl(path: string, logger: Logger): Libmnl | undefined {
  if (failedLibmnl.has(path)) return undefined;
  try {
    return openLibmnl(path);
  } catch (e) {
    failedLibmnl.add(path);
    logger.warn("libmnl unavailable, using libc netlink sockets", {
      path,
      error: errorText(e),
    });
    return undefined;
  }
}

function cString(s: string): Uint8Array {
  const b = new TextEncoder().encode(s);
  const out = new Uint8Array(b.length + 1);
  out.set(b);
  return out;
}

function u32Bytes(v: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v, HOST_LITTLE_ENDIAN);
  return b;
}

/** A `NETLINK_ROUTE` socket bound to the namespace it was opened in. */
export class NetlinkSocket implements NetlinkTransport {
  /** `"libmnl"`, or `"libc"` when libmnl could not be loaded. */
  readonly backend: NetlinkBackend;
  readonly portId: number;
  /** The socket's file descriptor. */
  readonly fd: number;
  #libc: Libc;
  #mnl: Libmnl | undefined;
  #nl: Deno.PointerValue;
  #buf: Uint8Array;
  #src = new Uint8Array(SOCKADDR_NL_LEN);
  #srcLen = new Uint8Array(4);
  #kernel: Uint8Array;
  #closed = false;

  /** Use {@link openNetlinkSocket}. */
  constructor(
    init: { libc: Libc; mnl?: Libmnl; nl?: Deno.PointerValue; fd: number; portId: number },
    receiveBufferSize: number,
  ) {
    this.#libc = init.libc;
    this.#mnl = init.mnl;
    this.#nl = init.nl ?? null;
    this.fd = init.fd;
    this.portId = init.portId;
    this.backend = init.mnl ? "libmnl" : "libc";
    this.#buf = new Uint8Array(receiveBufferSize);
    this.#kernel = new Uint8Array(SOCKADDR_NL_LEN);
    new DataView(this.#kernel.buffer).setUint16(0, AF_NETLINK, HOST_LITTLE_ENDIAN);
  }

  /** Whether {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  send(datagram: Uint8Array): void {
    if (this.#closed) throw new NetlinkError("sendto", 9);
    for (;;) {
      const n = this.#mnl
        ? Number(this.#mnl.symbols.mnl_socket_sendto(this.#nl, datagram, BigInt(datagram.length)))
        : Number(
          this.#libc.symbols.sendto(
            this.fd,
            datagram,
            BigInt(datagram.length),
            0,
            this.#kernel,
            SOCKADDR_NL_LEN,
          ),
        );
      if (n >= 0) {
        if (n !== datagram.length) throw new NetlinkError("sendto", 90);
        return;
      }
      const errno = readErrno(this.#libc);
      if (errno !== EINTR) throw new NetlinkError("sendto", errno);
    }
  }

  receive(): Uint8Array {
    if (this.#closed) throw new NetlinkError("recvfrom", 9);
    const buf = this.#buf;
    for (;;) {
      let n: number;
      if (this.#mnl) {
        n = Number(this.#mnl.symbols.mnl_socket_recvfrom(this.#nl, buf, BigInt(buf.length)));
      } else {
        new DataView(this.#srcLen.buffer).setUint32(0, SOCKADDR_NL_LEN, HOST_LITTLE_ENDIAN);
        n = Number(
          this.#libc.symbols.recvfrom(
            this.fd,
            buf,
            BigInt(buf.length),
            MSG_TRUNC,
            this.#src,
            this.#srcLen,
          ),
        );
        if (n > buf.length) throw new NetlinkError("recvfrom", ENOSPC);
        // Only the kernel (nl_pid 0) answers requests; drop anything else.
        if (n >= 0 && new DataView(this.#src.buffer).getUint32(4, HOST_LITTLE_ENDIAN) !== 0) {
          continue;
        }
      }
      if (n >= 0) return buf.subarray(0, n);
      const errno = readErrno(this.#libc);
      if (errno !== EINTR) throw new NetlinkError("recvfrom", errno);
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#mnl) this.#mnl.symbols.mnl_socket_close(this.#nl);
    else this.#libc.symbols.close(this.fd);
  }

  /** Same as `close()` (`using` support). */
  [Symbol.dispose](): void {
    this.close();
  }
}

function setSocketOptions(libc: Libc, fd: number, timeoutMs: number): void {
  // Extended ack (error strings) and capped acks; older kernels lack them, so ignore failures.
  libc.symbols.setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, u32Bytes(1), 4);
  libc.symbols.setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, u32Bytes(1), 4);
  if (timeoutMs > 0) {
    const tv = new Uint8Array(16);
    const v = new DataView(tv.buffer);
    v.setBigInt64(0, BigInt(Math.floor(timeoutMs / 1000)), HOST_LITTLE_ENDIAN);
    v.setBigInt64(8, BigInt((timeoutMs % 1000) * 1000), HOST_LITTLE_ENDIAN);
    libc.symbols.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, tv, 16);
  }
}

function createSocket(
  libc: Libc,
  mnl: Libmnl | undefined,
  options: OpenNetlinkSocketOptions,
): NetlinkSocket {
  const size = options.receiveBufferSize ?? DEFAULT_RECEIVE_BUFFER;
  const timeout = options.receiveTimeoutMs ?? 5000;
  if (mnl) {
    const nl = mnl.symbols.mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (nl === null) throw new NetlinkError("mnl_socket_open2", readErrno(libc));
    if (mnl.symbols.mnl_socket_bind(nl, 0, 0) < 0) {
      const errno = readErrno(libc);
      mnl.symbols.mnl_socket_close(nl);
      throw new NetlinkError("mnl_socket_bind", errno);
    }
    const fd = mnl.symbols.mnl_socket_get_fd(nl);
    setSocketOptions(libc, fd, timeout);
    return new NetlinkSocket(
      { libc, mnl, nl, fd, portId: mnl.symbols.mnl_socket_get_portid(nl) },
      size,
    );
  }
  const fd = libc.symbols.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) throw new NetlinkError("socket", readErrno(libc));
  try {
    const addr = new Uint8Array(SOCKADDR_NL_LEN);
    new DataView(addr.buffer).setUint16(0, AF_NETLINK, HOST_LITTLE_ENDIAN);
    if (libc.symbols.bind(fd, addr, SOCKADDR_NL_LEN) < 0) {
      throw new NetlinkError("bind", readErrno(libc));
    }
    const len = u32Bytes(SOCKADDR_NL_LEN);
    if (libc.symbols.getsockname(fd, addr, len) < 0) {
      throw new NetlinkError("getsockname", readErrno(libc));
    }
    setSocketOptions(libc, fd, timeout);
    const portId = new DataView(addr.buffer).getUint32(4, HOST_LITTLE_ENDIAN);
    return new NetlinkSocket({ libc, fd, portId }, size);
  } catch (e) {
    libc.symbols.close(fd);
    throw e;
  }
}

/**
 * Opens a `NETLINK_ROUTE` socket, in another network namespace if `netns` is given:
 * open the target and the current namespace (`/proc/thread-self/ns/net`), `setns` into the
 * target, create and bind the socket, `setns` back — all synchronous on the calling thread,
 * in `try/finally`. The socket stays bound to the target namespace.
 *
 * Needs `--allow-ffi` (and `--allow-env` to honour `MANIFOLD_LIBMNL_PATH`).
 *
 * @param options namespace, libmnl path, logger, buffer size, receive timeout
 * @returns the socket; close it (or `using` it) when done
 * @throws {NetnsError} when the namespace cannot be opened or entered (CNI code 8 at the caller)
 * @throws {NetlinkError} when the socket cannot be created or bound
 */
export function openNetlinkSocket(options: OpenNetlinkSocketOptions = {}): NetlinkSocket {
  return openSocketIn(options);
}

/**
 * Loads libc and libmnl (dlopen + symbol binding, ≈ 5 ms the first time in a process) without
 * opening a socket, so a later {@link openNetlinkSocket} is fast — e.g. while a delegate runs.
 * Never throws (a library that cannot be loaded is reported by the real open).
 * @param options `libmnlPath` and `logger` as for {@link openNetlinkSocket}.
 */
export function preloadNetlink(
  options: Pick<OpenNetlinkSocketOptions, "libmnlPath" | "logger"> = {},
): void {
  try {
    openLibc();
    loadLibmnl(options.libmnlPath ?? envLibmnlPath() ?? LIBMNL_PATH, options.logger ?? nullLogger);
  } catch { /* reported by openNetlinkSocket */ }
}

function openSocketIn(options: OpenNetlinkSocketOptions): NetlinkSocket {
  const logger = options.logger ?? nullLogger;
  const libc = openLibc();
  const mnl = loadLibmnl(options.libmnlPath ?? envLibmnlPath() ?? LIBMNL_PATH, logger);
  if (options.netns === undefined) return createSocket(libc, mnl, options);
  return withNetns(options.netns, () => createSocket(libc, mnl, options), logger);
}

/**
 * Runs `fn` with the calling thread switched into network namespace `netns`: open the
 * target and the current namespace (`/proc/thread-self/ns/net`), `setns` into the target,
 * call `fn`, `setns` back — all synchronous on the calling thread, in `try/finally`. `fn`
 * must be synchronous (an `await` would run other code in the wrong namespace); what it
 * opens (sockets, libnftables contexts) stays bound to the target namespace. If switching
 * back fails the process exits (code 70) rather than go on in the wrong namespace.
 *
 * Needs `--allow-ffi`.
 *
 * @param netns a path (`/var/run/netns/x`, `/proc/<pid>/ns/net`) or a name under `/var/run/netns`
 * @param fn the synchronous work to do inside the namespace
 * @param logger where the fatal "cannot switch back" error goes (a `Logger`)
 * @returns what `fn` returns
 * @throws {NetnsError} when the namespace cannot be opened or entered (CNI code 8 at the caller);
 *   whatever `fn` throws
 */
export function withNetns<T>(
  netns: string,
  fn: () => T,
  logger: { error(msg: string, fields?: Record<string, unknown>): void } = nullLogger,
): T {
  const libc = openLibc();
  const path = resolveNetnsPath(netns);
  const target = libc.symbols.open(cString(path), O_RDONLY_CLOEXEC);
  if (target < 0) throw new NetnsError(path, "open", readErrno(libc));
  const self = libc.symbols.open(cString("/proc/thread-self/ns/net"), O_RDONLY_CLOEXEC);
  if (self < 0) {
    const errno = readErrno(libc);
    libc.symbols.close(target);
    throw new NetnsError("/proc/thread-self/ns/net", "open", errno);
  }
  try {
    if (libc.symbols.setns(target, CLONE_NEWNET) !== 0) {
      throw new NetnsError(path, "enter", readErrno(libc));
    }
    try {
      return fn();
    } finally {
      if (libc.symbols.setns(self, CLONE_NEWNET) !== 0) {
        const errno = readErrno(libc);
        logger.error("Cannot switch back to the original network namespace, exiting", {
          netns: path,
          errno,
        });
        Deno.exit(70);
      }
    }
  } finally {
    libc.symbols.close(target);
    libc.symbols.close(self);
  }
}
