/**
 * Netlink messages: `struct nlmsghdr` (16 bytes, host byte order), splitting a datagram into
 * messages, `NLMSG_ERROR` (`struct nlmsgerr` with extended-ack TLVs), `NLMSG_DONE`, and
 * `struct rtgenmsg` (linux/netlink.h, linux/rtnetlink.h).
 *
 * @module
 */

import { align, AttributeDecoder, HOST_LITTLE_ENDIAN, NetlinkWriter } from "./attributes.ts";
import {
  NLM_F_ACK_TLVS,
  NLM_F_CAPPED,
  NLMSG_HDRLEN,
  NLMSGERR_ATTR_MSG,
  NLMSGERR_ATTR_OFFS,
} from "./constants.ts";
import { NetlinkDecodeError } from "./errors.ts";

/** `struct nlmsghdr` (linux/netlink.h). */
export interface NlMsgHeader {
  /** `nlmsg_len`: header + payload in bytes. */
  length: number;
  /** `nlmsg_type`, e.g. `RTM_NEWLINK`. */
  type: number;
  /** `nlmsg_flags` (`NLM_F_*`). */
  flags: number;
  /** `nlmsg_seq`. */
  seq: number;
  /** `nlmsg_pid`: the port id of the requesting socket in replies. */
  pid: number;
}

/** One message of a datagram. `payload` aliases the datagram (copy before reuse). */
export interface NetlinkMessage {
  /** The header. */
  header: NlMsgHeader;
  /** Bytes after the header, `nlmsg_len - 16` long. */
  payload: Uint8Array;
  /** Offset of the payload in the datagram (for error offsets). */
  offset: number;
}

/** A decoded `struct nlmsgerr` (linux/netlink.h). */
export interface NlMsgErr {
  /** 0 for an ACK, else a negative errno. */
  error: number;
  /** Header of the request this answers. */
  request: NlMsgHeader;
  /** `NLMSGERR_ATTR_MSG`: the kernel's explanation, if sent. */
  extAckMessage?: string;
  /** `NLMSGERR_ATTR_OFFS`: offset of the offending attribute in the request, if sent. */
  extAckOffset?: number;
}

/**
 * Encodes a whole message: header (with `nlmsg_len` filled in) then `body`.
 *
 * @param header type, flags, seq and pid (`length` is computed)
 * @param body writes the fixed header and attributes
 * @returns the message bytes
 * @example encodeMessage({ type: 18, flags: 0x301, seq: 1, pid: 0 }, (w) => w.u8(0).pad()).length // 20
 */
export function encodeMessage(
  header: Omit<NlMsgHeader, "length">,
  body: (w: NetlinkWriter) => void,
): Uint8Array {
  const w = new NetlinkWriter();
  w.u32(0).u16(header.type).u16(header.flags).u32(header.seq).u32(header.pid);
  body(w);
  w.pad();
  w.setU32(0, w.length);
  return w.finish();
}

/**
 * Writes `struct rtgenmsg` (1 byte family + padding, linux/rtnetlink.h).
 *
 * @param w the writer
 * @param family address family, e.g. `AF_UNSPEC`
 */
export function writeRtgenmsg(w: NetlinkWriter, family: number): void {
  w.u8(family).pad();
}

/**
 * Reads a `struct nlmsghdr` at `offset`.
 *
 * @param bytes the buffer
 * @param offset where the header starts
 * @returns the header
 * @throws {NetlinkDecodeError} when fewer than 16 bytes remain
 */
export function decodeHeader(bytes: Uint8Array, offset = 0): NlMsgHeader {
  if (bytes.length - offset < NLMSG_HDRLEN) {
    throw new NetlinkDecodeError("Truncated message header", offset);
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset + offset, NLMSG_HDRLEN);
  const le = HOST_LITTLE_ENDIAN;
  return {
    length: v.getUint32(0, le),
    type: v.getUint16(4, le),
    flags: v.getUint16(6, le),
    seq: v.getUint32(8, le),
    pid: v.getUint32(12, le),
  };
}

