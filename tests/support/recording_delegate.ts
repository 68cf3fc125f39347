/**
 * A recording delegate for tests that check what a delegate receives: a shell script that
 * appends its stdin config and CNI_COMMAND/CNI_IFNAME as one JSON line to a log, then runs the
 * real bridge plugin from /usr/lib/cni with the same input.
 *
 * @module
 */

/** One delegate call as recorded. */
export interface RecordedCall {
  /** The config the delegate read on stdin. */
  config: Record<string, unknown>;
  /** `CNI_COMMAND` and `CNI_IFNAME`. */
  env: Record<string, string>;
}

/**
 * Writes the executable `<bin>/<name>` recording every call to `log`.
 * @param bin the delegates' directory (the config's `binDir`)
 * @param name the plugin type
 * @param log the JSON-lines file calls are appended to
 */
export async function writeRecordingDelegate(
  bin: string,
  name: string,
  log: string,
): Promise<void> {
  await Deno.writeTextFile(
    `${bin}/${name}`,
    `#!/bin/sh
input=$(cat)
printf '{"config":%s,"env":{"CNI_COMMAND":"%s","CNI_IFNAME":"%s"}}\\n' "$input" "$CNI_COMMAND" "$CNI_IFNAME" >> ${log}
printf '%s' "$input" | exec /usr/lib/cni/bridge
`,
  );
  await Deno.chmod(`${bin}/${name}`, 0o755);
}

/**
 * The recorded calls of one command, in call order.
 * @param log the file given to {@link writeRecordingDelegate}
 * @param command `"ADD"`, `"DEL"`, …
 * @returns the calls; `[]` when the delegate never ran
 */
export async function recordedCalls(log: string, command: string): Promise<RecordedCall[]> {
  const text = await Deno.readTextFile(log).catch(() => "");
  return text.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l) as RecordedCall)
    .filter((r) => r.env.CNI_COMMAND === command);
}
