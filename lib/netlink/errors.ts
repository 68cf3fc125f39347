/**
 * Typed errors of the netlink layer. Callers map them to CNI codes at their boundary
 * (a missing netns → CNI code 8 "failed to access network namespace"; everything else
 * here → CNI code 999 unless the caller knows better).
 *
 * @module
 */

const ERRNO_NAMES: Record<number, string> = {
  1: "EPERM",
  2: "ENOENT",
  3: "ESRCH",
  4: "EINTR",
  9: "EBADF",
  11: "EAGAIN",
  12: "ENOMEM",
  13: "EACCES",
  16: "EBUSY",
  17: "EEXIST",
  19: "ENODEV",
  22: "EINVAL",
  28: "ENOSPC",
  34: "ERANGE",
  71: "EPROTO",
  90: "EMSGSIZE",
  93: "EPROTONOSUPPORT",
  95: "EOPNOTSUPP",
  97: "EAFNOSUPPORT",
  101: "ENETUNREACH",
  105: "ENOBUFS",
  113: "EHOSTUNREACH",
};

/**
 * The symbolic name of a Linux errno (asm-generic/errno-base.h, asm-generic/errno.h).
 *
 * @param errno positive errno value
 * @returns e.g. `"ENODEV"`, or `"errno 123"` for values not in the table
 * @example errnoName(19) // "ENODEV"
 */
export function errnoName(errno: number): string {
  return ERRNO_NAMES[errno] ?? `errno ${errno}`;
}

/** Options of {@link NetlinkError}. */
export interface NetlinkErrorOptions {
  /** The extended-ack message (`NLMSGERR_ATTR_MSG`, linux/netlink.h), if the kernel sent one. */
  extAckMessage?: string;
  /** Byte offset of the offending attribute in the request (`NLMSGERR_ATTR_OFFS`). */
  extAckOffset?: number;
  /** Underlying cause. */
  cause?: unknown;
}

/**
 * The kernel rejected a request: `NLMSG_ERROR` with a negative `error` (linux/netlink.h
 * `struct nlmsgerr`), or a socket call failed with `errno`.
 */
export class NetlinkError extends Error {
  /** Positive errno, e.g. 17 for `EEXIST`. */
  readonly errno: number;
  /** Operation that failed, e.g. `"RTM_NEWROUTE"` or `"recvfrom"`. */
  readonly op: string;
  /** Extended-ack message (`NLMSGERR_ATTR_MSG`), `undefined` when absent. */
  readonly extAckMessage?: string;
  /** Extended-ack offset (`NLMSGERR_ATTR_OFFS`), `undefined` when absent. */
  readonly extAckOffset?: number;

  /**
   * The error of `op` failing with `errno`.
   *
   * @param op the operation that failed
   * @param errno positive errno
   * @param options extended ack and cause
   */
  constructor(op: string, errno: number, options: NetlinkErrorOptions = {}) {
    const ext = options.extAckMessage ? `: ${options.extAckMessage}` : "";
    super(`${op} failed with ${errnoName(errno)}${ext}`, { cause: options.cause });
    this.name = "NetlinkError";
    this.op = op;
    this.errno = errno;
    this.extAckMessage = options.extAckMessage;
    this.extAckOffset = options.extAckOffset;
  }
}

/** No link with that name or index exists in the socket's namespace (`ENODEV`). */
export class LinkNotFoundError extends NetlinkError {
  /** The name or index asked for. */
  readonly link: string | number;

  /**
   * The error for a link that does not exist.
   *
   * @param link the name or index that was not found
   * @param options extended ack and cause
   */
  constructor(link: string | number, options: NetlinkErrorOptions = {}) {
    super(`RTM_GETLINK ${JSON.stringify(link)}`, 19, options);
    this.name = "LinkNotFoundError";
    this.message = `Link ${JSON.stringify(link)} not found`;
    this.link = link;
  }
}

/** Bytes that are not a valid netlink message (truncated, bad length, bad attribute). */
export class NetlinkDecodeError extends Error {
  /** Byte offset in the decoded buffer where the problem was found. */
  readonly offset: number;

  /**
   * A decoding error at `offset`.
   *
   * @param message what is wrong, sentence case, no period
   * @param offset byte offset of the problem
   */
  constructor(message: string, offset: number) {
    super(`${message} at byte ${offset}`);
    this.name = "NetlinkDecodeError";
    this.offset = offset;
  }
}

/** A reply broke the protocol: wrong port id, or an unexpected message type. */
export class NetlinkProtocolError extends Error {
  /**
   * A protocol error.
   *
   * @param message what is wrong, sentence case, no period
   */
  constructor(message: string) {
    super(message);
    this.name = "NetlinkProtocolError";
  }
}

/** A dump kept coming back with `NLM_F_DUMP_INTR` after every retry (linux/netlink.h). */
export class NetlinkDumpInterruptedError extends Error {
  /** How many attempts were made. */
  readonly attempts: number;

  /**
   * The error of a dump that kept being interrupted.
   *
   * @param op the dump request, e.g. `"RTM_GETLINK"`
   * @param attempts attempts made
   */
  constructor(op: string, attempts: number) {
    super(`${op} dump was interrupted by concurrent changes ${attempts} times`);
    this.name = "NetlinkDumpInterruptedError";
    this.attempts = attempts;
  }
}

/** Opening or entering a network namespace failed (the caller maps this to CNI code 8). */
export class NetnsError extends Error {
  /** The namespace path. */
  readonly path: string;
  /** Positive errno of the failing call. */
  readonly errno: number;

  /**
   * The error of a namespace call (`open`, `setns`) on `path`.
   *
   * @param path netns path
   * @param op failing call, e.g. `"open"`, `"setns"`
   * @param errno positive errno
   */
  constructor(path: string, op: string, errno: number) {
    super(`Cannot ${op} network namespace ${path}: ${errnoName(errno)}`);
    this.name = "NetnsError";
    this.path = path;
    this.errno = errno;
  }
}