/**
 * Splits one datagram into its messages (`NLMSG_OK`/`NLMSG_NEXT`, linux/netlink.h).
 *
 * @param datagram bytes from one `recvfrom`
 * @returns the messages; payloads alias `datagram`
 * @throws {NetlinkDecodeError} on a truncated header or an impossible `nlmsg_len`
 */
export function parseMessages(datagram: Uint8Array): NetlinkMessage[] {
  const out: NetlinkMessage[] = [];
  let pos = 0;
  while (pos < datagram.length) {
    const header = decodeHeader(datagram, pos);
    if (header.length < NLMSG_HDRLEN || header.length > datagram.length - pos) {
      throw new NetlinkDecodeError(`Message length ${header.length} out of range`, pos);
    }
    out.push({
      header,
      payload: datagram.subarray(pos + NLMSG_HDRLEN, pos + header.length),
      offset: pos + NLMSG_HDRLEN,
    });
    pos = Math.min(datagram.length, pos + align(header.length));
  }
  return out;
}

/**
 * Decodes the payload of `NLMSG_ERROR` (also used for the error code of `NLMSG_DONE`):
 * `int error`, the request header (plus its payload unless `NLM_F_CAPPED`), then, with
 * `NLM_F_ACK_TLVS`, the extended-ack attributes (linux/netlink.h `struct nlmsgerr`).
 *
 * @param message an `NLMSG_ERROR` message
 * @returns error code, request header and extended ack
 * @throws {NetlinkDecodeError} when the payload is truncated
 */
export function decodeError(message: NetlinkMessage): NlMsgErr {
  const p = message.payload;
  if (p.length < 4 + NLMSG_HDRLEN) {
    throw new NetlinkDecodeError("Truncated NLMSG_ERROR payload", message.offset);
  }
  const error = new DataView(p.buffer, p.byteOffset, 4).getInt32(0, HOST_LITTLE_ENDIAN);
  const request = decodeHeader(p, 4);
  const out: NlMsgErr = { error, request };
  if (!(message.header.flags & NLM_F_ACK_TLVS)) return out;
  const capped = (message.header.flags & NLM_F_CAPPED) !== 0 || error === 0;
  const skip = 4 + (capped ? NLMSG_HDRLEN : align(request.length));
  if (skip > p.length) {
    throw new NetlinkDecodeError("Truncated NLMSG_ERROR request copy", message.offset + 4);
  }
  const ad = new AttributeDecoder(p.subarray(skip), message.offset + skip);
  while (ad.next()) {
    if (ad.type === NLMSGERR_ATTR_MSG) out.extAckMessage = ad.string();
    else if (ad.type === NLMSGERR_ATTR_OFFS) out.extAckOffset = ad.u32();
  }
  ad.finish();
  return out;
}

/** A decoded `NLMSG_DONE` payload. */
export interface NlMsgDone {
  /** 0, or a negative errno when the dump failed part-way. */
  error: number;
  /** `NLMSGERR_ATTR_MSG` when the kernel explained the failure. */
  extAckMessage?: string;
}

/**
 * Decodes an `NLMSG_DONE` payload: `int error`, then with `NLM_F_ACK_TLVS` the extended-ack
 * attributes directly (no request copy; net/netlink/af_netlink.c `netlink_dump_done`).
 *
 * @param message an `NLMSG_DONE` message
 * @returns error (0 when the payload is empty) and extended-ack message
 * @throws {NetlinkDecodeError} on malformed extended-ack attributes
 */
export function decodeDone(message: NetlinkMessage): NlMsgDone {
  const p = message.payload;
  if (p.length < 4) return { error: 0 };
  const out: NlMsgDone = {
    error: new DataView(p.buffer, p.byteOffset, 4).getInt32(0, HOST_LITTLE_ENDIAN),
  };
  if (!(message.header.flags & NLM_F_ACK_TLVS)) return out;
  const ad = new AttributeDecoder(p.subarray(4), message.offset + 4);
  while (ad.next()) if (ad.type === NLMSGERR_ATTR_MSG) out.extAckMessage = ad.string();
  ad.finish();
  return out;
}
