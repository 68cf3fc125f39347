/**
 * The `daemon` step of `manifold doctor`, run when Manifold's config names a `daemonSocket`
 * (the binary then forwards each request to `manifold daemon`):
 *
 * - daemon socket: present, a socket, mode 0600, owned by root, in a directory its group and
 *   other users cannot write (what `manifold daemon` itself requires); absent or
 *   refusing connections is a warning ("the plugin falls back in-process"), a failure when the
 *   config says `"daemonFallback": false`;
 * - daemon: answers a CNI VERSION request over the daemon protocol ({@link probeDaemonVersion});
 * - daemon version: the daemon's release (`manifoldVersion` of its VERSION answer, when it
 *   reports one) equals the installed binary's (`<cni-bin-dir>/manifold --version`); else its
 *   CNI versions equal this binary's.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { SUPPORTED_VERSIONS } from "../cni/version.ts";
import type { ForwardOutcome } from "../daemon/forward.ts";
import { oneLine } from "../util/text.ts";
import { type DoctorContext, type DoctorStep, statOrUndefined } from "./doctor_checks.ts";

/**
 * Sends one CNI VERSION request to the daemon over its protocol (lib/daemon/protocol.ts) with
 * the forwarder's own client (`forward` of lib/daemon/forward.ts), bounded in time.
 *
 * @param path the socket path in this process's view
 * @param timeoutMs bound on request + answer once connected, ms
 * @returns `answered` with the daemon's `{code, stdout}`, `unavailable` when nobody listens,
 *   `lost` for a timeout or a short or malformed answer
 */
export async function probeDaemonVersion(path: string, timeoutMs: number): Promise<ForwardOutcome> {
  const { forward } = await lazyImport<typeof import("../daemon/forward.ts")>(
    "../daemon/forward.ts",
    import.meta.url,
  );
  const stdin = new TextEncoder().encode(JSON.stringify({ cniVersion: "1.1.0" }));
  const env = { CNI_COMMAND: "VERSION", CNI_PATH: "/opt/cni/bin" };
  return await forward(path, env, stdin, { timeoutMs });
}

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
    if (dmode & 0o022) {
      problems.push(
        `directory ${dir} mode ${dmode.toString(8)} is writable by its group or others, want 700`,
      );
    }
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
    const outcome = await probeDaemonVersion(ctx.host(socket), timeoutMs);
    if (outcome.kind === "unavailable") {
      return down(`${socket} refuses connections (a stale socket): ${oneLine(outcome.reason)}`);
    }
    if (outcome.kind === "lost") {
      ctx.add(
        "daemon",
        "fail",
        `${socket} does not answer a VERSION request: ${oneLine(outcome.reason)}`,
        "the daemon may be hung: check its /healthz and logs",
      );
      return;
    }
    const answer = outcome.answer;
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
