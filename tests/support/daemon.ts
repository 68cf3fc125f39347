/**
 * Runs a real `manifold daemon` process (scripts/manifold, the binary's permissions) for
 * tests: writes the plugin config it reads, waits for its socket, collects its stderr.
 *
 * @module
 */

import { MANIFOLD } from "./plugin.ts";
import { until } from "./wait.ts";

/** A running daemon process. */
export interface DaemonProcess {
  /** The socket path. */
  socket: string;
  /** The config as the runtime passes it (with `daemonSocket`). */
  conf: Record<string, unknown>;
  /** The daemon's `--config` file. */
  confPath: string;
  child: Deno.ChildProcess;
  /** Sends a signal. */
  kill(signal: Deno.Signal): void;
  /** Waits for the exit; returns the code and the collected stderr. */
  exited(): Promise<{ code: number; signal: Deno.Signal | null; stderr: string }>;
}

/**
 * Starts `manifold daemon --config <dir>/daemon.conf --socket <dir>/run/manifold.sock`.
 * @param dir a temp dir of the test
 * @param conf the plugin config (without `daemonSocket`; added)
 * @param opts extra flags and environment of the daemon process; `launcher`: a command prefix
 *   (e.g. `["prlimit", "--nofile=64"]`); `socket`: another socket path
 */
export async function startDaemon(
  dir: string,
  conf: Record<string, unknown>,
  opts: {
    flags?: string[];
    env?: Record<string, string>;
    launcher?: string[];
    socket?: string;
  } = {},
): Promise<DaemonProcess> {
  const socket = opts.socket ?? `${dir}/run/manifold.sock`;
  const full = { ...conf, daemonSocket: socket };
  const confPath = `${dir}/daemon.conf`;
  await Deno.writeTextFile(confPath, JSON.stringify(full));
  // A dead daemon's socket may be there already: the new one replaces it (a file bound later;
  // its inode number alone may be reused at once).
  const identity = (s: Deno.FileInfo) => `${s.ino}@${s.mtime?.getTime()}@${s.ctime?.getTime()}`;
  const stale = await Deno.lstat(socket).then(identity, () => undefined);
  const [cmd, ...pre] = [...(opts.launcher ?? []), MANIFOLD];
  const child = new Deno.Command(cmd, {
    args: [...pre, "daemon", "--config", confPath, "--socket", socket, ...(opts.flags ?? [])],
    clearEnv: true,
    // CNI_PATH: the daemon's own (a request's is ignored in daemon mode), as the worlds' calls.
    env: {
      PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      CNI_PATH: "/usr/lib/cni",
      ...opts.env,
    },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const chunks: Uint8Array[] = [];
  const reading = (async () => {
    for await (const c of child.stderr) chunks.push(c);
  })();
  const stderr = () => new TextDecoder().decode(new Uint8Array(chunks.flatMap((c) => [...c])));
  let status: Deno.CommandStatus | undefined;
  child.status.then((s) => status = s);
  try {
    await until(
      async () => {
        if (status) throw new Error(`daemon exited ${status.code}: ${stderr()}`);
        // A dead daemon's socket may be there already: wait for this one's PID in the lock
        // and for the socket it bound (the stale one is replaced after the lock is taken).
        const lock = await Deno.readTextFile(`${socket}.lock`).catch(() => undefined);
        const now = await Deno.lstat(socket).then(identity, () => undefined);
        return now !== undefined && now !== stale &&
          (lock === undefined || lock.split("\n")[0] === String(child.pid));
      },
      "the daemon socket",
      20_000,
    );
  } catch (e) {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    await child.status;
    await reading;
    throw e;
  }
  return {
    socket,
    conf: full,
    confPath,
    child,
    kill: (signal) => {
      try {
        child.kill(signal);
      } catch { /* gone */ }
    },
    async exited() {
      const s = await child.status;
      await reading;
      return { code: s.code, signal: s.signal, stderr: stderr() };
    },
  };
}

/**
 * Sends raw bytes to the socket and returns what the daemon answered (until it closed).
 * @param socket the socket path
 * @param bytes what to send; `halfClose` ends the write side after it
 */
export async function rawExchange(
  socket: string,
  bytes: Uint8Array,
  opts: { halfClose?: boolean } = {},
): Promise<Uint8Array> {
  const conn = await Deno.connect({ transport: "unix", path: socket });
  try {
    for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
    if (opts.halfClose) await conn.closeWrite();
    const out: number[] = [];
    const buf = new Uint8Array(65536);
    for (;;) {
      const n = await conn.read(buf).catch(() => null);
      if (n === null) break;
      out.push(...buf.subarray(0, n));
    }
    return new Uint8Array(out);
  } finally {
    try {
      conn.close();
    } catch { /* closed */ }
  }
}

/** Decodes a framed answer `{code, stdout}`; undefined when there is none. */
export function decodeAnswer(bytes: Uint8Array): { code: number; stdout: string } | undefined {
  if (bytes.length < 4) return undefined;
  const n = new DataView(bytes.buffer, bytes.byteOffset).getUint32(0);
  return JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + n)));
}
