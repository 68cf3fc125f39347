/**
 * The `daemon` step of `manifold doctor`, run when Manifold's config names a `daemonSocket`
 * (the binary then forwards each request to `manifold daemon`):
 *
 * - daemon socket: present, a socket, mode 0600, owned by root, in a 0700 directory; absent or
 *   refusing connections is a warning ("the plugin falls back in-process"), a failure when the
 *   config says `"daemonFallback": false`;
 * - daemon: answers a CNI VERSION request over the daemon protocol ({@link probeDaemonVersion});
 * - daemon version: the daemon's release (`manifoldVersion` of its VERSION answer, when it
 *   reports one) equals the installed binary's (`<cni-bin-dir>/manifold --version`); else its
 *   CNI versions equal this binary's.
 *
 * @module
 */

import { SUPPORTED_VERSIONS } from "../cni/version.ts";
import { errorText, oneLine } from "../util/text.ts";
import { type DoctorContext, type DoctorStep, statOrUndefined } from "./doctor_checks.ts";

/** What the daemon answered to VERSION. */
export interface DaemonVersionAnswer {
  /** The plugin exit code the daemon reports (0 success). */
  code: number;
  /** The answer's stdout: the CNI VERSION document. */
  stdout: string;
}

/** The largest answer the probe reads, bytes. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/**
 * Sends one CNI VERSION request to the daemon and reads its answer. The daemon protocol
 * (lib/daemon/protocol.ts of the daemon core): one request per connection, each frame a 4-byte
 * big-endian length then its bytes; request = frame `{"v":1,"env":{…}}` (UTF-8 JSON) + frame
 * stdin; answer = one frame `{"code":n,"stdout":"…"}`. Everything protocol-specific is here.
 *
 * @param path the socket path in this process's view
 * @param timeoutMs bound on connect + request + answer, ms
 * @returns the decoded answer
 * @throws Deno.errors.NotFound / ConnectionRefused when nobody listens (not delivered);
 *   Error for a timeout, a short or malformed answer
 */
export async function probeDaemonVersion(
  path: string,
  timeoutMs: number,
): Promise<DaemonVersionAnswer> {
  const conn = await Deno.connect({ transport: "unix", path });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      conn.close(); // fails the pending read or write
    } catch { /* closed */ }
  }, timeoutMs);
  try {
    const enc = new TextEncoder();
    const header = enc.encode(JSON.stringify({
      v: 1,
      env: { CNI_COMMAND: "VERSION", CNI_PATH: "/opt/cni/bin" },
    }));
    const stdin = enc.encode(JSON.stringify({ cniVersion: "1.1.0" }));
    const req = new Uint8Array(8 + header.length + stdin.length);
    const view = new DataView(req.buffer);
    view.setUint32(0, header.length);
    req.set(header, 4);
    view.setUint32(4 + header.length, stdin.length);
    req.set(stdin, 8 + header.length);
    for (let off = 0; off < req.length;) off += await conn.write(req.subarray(off));
    const chunks: Uint8Array[] = [];
    let have = 0;
    let want = -1;
    const buf = new Uint8Array(64 * 1024);
    for (;;) {
      if (want < 0 && have >= 4) {
        const all = concat(chunks, have);
        want = new DataView(all.buffer).getUint32(0);
        if (want > MAX_ANSWER_BYTES) throw new Error(`answer of ${want} bytes is too large`);
      }
      if (want >= 0 && have >= 4 + want) break;
      const n = await conn.read(buf);
      if (n === null) throw new Error(`connection closed after ${have} bytes of the answer`);
      chunks.push(buf.slice(0, n));
      have += n;
    }
    const body = concat(chunks, have).subarray(4, 4 + want);
    const answer = JSON.parse(new TextDecoder().decode(body)) as Partial<DaemonVersionAnswer>;
    if (typeof answer?.code !== "number" || typeof answer.stdout !== "string") {
      throw new Error("answer is not {code, stdout}");
    }
    return { code: answer.code, stdout: answer.stdout };
  } catch (e) {
    if (timedOut) throw new Error(`no answer within ${timeoutMs} ms`);
    throw e;
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed by the timer */ }
  }
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/** The installed binary's release from `<binDir>/manifold --version`, or undefined. */
async function binaryRelease(ctx: DoctorContext, timeoutMs: number): Promise<string | undefined> {
  try {
    const out = await new Deno.Command(ctx.host(`${ctx.binDir}/manifold`), {
      args: ["--version"],
      stdin: "null",
      stdout: "piped",
      stderr: "null",
      env: {},
      clearEnv: true,
      signal: AbortSignal.timeout(timeoutMs),
    }).output();
    return /^manifold (\S+)/.exec(new TextDecoder().decode(out.stdout))?.[1];
  } catch {
    return undefined;
  }
}

