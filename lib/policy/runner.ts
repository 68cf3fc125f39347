/**
 * How a libnftables JSON batch reaches a network namespace: the {@link NftRunner}
 * interface, its error, and the `nft` process runner (`nsenter --net=… nft -j -f -`, for
 * comparison and for hosts without the library; the default is the libnftables FFI runner).
 *
 * @module
 */

import { resolveNetnsPath } from "../netlink/mod.ts";

/** A batch libnftables or `nft` refused; nothing of it was applied. */
export class NftablesError extends Error {
  /** libnftables' or nft's error text (which command, why). */
  readonly output: string;

  /**
   * A refused batch.
   *
   * @param message what failed, e.g. `"nft_run_cmd_from_buffer failed"`
   * @param output libnftables' error text
   */
  constructor(message: string, output: string) {
    super(output ? `${message}: ${output.trim()}` : message);
    this.name = "NftablesError";
    this.output = output;
  }
}

/** Runs a JSON batch inside a network namespace and returns the JSON output (may be ""). */
export interface NftRunner {
  /** `"libnftables"` or `"nft"`. */
  readonly name: string;
  /**
   * Runs one batch (one transaction) in a network namespace.
   *
   * @param netns a netns path or a name under `/var/run/netns`
   * @param batch the `{"nftables": [...]}` document as text
   * @returns libnftables' output (JSON text for `list`, else usually "")
   * @throws {NftablesError} when the batch is refused
   */
  run(netns: string, batch: string): Promise<string>;
  /**
   * Drops what the runner keeps for `netns` (an open context); called when the pod's rules
   * are removed or the pod is gone.
   */
  release?(netns: string): void;
  /** Frees everything the runner keeps (every open context); resolves when done. */
  close?(): Promise<void>;
}

/**
 * The `nft` process runner: `nsenter --net=<path> nft -j -f -` with the batch on stdin.
 * Needs `--allow-run`.
 *
 * @param nft the `nft` binary (default `"nft"` on `PATH`)
 * @returns the runner
 */
export function nftProcessRunner(nft = "nft"): NftRunner {
  return {
    name: "nft",
    async run(netns: string, batch: string): Promise<string> {
      const child = new Deno.Command("nsenter", {
        args: [`--net=${resolveNetnsPath(netns)}`, nft, "-j", "-f", "-"],
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(batch));
      await w.close();
      const r = await child.output();
      const dec = new TextDecoder();
      if (r.code !== 0) throw new NftablesError(`nft exited with ${r.code}`, dec.decode(r.stderr));
      return dec.decode(r.stdout);
    },
  };
}
