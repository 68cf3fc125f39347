/**
 * The iproute2-like API over a {@link NetlinkTransport}, in the manner of
 * vishvananda/netlink's `Handle`: {@link NetlinkHandle.linkList}, `linkByName`, `addrList`,
 * `routeList`, `routeReplace`, `routeDel`. Every reply is checked for sequence number and
 * port id; kernel errors become {@link NetlinkError} (with the extended-ack message) or
 * {@link LinkNotFoundError}; dumps flagged `NLM_F_DUMP_INTR` are retried.
 *
 * @module
 */

import type { NetlinkWriter } from "./attributes.ts";
import { type Address, decodeAddress, writeIfAddrMsg } from "./address.ts";
import {
  AF_INET,
  AF_INET6,
  AF_UNSPEC,
  IFLA_EXT_MASK,
  IFLA_IFNAME,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_DUMP_INTR,
  NLM_F_REPLACE,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLMSG_NOOP,
  NLMSG_OVERRUN,
  RTEXT_FILTER_SKIP_STATS,
  RTM_DELROUTE,
  RTM_GETADDR,
  RTM_GETLINK,
  RTM_GETROUTE,
  RTM_NEWADDR,
  RTM_NEWLINK,
  RTM_NEWROUTE,
} from "./constants.ts";
import {
  LinkNotFoundError,
  NetlinkDumpInterruptedError,
  NetlinkError,
  NetlinkProtocolError,
} from "./errors.ts";
import { decodeLink, type Link, writeIfInfoMsg } from "./link.ts";
import {
  decodeDone,
  decodeError,
  encodeMessage,
  type NetlinkMessage,
  parseMessages,
  writeRtgenmsg,
} from "./message.ts";
import { decodeRoute, type Route, writeRoute } from "./route.ts";
import type { NetlinkTransport } from "./transport.ts";
import { routeFromSpec, type RouteSpec } from "./route_spec.ts";

export { routeFromSpec, type RouteSpec } from "./route_spec.ts";

const TYPE_NAMES: Record<number, string> = {
  16: "RTM_NEWLINK",
  18: "RTM_GETLINK",
  20: "RTM_NEWADDR",
  22: "RTM_GETADDR",
  24: "RTM_NEWROUTE",
  25: "RTM_DELROUTE",
  26: "RTM_GETROUTE",
};

/** Options of {@link NetlinkHandle}. */
export interface NetlinkHandleOptions {
  /** Attempts for a dump that keeps coming back with `NLM_F_DUMP_INTR` (default 5). */
  dumpAttempts?: number;
}

/** Filter of {@link NetlinkHandle.addrList}. */
export interface AddrListOptions {
  /** Only this family (`AF_INET`/`AF_INET6`); default both. */
  family?: number;
  /** Only addresses of this ifindex. */
  ifindex?: number;
}

/** Filter of {@link NetlinkHandle.routeList}. */
export interface RouteListOptions {
  /** Only this family (`AF_INET`/`AF_INET6`); default both. */
  family?: number;
  /** Only this table (e.g. 254 main); default every table. */
  table?: number;
  /** Only routes through this ifindex (`RTA_OIF` or a next hop's). */
  oif?: number;
}

/**
 * An rtnetlink session over one transport: one sequence counter, one receive buffer (the
 * transport's), synchronous requests. Not safe for interleaved use from several callers.
 */
export class NetlinkHandle implements Disposable {
  readonly #t: NetlinkTransport;
  readonly #attempts: number;
  #seq: number;

  /**
   * A handle over `transport` (it owns and closes it).
   *
   * @param transport a socket from `openNetlinkSocket`, or a `FakeTransport`
   * @param options dump retry count
   */
  constructor(transport: NetlinkTransport, options: NetlinkHandleOptions = {}) {
    this.#t = transport;
    this.#attempts = Math.max(1, options.dumpAttempts ?? 5);
    this.#seq = (Date.now() & 0x7fffffff) >>> 0;
  }

  /** The underlying transport. */
  get transport(): NetlinkTransport {
    return this.#t;
  }

