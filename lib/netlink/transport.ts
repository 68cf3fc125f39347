/**
 * The transport under the netlink API: send one request datagram, receive one reply
 * datagram. {@link openNetlinkSocket} (socket.ts) is the real one; {@link FakeTransport}
 * answers from a function so codec and API tests need no kernel and no permissions.
 *
 * @module
 */

import { NetlinkError } from "./errors.ts";

/** A connected `NETLINK_ROUTE` endpoint. */
export interface NetlinkTransport extends Disposable {
  /** The socket's port id (`nl_pid`); replies must carry it in `nlmsg_pid`. */
  readonly portId: number;
  /**
   * Sends one datagram to the kernel.
   *
   * @throws {NetlinkError} when the send fails
   */
  send(datagram: Uint8Array): void;
  /**
   * Receives one datagram. The returned view aliases the transport's one receive buffer and
   * is valid until the next call.
   *
   * @throws {NetlinkError} when the receive fails or times out (`EAGAIN`)
   */
  receive(): Uint8Array;
  /** Closes the transport; calling it again does nothing. */
  close(): void;
}

/** Options of {@link FakeTransport}. */
export interface FakeTransportOptions {
  /** Port id to report (default 4242). */
  portId?: number;
  /**
   * Answers one request with the datagrams the fake kernel would send.
   *
   * @param request the request bytes
   * @param portId the fake socket's port id
   * @returns reply datagrams, queued in order
   */
  respond: (request: Uint8Array, portId: number) => Uint8Array[];
}

/**
 * A scripted transport for tests: each `send` queues the datagrams `respond` returns; a
 * `receive` on an empty queue throws `NetlinkError` (`EAGAIN`) instead of hanging.
 */
export class FakeTransport implements NetlinkTransport {
  readonly portId: number;
  /** Every request sent, in order (copies). */
  readonly sent: Uint8Array[] = [];
  #queue: Uint8Array[] = [];
  #respond: FakeTransportOptions["respond"];
  #closed = false;

  /**
   * A fake socket answering through `options.respond`.
   *
   * @param options port id and responder
   */
  constructor(options: FakeTransportOptions) {
    this.portId = options.portId ?? 4242;
    this.#respond = options.respond;
  }

  /** Whether {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  send(datagram: Uint8Array): void {
    if (this.#closed) throw new NetlinkError("sendto", 9);
    const copy = datagram.slice();
    this.sent.push(copy);
    this.#queue.push(...this.#respond(copy, this.portId));
  }

  receive(): Uint8Array {
    if (this.#closed) throw new NetlinkError("recvfrom", 9);
    const next = this.#queue.shift();
    if (!next) throw new NetlinkError("recvfrom", 11);
    return next;
  }

  /** Closes the fake; later sends and receives throw. */
  close(): void {
    this.#closed = true;
  }

  /** Same as `close()` (`using` support). */
  [Symbol.dispose](): void {
    this.close();
  }
}
