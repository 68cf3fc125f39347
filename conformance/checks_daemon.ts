/**
 * Checks that run only in daemon mode (`--daemon-command`, conformance/daemon.ts): what a
 * runtime relies on when the plugin's work is done by a resident node daemon that is restarted
 * (a DaemonSet's rolling update) while pods keep their attachments. Without a daemon they are
 * SKIP.
 *
 * @module
 */

import { calls, type Check, expect, expectOk, networks, Skip, withPod } from "./check.ts";
import { DEFAULT_NET } from "./harness.ts";

/** Every daemon-mode check, in report order. */
export const DAEMON_CHECKS: Check[] = [
  {
    section: "CNI §DEL",
    name: "node daemon restarted after ADD: CHECK passes, DEL detaches every attachment",
    level: "MUST",
    async run(s) {
      if (!s.daemonMode) throw new Skip("no node daemon (run with --daemon-command)");
      await withPod(
        s,
        {
          annotations: networks("rs-a,rs-b"),
          nads: { "rs-a": s.net({ name: "rs-a" }), "rs-b": s.net({ name: "rs-b" }) },
        },
        async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          const attached = await p.links();
          await s.restartDaemon();
          expectOk(await p.call("CHECK"), "CHECK after the daemon restarted");
          expectOk(await p.call("DEL"), "DEL after the daemon restarted");
          const left = await p.links();
          expect(
            left.length === 0,
            `left in the pod after DEL: ${left} (attached: ${attached})`,
          );
          const deleted = new Set(calls(await p.records(), "DEL").map((r) => r.config.name));
          for (const net of [DEFAULT_NET, "rs-a", "rs-b"]) {
            expect(deleted.has(net), `no delegate DEL for network "${net}" after the restart`);
          }
        },
      );
    },
  },
];
