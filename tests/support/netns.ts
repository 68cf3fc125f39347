/**
 * Root-only helpers for integration tests: scratch network namespaces and host links
 * with unique names, `ip -j` cross-checks, and cleanup that also runs on failure.
 *
 * @module
 */

/** Runs a command; returns its exit code, stdout and stderr as text. */
export async function sh(
  cmd: string,
  args: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = new Deno.Command(cmd, {
    args,
    stdin: opts.stdin !== undefined ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
    env: opts.env,
  }).spawn();
  if (opts.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(opts.stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs `ip …`; throws with stderr when it fails. */
export async function ip(...args: string[]): Promise<string> {
  const r = await sh("ip", args);
  if (r.code !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** `ip -j [-n ns] <args>` parsed. */
export async function ipJson<T = Record<string, unknown>[]>(
  netns: string | undefined,
  ...args: string[]
): Promise<T> {
  const out = await ip(...(netns ? ["-n", netns] : []), "-j", ...args);
  return JSON.parse(out.trim() || "[]") as T;
}

/** A short random suffix for names (interface names must stay ≤ 15 bytes). */
export function suffix(len = 5): string {
  return crypto.randomUUID().replaceAll("-", "").slice(0, len);
}

/**
 * A scratch environment: network namespaces and host links created through it are
 * removed by `cleanup()` (call it in `finally`), as are temp dirs.
 */
export class Scratch {
  readonly id = suffix();
  #netns: string[] = [];
  #links: string[] = [];
  #dirs: string[] = [];

  /** Creates a netns named `mft-<tag>-<id>`; returns its name. Path: `/var/run/netns/<name>`. */
  async netns(tag: string): Promise<string> {
    const name = `mft-${tag}-${this.id}`;
    await ip("netns", "add", name);
    this.#netns.push(name);
    await ip("-n", name, "link", "set", "lo", "up");
    return name;
  }

  /** Creates a host bridge (no address; usable as a macvlan master), up. Name ≤ 15 bytes. */
  async bridge(tag: string): Promise<string> {
    const name = `mf${tag}${this.id}`.slice(0, 15);
    await ip("link", "add", name, "type", "bridge");
    this.#links.push(name);
    await ip("link", "set", name, "up");
    return name;
  }

  /** Remembers a host link a delegate will create (e.g. the bridge plugin's bridge) for cleanup. */
  trackLink(name: string): string {
    this.#links.push(name);
    return name;
  }

  /** A temp dir removed on cleanup. */
  async dir(prefix = "mft-"): Promise<string> {
    const d = await Deno.makeTempDir({ prefix });
    this.#dirs.push(d);
    return d;
  }

  /** Removes everything created; never throws. */
  async cleanup(): Promise<void> {
    for (const n of this.#netns.reverse()) await sh("ip", ["netns", "del", n]);
    for (const l of this.#links.reverse()) await sh("ip", ["link", "del", l]);
    for (const d of this.#dirs) await Deno.remove(d, { recursive: true }).catch(() => {});
  }
}

/** Interface names in a netns (from `ip -j link`), `lo` excluded. */
export async function linkNames(netns: string): Promise<string[]> {
  const links = await ipJson<{ ifname: string }[]>(netns, "link", "show");
  return links.map((l) => l.ifname).filter((n) => n !== "lo").sort();
}

let rootNoticeShown = false;

/**
 * True when the process runs as root (integration tests need it). When not, the first call
 * prints one line saying that the tests needing root are skipped (each such test then shows
 * as ignored), so a run without root never passes silently.
 */
export function isRoot(): boolean {
  const root = Deno.uid() === 0;
  if (!root && !rootNoticeShown) {
    rootNoticeShown = true;
    console.log(
      "tests needing root (network namespaces, links, real delegates) are skipped: not root",
    );
  }
  return root;
}

/**
 * Registers a test that needs root (real netns, links, delegates): ignored otherwise, with the
 * op and resource sanitizers off (the processes and sockets it starts outlive single ops).
 *
 * @param name the test's name
 * @param fn the test
 */
export function rootTest(name: string, fn: (t: Deno.TestContext) => Promise<void>): void {
  Deno.test({ name, ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false, fn });
}
