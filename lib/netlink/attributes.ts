/**
 * Netlink attributes (`struct nlattr`, linux/netlink.h): a growable writer for messages and
 * nested attributes, and a decoder with a sticky error in the manner of
 * mdlayher/netlink's `AttributeDecoder`. Integers are host byte order unless the attribute
 * carries `NLA_F_NET_BYTEORDER`; every attribute starts on a 4-byte boundary.
 *
 * @module
 */

import {
  NL_ALIGNTO,
  NLA_F_NESTED,
  NLA_F_NET_BYTEORDER,
  NLA_HDRLEN,
  NLA_TYPE_MASK,
} from "./constants.ts";
import { NetlinkDecodeError } from "./errors.ts";

/** True on little-endian hosts; netlink integers use host order. */
export const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Rounds a length up to the netlink alignment (`NLMSG_ALIGN`/`NLA_ALIGN`, linux/netlink.h).
 *
 * @param n length in bytes
 * @returns `n` rounded up to a multiple of 4
 * @example align(5) // 8
 */
export function align(n: number): number {
  return Math.ceil(n / NL_ALIGNTO) * NL_ALIGNTO;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * Builds netlink bytes: fixed headers, attributes and nested attributes, zero padding to
 * 4-byte boundaries. Host byte order.
 */
export class NetlinkWriter {
  #buf: Uint8Array;
  #view: DataView;
  #len = 0;

  /**
   * An empty writer.
   *
   * @param capacity initial capacity in bytes (grows as needed)
   */
  constructor(capacity = 256) {
    this.#buf = new Uint8Array(capacity);
    this.#view = new DataView(this.#buf.buffer);
  }

  /** Bytes written so far. */
  get length(): number {
    return this.#len;
  }

  #reserve(n: number): number {
    const at = this.#len;
    if (at + n > this.#buf.length) {
      const next = new Uint8Array(Math.max(this.#buf.length * 2, at + n));
      next.set(this.#buf.subarray(0, at));
      this.#buf = next;
      this.#view = new DataView(next.buffer);
    }
    this.#len += n;
    return at;
  }

  /** Appends a u8. */
  u8(v: number): this {
    const at = this.#reserve(1);
    this.#view.setUint8(at, v);
    return this;
  }

  /** Appends a u16, host order. */
  u16(v: number): this {
    const at = this.#reserve(2);
    this.#view.setUint16(at, v, HOST_LITTLE_ENDIAN);
    return this;
  }

  /** Appends a u32, host order. */
  u32(v: number): this {
    const at = this.#reserve(4);
    this.#view.setUint32(at, v >>> 0, HOST_LITTLE_ENDIAN);
    return this;
  }

  /** Appends an i32, host order. */
  i32(v: number): this {
    const at = this.#reserve(4);
    this.#view.setInt32(at, v, HOST_LITTLE_ENDIAN);
    return this;
  }

  /** Appends raw bytes. */
  bytes(b: Uint8Array): this {
    const at = this.#reserve(b.length);
    this.#buf.set(b, at);
    return this;
  }

  /** Pads with zeros to the next 4-byte boundary. */
  pad(): this {
    const n = align(this.#len) - this.#len;
    if (n) {
      const at = this.#reserve(n);
      this.#buf.fill(0, at, this.#len);
    }
    return this;
  }

  /** Overwrites a u16 at `offset` (used to patch lengths). */
  setU16(offset: number, v: number): void {
    this.#view.setUint16(offset, v, HOST_LITTLE_ENDIAN);
  }

  /** Overwrites a u32 at `offset` (used to patch lengths). */
  setU32(offset: number, v: number): void {
    this.#view.setUint32(offset, v >>> 0, HOST_LITTLE_ENDIAN);
  }

  /**
   * Appends one attribute with `data` as payload, padded.
   *
   * @param type attribute type, may include `NLA_F_*` flags
   * @param data payload bytes
   */
  attr(type: number, data: Uint8Array): this {
    this.u16(NLA_HDRLEN + data.length).u16(type).bytes(data);
    return this.pad();
  }

  /** Appends a u8 attribute. */
  attrU8(type: number, v: number): this {
    return this.u16(NLA_HDRLEN + 1).u16(type).u8(v).pad();
  }

  /** Appends a u32 attribute (host order). */
  attrU32(type: number, v: number): this {
    return this.u16(NLA_HDRLEN + 4).u16(type).u32(v);
  }

  /** Appends a NUL-terminated string attribute (`NLA_NUL_STRING`). */
  attrString(type: number, s: string): this {
    const b = encoder.encode(s);
    this.u16(NLA_HDRLEN + b.length + 1).u16(type).bytes(b).u8(0);
    return this.pad();
  }

  /**
   * Appends a nested attribute (`NLA_F_NESTED` is set) whose children `fill` writes.
   *
   * @param type attribute type without flags
   * @param fill writes the children
   */
  nested(type: number, fill: (w: this) => void): this {
    const at = this.#len;
    this.u16(0).u16(type | NLA_F_NESTED);
    fill(this);
    this.setU16(at, this.#len - at);
    return this.pad();
  }

  /** A copy of the bytes written. */
  finish(): Uint8Array {
    return this.#buf.slice(0, this.#len);
  }
}

/**
 * Walks the attributes of one region. Reading a value of the wrong size or a malformed
 * attribute sets a sticky error: {@link next} returns false from then on and {@link finish}
 * throws it. Views returned by {@link bytes} alias the decoded buffer.
 */
export class AttributeDecoder {
  #data: Uint8Array;
  #view: DataView;
  #base: number;
  #pos = 0;
  #type = 0;
  #flags = 0;
  #start = 0;
  #end = 0;
  #err: NetlinkDecodeError | undefined;

  /**
   * A reader of the attributes in `data`.
   *
   * @param data the attribute region (after the fixed header)
   * @param baseOffset offset of `data` in the whole datagram, for error messages
   */
  constructor(data: Uint8Array, baseOffset = 0) {
    this.#data = data;
    this.#view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    this.#base = baseOffset;
  }

  /** The sticky error, if any. */
  get err(): NetlinkDecodeError | undefined {
    return this.#err;
  }

  /**
   * Advances to the next attribute.
   *
   * @returns false at the end or after an error
   */
  next(): boolean {
    if (this.#err) return false;
    const remaining = this.#data.length - this.#pos;
    if (remaining === 0) return false;
    if (remaining < NLA_HDRLEN) {
      this.#fail("Truncated attribute header", this.#pos);
      return false;
    }
    const len = this.#view.getUint16(this.#pos, HOST_LITTLE_ENDIAN);
    if (len < NLA_HDRLEN || len > remaining) {
      this.#fail(`Attribute length ${len} out of range`, this.#pos);
      return false;
    }
    const t = this.#view.getUint16(this.#pos + 2, HOST_LITTLE_ENDIAN);
    this.#type = t & NLA_TYPE_MASK;
    this.#flags = t & ~NLA_TYPE_MASK;
    this.#start = this.#pos + NLA_HDRLEN;
    this.#end = this.#pos + len;
    this.#pos = Math.min(this.#data.length, this.#pos + align(len));
    return true;
  }

  /** Type of the current attribute, without `NLA_F_*` flags. */
  get type(): number {
    return this.#type;
  }

  /** Whether the current attribute carries `NLA_F_NESTED`. */
  get isNested(): boolean {
    return (this.#flags & NLA_F_NESTED) !== 0;
  }

  /** Whether the current attribute carries `NLA_F_NET_BYTEORDER`. */
  get isNetByteOrder(): boolean {
    return (this.#flags & NLA_F_NET_BYTEORDER) !== 0;
  }

  /** Offset of the current attribute's payload in the whole buffer (for error positions). */
  get offset(): number {
    return this.#base + this.#start;
  }

  /** Payload length of the current attribute in bytes. */
  get length(): number {
    return this.#end - this.#start;
  }

  #fail(message: string, at: number): void {
    this.#err ??= new NetlinkDecodeError(message, this.#base + at);
  }

  #need(n: number, what: string): boolean {
    if (this.#end - this.#start === n) return true;
    this.#fail(
      `Attribute ${this.#type} has ${this.#end - this.#start} bytes, ${what} needs ${n}`,
      this.#start,
    );
    return false;
  }

  /** Payload as a view into the decoded buffer (copy before the buffer is reused). */
  bytes(): Uint8Array {
    return this.#data.subarray(this.#start, this.#end);
  }

  /** Payload as a u8 (sticky error when the size is not 1). */
  u8(): number {
    return this.#need(1, "u8") ? this.#data[this.#start] : 0;
  }

  /** Payload as a u16 (host order, or network order with `NLA_F_NET_BYTEORDER`). */
  u16(): number {
    return this.#need(2, "u16")
      ? this.#view.getUint16(this.#start, this.isNetByteOrder ? false : HOST_LITTLE_ENDIAN)
      : 0;
  }

  /** Payload as a u32 (host order, or network order with `NLA_F_NET_BYTEORDER`). */
  u32(): number {
    return this.#need(4, "u32")
      ? this.#view.getUint32(this.#start, this.isNetByteOrder ? false : HOST_LITTLE_ENDIAN)
      : 0;
  }

  /** Payload as a string, up to the first NUL. */
  string(): string {
    const b = this.bytes();
    const nul = b.indexOf(0);
    return decoder.decode(nul === -1 ? b : b.subarray(0, nul));
  }

  /** A decoder over the current attribute's payload (for nested attributes). */
  nested(): AttributeDecoder {
    return new AttributeDecoder(this.bytes(), this.#base + this.#start);
  }

  /** Adopts the sticky error of a nested decoder. */
  adopt(child: AttributeDecoder): void {
    if (child.err) this.#err ??= child.err;
  }

  /**
   * Ends decoding.
   *
   * @throws {NetlinkDecodeError} the sticky error, if any
   */
  finish(): void {
    if (this.#err) throw this.#err;
  }
}