/** See the module documentation. */
export const daemonStep: DoctorStep = {
  name: "daemon",
  async run(ctx) {
    const raw = ctx.conf?.raw;
    const socket = raw?.daemonSocket;
    if (typeof socket !== "string" || socket === "") return; // no daemon configured
    const fallback = raw?.daemonFallback !== false;
    const timeoutMs = ctx.options.apiTimeoutMs ?? 3000;
    const down = (message: string) =>
      fallback
        ? ctx.add(
          "daemon socket",
          "warn",
          `${message}: daemon not running; the plugin falls back in-process`,
          "check the DaemonSet's daemon container (kubectl logs … -c daemon)",
        )
        : ctx.add(
          "daemon socket",
          "fail",
          `${message}: daemon not running and daemonFallback is false: every CNI request fails`,
          "start the daemon, or remove daemonFallback: false",
        );
    const st = await statOrUndefined(ctx.host(socket));
    if (!st) return down(`${socket} does not exist`);
    if (!st.isSocket) {
      ctx.add(
        "daemon socket",
        "fail",
        `${socket} is not a socket`,
        "remove it; the daemon recreates it",
      );
      return;
    }
    const problems: string[] = [];
    const mode = (st.mode ?? 0) & 0o777;
    if (mode !== 0o600) problems.push(`mode ${mode.toString(8)}, want 600`);
    if (st.uid !== 0) problems.push(`owner uid ${st.uid}, want 0`);
    const dir = socket.replace(/\/[^/]*$/, "") || "/";
    const dst = await statOrUndefined(ctx.host(dir));
    const dmode = (dst?.mode ?? 0) & 0o777;
    if (dmode !== 0o700) problems.push(`directory ${dir} mode ${dmode.toString(8)}, want 700`);
    if (problems.length > 0) {
      ctx.add(
        "daemon socket",
        "fail",
        `${socket}: ${problems.join("; ")}`,
        "only root may talk to the daemon: the daemon creates them so; check who changed them",
      );
    } else {
      ctx.add("daemon socket", "ok", `${socket} (socket 0600 root, directory 0700)`);
    }
    let answer: DaemonVersionAnswer;
    try {
      answer = await probeDaemonVersion(ctx.host(socket), timeoutMs);
    } catch (e) {
      if (e instanceof Deno.errors.ConnectionRefused || e instanceof Deno.errors.NotFound) {
        return down(`${socket} refuses connections (a stale socket)`);
      }
      ctx.add(
        "daemon",
        "fail",
        `${socket} does not answer a VERSION request: ${oneLine(errorText(e))}`,
        "the daemon may be hung: check its /healthz and logs",
      );
      return;
    }
    let doc: { supportedVersions?: unknown; manifoldVersion?: unknown } | undefined;
    try {
      doc = JSON.parse(answer.stdout);
    } catch { /* reported below */ }
    if (answer.code !== 0 || !Array.isArray(doc?.supportedVersions)) {
      ctx.add(
        "daemon",
        "fail",
        `VERSION answered code ${answer.code}: ${oneLine(answer.stdout).slice(0, 200)}`,
      );
      return;
    }
    ctx.add("daemon", "ok", `answers VERSION (CNI ${doc.supportedVersions.join(", ")})`);
    const daemonRel = typeof doc.manifoldVersion === "string" ? doc.manifoldVersion : undefined;
    const binRel = daemonRel === undefined ? undefined : await binaryRelease(ctx, timeoutMs);
    if (daemonRel !== undefined && binRel !== undefined) {
      if (daemonRel === binRel) {
        ctx.add("daemon version", "ok", `daemon ${daemonRel} = binary ${binRel}`);
      } else {
        ctx.add(
          "daemon version",
          "warn",
          `daemon ${daemonRel}, ${ctx.binDir}/manifold ${binRel}`,
          "a rolling update in progress, or an old binary: the installer replaces it",
        );
      }
      return;
    }
    const same = JSON.stringify(doc.supportedVersions) === JSON.stringify(SUPPORTED_VERSIONS);
    ctx.add(
      "daemon version",
      same ? "ok" : "warn",
      `${same ? "same" : "different"} CNI versions as this binary${
        daemonRel === undefined ? " (the daemon reports no release)" : ""
      }`,
      same ? undefined : "the daemon and the binary come from different releases",
    );
  },
};
