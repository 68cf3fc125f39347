/**
 * The conformance suite's one recording delegate (type `conformance-recorder`). A delegating
 * plugin under test runs it like any CNI plugin; it
 *
 * 1. saves what it received — `CNI_*` environment and the config from stdin — as one JSON
 *    file `<CONFORMANCE_RECORD_DIR>/<time>-<pid>.json` ({@link Recording});
 * 2. then `exec`s the real plugin named by the config's `"delegate"` key (searched in
 *    `CNI_PATH`), with the same environment and the same stdin bytes, and passes its stdout
 *    and exit status through.
 *
 * Knobs in the config's `"conformance"` object (used by single checks):
 * - `fail: ["ADD" | "DEL" | "CHECK"]`: answer those commands with a CNI error (code 100)
 *   after recording, without running the delegate;
 * - `hostInterfaceFirst: true`: on ADD, prepend a host-side interface (no `sandbox`) and a
 *   host address to the delegate's result, so status sourcing (NPWG v1.3 §5.1.1) can be
 *   checked.
 *
 * Without `"delegate"`, ADD answers `prevResult` (or an empty result) and DEL/CHECK succeed.
 * Runs with `deno run -A` through a wrapper script the suite writes; imports nothing.
 *
 * @module
 */

/** One recorded invocation. */
export interface Recording {
  /** Wall-clock time of the call, ms (fractional; orders calls across processes). */
  t: number;
  pid: number;
  /** `CNI_*` variables as received. */
  env: Record<string, string>;
  /** The config as received on stdin, parsed. */
  config: Record<string, unknown>;
  /** The config's raw bytes. */
  raw: string;
}

function cniError(cniVersion: unknown, msg: string): never {
  console.log(JSON.stringify({ cniVersion: cniVersion ?? "1.0.0", code: 100, msg }));
  Deno.exit(1);
}

function findPlugin(type: string): string | undefined {
  for (const dir of (Deno.env.get("CNI_PATH") ?? "").split(":").filter(Boolean)) {
    try {
      if (Deno.statSync(`${dir}/${type}`).isFile) return `${dir}/${type}`;
    } catch { /* next */ }
  }
  return undefined;
}

/** Prepends a host interface and a host address; shifts the other `interface` indices. */
function hostInterfaceFirst(result: Record<string, unknown>): Record<string, unknown> {
  const interfaces = (result.interfaces as Record<string, unknown>[] | undefined) ?? [];
  const ips = ((result.ips as Record<string, unknown>[] | undefined) ?? []).map((ip) => ({
    ...ip,
    ...(typeof ip.interface === "number" ? { interface: ip.interface + 1 } : {}),
  }));
  return {
    ...result,
    interfaces: [{ name: "confhost0", mac: "0a:58:00:00:00:01" }, ...interfaces],
    ips: [{ address: "192.0.2.250/24", interface: 0 }, ...ips],
  };
}

async function main(): Promise<void> {
  const raw = await new Response(Deno.stdin.readable).text();
  const command = Deno.env.get("CNI_COMMAND") ?? "";
  let config: Record<string, unknown> = {};
  try {
    config = raw.trim() ? JSON.parse(raw) : {};
  } catch { /* recorded raw; the delegate judges */ }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(Deno.env.toObject())) if (k.startsWith("CNI_")) env[k] = v;
  const dir = Deno.env.get("CONFORMANCE_RECORD_DIR");
  const t = performance.timeOrigin + performance.now();
  if (dir) {
    const rec: Recording = { t, pid: Deno.pid, env, config, raw };
    await Deno.writeTextFile(`${dir}/${t.toFixed(3)}-${Deno.pid}.json`, JSON.stringify(rec));
  }
  if (command === "VERSION") {
    console.log(JSON.stringify({
      cniVersion: "1.1.0",
      supportedVersions: ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"],
    }));
    return;
  }
  const knobs = (config.conformance ?? {}) as { fail?: string[]; hostInterfaceFirst?: boolean };
  if (knobs.fail?.includes(command)) {
    cniError(config.cniVersion, `conformance-recorder: injected ${command} failure`);
  }
  const delegate = config.delegate;
  if (typeof delegate !== "string") {
    if (command === "ADD") {
      console.log(JSON.stringify(
        config.prevResult ?? { cniVersion: config.cniVersion, interfaces: [], ips: [] },
      ));
    }
    return;
  }
  const path = findPlugin(delegate);
  if (!path) cniError(config.cniVersion, `conformance-recorder: delegate ${delegate} not found`);
  const child = new Deno.Command(path, { stdin: "piped", stdout: "piped", stderr: "inherit" })
    .spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(raw));
  await w.close();
  const out = await child.output();
  let stdout = new TextDecoder().decode(out.stdout);
  if (out.code === 0 && command === "ADD" && knobs.hostInterfaceFirst) {
    stdout = JSON.stringify(hostInterfaceFirst(JSON.parse(stdout)));
  }
  await Deno.stdout.write(new TextEncoder().encode(stdout));
  Deno.exit(out.code);
}

if (import.meta.main) await main();
