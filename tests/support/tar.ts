/**
 * A reader for the tar archives scripts/image.sh writes (POSIX pax format, as GNU tar
 * `--format=posix` makes them): every entry's header fields, pax records applied, and its
 * data, so a test can check an image's layers entry by entry. Also gunzip and sha256 for
 * the OCI blobs. Source: POSIX.1-2017 `pax` (ustar header layout, extended header records).
 *
 * @module
 */

/** One tar entry (pax extended headers applied; the `x`/`g` headers themselves are not listed). */
export interface TarEntry {
  /** Path as stored, e.g. `./usr/local/bin/manifold` or `./opt/manifold/` (directories end in `/`). */
  name: string;
  /** Type flag: `0` file, `1` hard link, `2` symlink, `3`/`4` device, `5` directory, `6` FIFO. */
  type: string;
  /** Permission bits (octal field), e.g. 0o755. */
  mode: number;
  uid: number;
  gid: number;
  /** Owner and group names (empty with `--numeric-owner`). */
  uname: string;
  gname: string;
  /** Modification time, seconds since the epoch (the pax `mtime` record when present). */
  mtime: number;
  /** Link target of a symlink or hard link. */
  linkname: string;
  /** Contents (empty for anything but regular files). */
  data: Uint8Array;
  /** Pax record keywords this entry carried (to find ones a reproducible archive must not have). */
  paxKeys: string[];
}

const dec = new TextDecoder();

function field(h: Uint8Array, off: number, len: number): string {
  const raw = h.subarray(off, off + len);
  const end = raw.indexOf(0);
  return dec.decode(end < 0 ? raw : raw.subarray(0, end));
}

function octal(h: Uint8Array, off: number, len: number): number {
  const s = field(h, off, len).trim();
  return s === "" ? 0 : parseInt(s, 8);
}

/** Pax records `LEN key=value\n` (LEN counts bytes, itself included), in order. */
function paxRecords(data: Uint8Array): Map<string, string> {
  const out = new Map<string, string>();
  let i = 0;
  while (i < data.length) {
    const sp = data.indexOf(0x20, i);
    const len = parseInt(dec.decode(data.subarray(i, sp)), 10);
    if (!(len > 0) || sp < 0) break;
    const rec = dec.decode(data.subarray(sp + 1, i + len - 1));
    const eq = rec.indexOf("=");
    out.set(rec.slice(0, eq), rec.slice(eq + 1));
    i += len;
  }
  return out;
}

/**
 * Every entry of an uncompressed tar archive, in archive order.
 *
 * @throws Error on a header whose checksum does not match (not a tar, or truncated)
 */
export function readTar(buf: Uint8Array): TarEntry[] {
  const entries: TarEntry[] = [];
  let off = 0;
  let pax = new Map<string, string>();
  while (off + 512 <= buf.length) {
    const h = buf.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
    if (sum !== octal(h, 148, 8)) throw new Error(`tar: bad header checksum at ${off}`);
    const size = octal(h, 124, 12);
    const type = field(h, 156, 1) || "0";
    const data = buf.subarray(off + 512, off + 512 + size);
    off += 512 + Math.ceil(size / 512) * 512;
    if (type === "x") {
      pax = paxRecords(data);
      continue;
    }
    if (type === "g") continue;
    const prefix = field(h, 345, 155);
    const base = field(h, 0, 100);
    entries.push({
      name: pax.get("path") ?? (prefix ? `${prefix}/${base}` : base),
      type,
      mode: octal(h, 100, 8),
      uid: Number(pax.get("uid") ?? octal(h, 108, 8)),
      gid: Number(pax.get("gid") ?? octal(h, 116, 8)),
      uname: pax.get("uname") ?? field(h, 265, 32),
      gname: pax.get("gname") ?? field(h, 297, 32),
      mtime: Number(pax.get("mtime") ?? octal(h, 136, 12)),
      linkname: pax.get("linkpath") ?? field(h, 157, 100),
      data: type === "0" ? data : new Uint8Array(),
      paxKeys: [...pax.keys()],
    });
    pax = new Map();
  }
  return entries;
}

/**
 * Whether `a` sorts before `b` the way `tar --sort=name` writes them: component by component
 * (a directory's entries follow it), each component by byte order.
 */
export function tarNameBefore(a: string, b: string): boolean {
  const ca = a.replace(/\/$/, "").split("/");
  const cb = b.replace(/\/$/, "").split("/");
  for (let i = 0; i < Math.min(ca.length, cb.length); i++) {
    if (ca[i] !== cb[i]) return ca[i] < cb[i];
  }
  return ca.length < cb.length;
}

/** The gunzipped bytes of `data`. */
export async function gunzip(data: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([data as Uint8Array<ArrayBuffer>]).stream()
    .pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** Lower-case hex SHA-256 of `data`. */
export async function sha256Hex(data: Uint8Array): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