  /**
   * Sends one request and reads until its `NLMSG_DONE` (dump) or `NLMSG_ERROR` (ACK).
   * Messages with an older sequence number are skipped; a wrong port id is a protocol error.
   *
   * @returns whether any message carried `NLM_F_DUMP_INTR`
   */
  #exchange(
    type: number,
    flags: number,
    body: (w: NetlinkWriter) => void,
    onMessage: (m: NetlinkMessage) => void,
    onError?: (errno: number, ext: { extAckMessage?: string; extAckOffset?: number }) => never,
  ): boolean {
    const seq = this.#seq = (this.#seq + 1) >>> 0;
    const op = TYPE_NAMES[type] ?? `netlink type ${type}`;
    this.#t.send(encodeMessage({ type, flags, seq, pid: 0 }, body));
    const dump = (flags & NLM_F_DUMP) === NLM_F_DUMP;
    let interrupted = false;
    for (;;) {
      const datagram = this.#t.receive();
      for (const m of parseMessages(datagram)) {
        const h = m.header;
        if (h.seq !== seq) continue; // a late reply to an abandoned request
        if (h.pid !== this.#t.portId) {
          throw new NetlinkProtocolError(
            `Reply to ${op} has port id ${h.pid}, expected ${this.#t.portId}`,
          );
        }
        if (h.flags & NLM_F_DUMP_INTR) interrupted = true;
        switch (h.type) {
          case NLMSG_NOOP:
            continue;
          case NLMSG_OVERRUN:
            throw new NetlinkProtocolError(`Reply to ${op} overran`);
          case NLMSG_DONE: {
            const done = decodeDone(m);
            if (done.error < 0) {
              if (onError) onError(-done.error, done);
              throw new NetlinkError(op, -done.error, done);
            }
            return interrupted;
          }
          case NLMSG_ERROR: {
            const e = decodeError(m);
            if (e.error === 0) return interrupted;
            if (onError) onError(-e.error, e);
            throw new NetlinkError(op, -e.error, e);
          }
          default:
            onMessage(m);
            if (!dump && !(flags & NLM_F_ACK)) return interrupted;
        }
      }
    }
  }

  #dump<T>(
    type: number,
    body: (w: NetlinkWriter) => void,
    replyType: number,
    decode: (m: NetlinkMessage) => T | undefined,
  ): T[] {
    for (let attempt = 1;; attempt++) {
      const out: T[] = [];
      const interrupted = this.#exchange(type, NLM_F_REQUEST | NLM_F_DUMP, body, (m) => {
        if (m.header.type !== replyType) return;
        const v = decode(m);
        if (v !== undefined) out.push(v);
      });
      if (!interrupted) return out;
      if (attempt >= this.#attempts) {
        throw new NetlinkDumpInterruptedError(TYPE_NAMES[type] ?? String(type), attempt);
      }
    }
  }

  /**
   * Lists every link in the namespace (`RTM_GETLINK` dump, statistics skipped), like
   * `ip link show`.
   *
   * @returns the links in kernel order (by ifindex)
   * @throws {NetlinkError} kernel or socket error
   * @throws {NetlinkDumpInterruptedError} the dump kept being interrupted
   * @throws {NetlinkDecodeError} malformed reply
   */
  linkList(): Link[] {
    return this.#dump(
      RTM_GETLINK,
      (w) => {
        writeIfInfoMsg(w, { family: AF_UNSPEC });
        w.attrU32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
      },
      RTM_NEWLINK,
      decodeLink,
    );
  }

  /**
   * Looks a link up by name (`RTM_GETLINK` with `IFLA_IFNAME`), like `ip link show dev NAME`.
   *
   * @param name interface name
   * @returns the link
   * @throws {LinkNotFoundError} no such link (`ENODEV`)
   * @throws {NetlinkError} other kernel or socket error
   */
  linkByName(name: string): Link {
    let link: Link | undefined;
    this.#exchange(
      RTM_GETLINK,
      NLM_F_REQUEST | NLM_F_ACK,
      (w) => {
        writeIfInfoMsg(w, { family: AF_UNSPEC });
        w.attrU32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
        w.attrString(IFLA_IFNAME, name);
      },
      (m) => {
        if (m.header.type === RTM_NEWLINK) link = decodeLink(m);
      },
      (errno, ext) => {
        if (errno === 19) throw new LinkNotFoundError(name, ext);
        throw new NetlinkError("RTM_GETLINK", errno, ext);
      },
    );
    if (!link) throw new LinkNotFoundError(name);
    return link;
  }

  /**
   * Looks a link up by ifindex, like `ip link show` filtered by index.
   *
   * @param index ifindex
   * @returns the link
   * @throws {LinkNotFoundError} no such link (`ENODEV`)
   * @throws {NetlinkError} other kernel or socket error
   */
  linkByIndex(index: number): Link {
    let link: Link | undefined;
    this.#exchange(
      RTM_GETLINK,
      NLM_F_REQUEST | NLM_F_ACK,
      (w) => {
        writeIfInfoMsg(w, { family: AF_UNSPEC, index });
        w.attrU32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
      },
      (m) => {
        if (m.header.type === RTM_NEWLINK) link = decodeLink(m);
      },
      (errno, ext) => {
        if (errno === 19) throw new LinkNotFoundError(index, ext);
        throw new NetlinkError("RTM_GETLINK", errno, ext);
      },
    );
    if (!link) throw new LinkNotFoundError(index);
    return link;
  }

  /**
   * Lists addresses (`RTM_GETADDR` dump), like `ip addr show`.
   *
   * @param options family and ifindex filter
   * @returns the addresses in kernel order
   * @throws {NetlinkError} kernel or socket error
   * @throws {NetlinkDumpInterruptedError} the dump kept being interrupted
   */
  addrList(options: AddrListOptions = {}): Address[] {
    const { family, ifindex } = options;
    return this.#dump(
      RTM_GETADDR,
      (w) => writeIfAddrMsg(w, { family: family ?? AF_UNSPEC }),
      RTM_NEWADDR,
      (m) => {
        const a = decodeAddress(m);
        if (family !== undefined && a.family !== family) return undefined;
        if (ifindex !== undefined && a.ifindex !== ifindex) return undefined;
        return a;
      },
    );
  }

  /**
   * Lists IPv4 and IPv6 routes (`RTM_GETROUTE` dump), like `ip route show table all`.
   *
   * @param options family, table and oif filter
   * @returns the routes in kernel order
   * @throws {NetlinkError} kernel or socket error
   * @throws {NetlinkDumpInterruptedError} the dump kept being interrupted
   */
  routeList(options: RouteListOptions = {}): Route[] {
    const { family, table, oif } = options;
    return this.#dump(
      RTM_GETROUTE,
      (w) => writeRtgenmsg(w, family ?? AF_UNSPEC),
      RTM_NEWROUTE,
      (m) => {
        const f = m.payload[0];
        if (f !== AF_INET && f !== AF_INET6) return undefined; // e.g. RTNL_FAMILY_IPMR
        if (family !== undefined && f !== family) return undefined;
        const r = decodeRoute(m);
        if (table !== undefined && r.table !== table) return undefined;
        if (
          oif !== undefined && r.oif !== oif &&
          !(r.nexthops?.some((h) => h.oif === oif))
        ) return undefined;
        return r;
      },
    );
  }

  /**
   * Adds or replaces a route (`RTM_NEWROUTE`, `NLM_F_CREATE | NLM_F_REPLACE`), like
   * `ip route replace`.
   *
   * @param route the route ({@link RouteSpec} defaults apply)
   * @throws {NetlinkError} kernel error, e.g. `ENETUNREACH` "Nexthop has invalid gateway"
   * @throws {TypeError} malformed addresses
   */
  routeReplace(route: RouteSpec | Route): void {
    const r = "family" in route ? route : routeFromSpec(route);
    this.#exchange(
      RTM_NEWROUTE,
      NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
      (w) => writeRoute(w, r),
      () => {},
    );
  }

  /**
   * Deletes a route (`RTM_DELROUTE`), like `ip route del`. Pass a {@link Route} from
   * {@link routeList} to delete exactly that route.
   *
   * @param route the route to delete
   * @throws {NetlinkError} kernel error, e.g. `ESRCH` when no such route exists
   */
  routeDel(route: RouteSpec | Route): void {
    const r = "family" in route ? route : routeFromSpec(route);
    this.#exchange(RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK, (w) => writeRoute(w, r), () => {});
  }

  /** Closes the transport; calling it again does nothing. */
  close(): void {
    this.#t.close();
  }

  /** Closes the transport (`using` support); same as `close()`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
