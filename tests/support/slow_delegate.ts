/**
 * A slow delegate for the orphaned-delegate tests (issue 20 item 7): `<binDir>/bridge`, found
 * before /usr/lib/cni (Manifold searches its `binDir` first), which for ADD appends its PID to a
 * marker file, sleeps, then execs the real bridge plugin; every other command execs it at once
 * (a DEL must not wait).
 *
 * @module
 */

/** The slow delegate installed by {@link installSlowBridge}. */
export interface SlowBridge {
  /** The marker file: one PID per started ADD. */
  marker: string;
  /** The PIDs of the ADDs started so far. */
  pids(): Promise<number[]>;
}

/**
 * Writes `<binDir>/bridge` (see the module doc).
 * @param binDir Manifold's `binDir`
 * @param seconds how long each ADD sleeps before the real bridge runs
 */
export async function installSlowBridge(binDir: string, seconds: number): Promise<SlowBridge> {
  const marker = `${binDir}/bridge.started`;
  await Deno.writeTextFile(
    `${binDir}/bridge`,
    `#!/bin/sh\nif [ "$CNI_COMMAND" = ADD ]; then\n  echo $$ >>${marker}\n  sleep ${seconds}\nfi\n` +
      `exec /usr/lib/cni/bridge\n`,
    { mode: 0o755 },
  );
  return {
    marker,
    async pids() {
      const text = await Deno.readTextFile(marker).catch(() => "");
      return text.split("\n").filter((l) => l).map(Number);
    },
  };
}

/** Whether `pid` runs code (exists and is not a zombie). */
export async function runs(pid: number): Promise<boolean> {
  try {
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}
