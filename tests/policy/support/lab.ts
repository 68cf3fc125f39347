/**
 * A policy lab for integration tests (root): a "switch" network namespace holding a
 * bridge, and pod namespaces each with a `net1` veth on it (addresses 10.99.0.0/24 and
 * fd99::/64, only inside the test namespaces), plus a traffic agent per pod.
 *
 * @module
 */

import { libnftablesRunner, PolicyApplier } from "../../../lib/policy/mod.ts";
import { ip, rootTest, Scratch } from "../../support/netns.ts";

const AGENT = new URL("./agent.ts", import.meta.url).pathname;

/** A pod namespace with its agent. */
export class LabPod {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #lines: AsyncIterator<string>;

  /** @param netns netns name, @param ip4 its net1 IPv4, @param ip6 its net1 IPv6 */
  constructor(readonly netns: string, readonly ip4: string, readonly ip6: string) {
    this.#child = new Deno.Command("ip", {
      args: ["netns", "exec", netns, Deno.execPath(), "run", "--allow-net", AGENT],
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    this.#lines = this.#child.stdout.pipeThrough(new TextDecoderStream()).pipeThrough(
      new LineStream(),
    )[Symbol.asyncIterator]();
  }

  /** netns path. */
  get path(): string {
    return `/var/run/netns/${this.netns}`;
  }

  async #ask(line: string): Promise<string> {
    await this.#writer.write(new TextEncoder().encode(`${line}\n`));
    const r = await this.#lines.next();
    if (r.done) throw new Error(`agent in ${this.netns} ended`);
    return r.value;
  }

  /** Starts TCP listeners on `ports`. */
  async listen(...ports: number[]): Promise<void> {
    const r = await this.#ask(`listen ${ports.join(" ")}`);
    if (r !== "ok") throw new Error(r);
  }

  /** Whether a TCP connect to `ip`:`port` succeeds within `timeoutMs`. */
  async connects(ip: string, port: number, timeoutMs = 300): Promise<boolean> {
    return (await this.#ask(`connect ${ip} ${port} ${timeoutMs}`)) === "ok";
  }

  /** Starts UDP echo servers on `ports`. */
  async udpListen(...ports: number[]): Promise<void> {
    const r = await this.#ask(`udp-listen ${ports.join(" ")}`);
    if (r !== "ok") throw new Error(r);
  }

  /** Whether a UDP datagram to `ip`:`port` is echoed back within `timeoutMs`. */
  async udpEchoes(ip: string, port: number, timeoutMs = 300): Promise<boolean> {
    return (await this.#ask(`udp ${ip} ${port} ${timeoutMs}`)) === "ok";
  }

  /** Stops the agent. */
  async close(): Promise<void> {
    await this.#writer.close().catch(() => {});
    try {
      this.#child.kill();
    } catch { /* already gone */ }
    await this.#child.status;
  }
}

class LineStream extends TransformStream<string, string> {
  constructor() {
    let buf = "";
    super({
      transform(chunk, ctl) {
        buf += chunk;
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          ctl.enqueue(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
        }
      },
    });
  }
}

/** The lab: a switch netns with a bridge; pods added with {@link Lab.pod}. */
export class Lab {
  readonly scratch = new Scratch();
  #switch = "";
  #pods: LabPod[] = [];
  #n = 0;

  /** The switch namespace's name (holding `br0`). */
  get switchNetns(): string {
    return this.#switch;
  }

  /** Creates the switch namespace and its bridge. */
  async init(): Promise<void> {
    this.#switch = await this.scratch.netns("sw");
    await ip("-n", this.#switch, "link", "add", "br0", "type", "bridge");
    await ip("-n", this.#switch, "link", "set", "br0", "up");
  }

  /** Adds a pod namespace with `net1` on the bridge at 10.99.0.`host` / fd99::`host`. */
  async pod(tag: string, host: number): Promise<LabPod> {
    const ns = await this.scratch.netns(tag);
    const port = `p${this.#n++}`;
    await ip(
      "link",
      "add",
      port,
      "netns",
      this.#switch,
      "type",
      "veth",
      "peer",
      "name",
      "net1",
      "netns",
      ns,
    );
    await ip("-n", this.#switch, "link", "set", port, "master", "br0", "up");
    await ip("-n", ns, "addr", "add", `10.99.0.${host}/24`, "dev", "net1");
    await ip("-n", ns, "addr", "add", `fd99::${host}/64`, "dev", "net1", "nodad");
    await ip("-n", ns, "link", "set", "net1", "up");
    const pod = new LabPod(ns, `10.99.0.${host}`, `fd99::${host}`);
    this.#pods.push(pod);
    return pod;
  }

  /** Stops agents and removes every namespace; never throws. */
  async cleanup(): Promise<void> {
    for (const p of this.#pods) await p.close().catch(() => {});
    await this.scratch.cleanup();
  }
}

/**
 * Registers a root test (real netns, libnftables; skipped otherwise) with a fresh {@link Lab}
 * and a libnftables {@link PolicyApplier}, both cleaned up also when the test fails.
 *
 * @param name the test's name
 * @param fn the test: the initialised lab, the applier, the test context
 */
export function labTest(
  name: string,
  fn: (lab: Lab, applier: PolicyApplier, t: Deno.TestContext) => Promise<void>,
): void {
  rootTest(name, async (t) => {
    const lab = new Lab();
    const applier = new PolicyApplier(libnftablesRunner());
    try {
      await lab.init();
      await fn(lab, applier, t);
    } finally {
      await applier.close();
      await lab.cleanup();
    }
  });
}
