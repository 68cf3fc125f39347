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
 *
 * CNI 1.1.0 in front of 1.0.0 plugins: the real plugins (Debian's containernetworking-plugins
 * 1.1.1) speak CNI up to 1.0.0 and know no GC or STATUS. For a config of cniVersion 1.1.0 the
 * recorder passes ADD/DEL/CHECK on as 1.0.0 (config and `prevResult`; the 1.1.0 result format
 * is 1.0.0's) and answers with the result relabelled 1.1.0; it answers STATUS with success and
 * does GC itself as host-local ≥ 1.1.0 does: with `ipam.type` `host-local`, every lease in
 * `<ipam.dataDir>/<name>/` whose container ID and ifname are not in
 * `cni.dev/valid-attachments` is released (its file removed). So a delegating plugin's GC that
 * reaches the delegates with the runtime's valid attachments releases what they leaked.
 *
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

/** A 1.1.0 config as its 1.0.0 twin (`cniVersion` of the config and of `prevResult`). */
function as100(config: Record<string, unknown>): Record<string, unknown> {
  const prev = config.prevResult as Record<string, unknown> | undefined;
  return {
    ...config,
    cniVersion: "1.0.0",
    ...(prev ? { prevResult: { ...prev, cniVersion: "1.0.0" } } : {}),
  };
}

/**
 * GC as host-local ≥ 1.1.0 does it: releases the leases (files named by address in
 * `<dataDir>/<network name>/`, holding `<containerID>\r\n<ifname>`) of attachments missing from
 * `cni.dev/valid-attachments`.
 */
async function hostLocalGc(config: Record<string, unknown>): Promise<void> {
  const ipam = (config.ipam ?? {}) as { type?: string; dataDir?: string };
  if (ipam.type !== "host-local" || typeof config.name !== "string") return;
  const dir = `${ipam.dataDir ?? "/var/lib/cni/networks"}/${config.name}`;
  const valid = new Set(
    ((config["cni.dev/valid-attachments"] ?? []) as { containerID?: string; ifname?: string }[])
      .map((a) => `${a.containerID}\0${a.ifname}`),
  );
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(dir)];
  } catch {
    return;
  }
  for (const e of entries) {
    if (!e.isFile || e.name === "lock" || e.name.startsWith("last_reserved_ip")) continue;
    const [id, ifname] = (await Deno.readTextFile(`${dir}/${e.name}`)).split(/\r?\n/);
    if (!valid.has(`${id.trim()}\0${(ifname ?? "").trim()}`)) {
      await Deno.remove(`${dir}/${e.name}`).catch(() => {});
    }
  }
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
  const v110 = config.cniVersion === "1.1.0";
  if (v110 && command === "STATUS") return;
  if (v110 && command === "GC") {
    if (typeof delegate === "string") await hostLocalGc(config);
    return;
  }
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
  await w.write(new TextEncoder().encode(v110 ? JSON.stringify(as100(config)) : raw));
  await w.close();
  const out = await child.output();
  let stdout = new TextDecoder().decode(out.stdout);
  if (out.code === 0 && command === "ADD" && knobs.hostInterfaceFirst) {
    stdout = JSON.stringify(hostInterfaceFirst(JSON.parse(stdout)));
  }
  if (v110 && stdout.trim().startsWith("{")) {
    stdout = JSON.stringify({ ...JSON.parse(stdout), cniVersion: "1.1.0" });
  }
  await Deno.stdout.write(new TextEncoder().encode(stdout));
  Deno.exit(out.code);
}

if (import.meta.main) await main();
