/**
 * Shared fixtures of the installer tests: a fake host root in a temp dir (the directories
 * the DaemonSet mounts), primary configs, a service-account directory, bounded waits.
 */

import { parseManifoldConf } from "../../lib/multinet/config.ts";

/** A fake node: `root` plays the host's `/`, mounted like the DaemonSet does. */
export interface FakeHost {
  root: string;
  /** `<root>/etc/cni/net.d` (installer view of the host's `/etc/cni/net.d`). */
  confDir: string;
  /** `<root>/opt/cni/bin`. */
  binDir: string;
  /** A service-account directory (container view) with `token` and `ca.crt`. */
  saDir: string;
  /** A stand-in plugin binary to install. */
  binary: string;
  /** `<confDir>/00-manifold.conflist`. */
  config: string;
  cleanup(): Promise<void>;
}

/** Creates a fake host root with empty CNI directories. */
export async function fakeHost(): Promise<FakeHost> {
  const root = await Deno.makeTempDir({ prefix: "mf-install-" });
  const confDir = `${root}/etc/cni/net.d`;
  const binDir = `${root}/opt/cni/bin`;
  const saDir = `${root}/sa`;
  await Deno.mkdir(confDir, { recursive: true });
  await Deno.mkdir(binDir, { recursive: true });
  await Deno.mkdir(saDir);
  await Deno.writeTextFile(`${saDir}/token`, "token-one");
  await Deno.writeTextFile(
    `${saDir}/ca.crt`,
    "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
  );
  const binary = `${root}/manifold-image-binary`;
  await Deno.writeTextFile(binary, "#!/bin/sh\necho manifold stand-in\n");
  await Deno.chmod(binary, 0o755);
  return {
    root,
    confDir,
    binDir,
    saDir,
    binary,
    config: `${confDir}/00-manifold.conflist`,
    cleanup: () => Deno.remove(root, { recursive: true }).catch(() => {}),
  };
}

/** A flannel-like conflist (bridge + portmap with portMappings). */
export function flannelConflist(cniVersion = "1.0.0", extraCaps: Record<string, boolean> = {}) {
  return {
    cniVersion,
    name: "cbr0",
    plugins: [
      { type: "flannel", delegate: { hairpinMode: true, isDefaultGateway: true } },
      { type: "portmap", capabilities: { portMappings: true, ...extraCaps } },
    ],
  };
}

/** A single-plugin `.conf` (Calico-style fields kept short). */
export function singleConf(cniVersion = "0.3.1") {
  return {
    cniVersion,
    name: "k8s-pod-network",
    type: "bridge",
    bridge: "cni0",
    capabilities: { bandwidth: true },
    ipam: { type: "host-local", subnet: "10.244.0.0/24" },
  };
}

/** Polls `check` every 10 ms until it returns a value other than undefined/false; bounded. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 5000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v as T;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The file's text, or undefined when missing. */
export async function readIf(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/**
 * Parses a generated config as the runtime and the plugin would: JSON, a list with one
 * `manifold` plugin, which `parseManifoldConf` accepts with the list's name and cniVersion.
 * @throws when any of that fails (a partial or invalid file)
 */
export function parseGenerated(text: string) {
  const list = JSON.parse(text) as {
    cniVersion: string;
    name: string;
    plugins: Record<string, unknown>[];
  };
  if (!Array.isArray(list.plugins) || list.plugins.length !== 1) {
    throw new Error("generated config must have exactly one plugin");
  }
  const conf = parseManifoldConf({
    ...list.plugins[0],
    name: list.name,
    cniVersion: list.cniVersion,
  });
  return { list, conf };
}

/** Names in a directory that look like temporary files of an atomic write. */
export async function tempFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) if (e.name.includes(".tmp-")) out.push(e.name);
  return out;
}
