/**
 * Benchmark of Manifold's netlink against iproute2 (issue 3). Run as root:
 *
 *     deno run -A scripts/bench_netlink.ts [--runs 25]
 *
 * 1. Dump 1, 10, 100, 1000 links (bridges in a scratch netns, each with an IPv4 address) and
 *    their addresses: Manifold (open a socket in the netns, `linkList` + `addrList`, close)
 *    vs `ip -j -n <ns> link show` + `ip -j -n <ns> addr show` run as processes (output
 *    parsed), interleaved in the same run; median of `--runs` (≥ 20).
 * 2. `inspectNetns` of a pod-like netns with 3 attachments (veth, macvlan on a bridge, vxlan)
 *    inside this warm process — target ≤ 2 ms.
 *
 * Every namespace is named `mfnl-bench-*` and deleted in `finally`.
 *
 * @module
 */

import { inspectNetns, NetlinkHandle, openNetlinkSocket } from "../lib/netlink/mod.ts";

const dec = new TextDecoder();

function ip(args: string[]): string {
  const out = new Deno.Command("ip", { args, stdout: "piped", stderr: "piped" }).outputSync();
  if (!out.success) throw new Error(`ip ${args.join(" ")}: ${dec.decode(out.stderr).trim()}`);
  return dec.decode(out.stdout);
}

function batch(ns: string, lines: string[]): void {
  const file = Deno.makeTempFileSync({ prefix: "mfnl-bench-" });
  try {
    Deno.writeTextFileSync(file, lines.join("\n") + "\n");
    ip(["-n", ns, "-batch", file]);
  } finally {
    Deno.removeSync(file);
  }
}

function netnsName(tag: string): string {
  const r = crypto.getRandomValues(new Uint8Array(3));
  return `mfnl-bench-${tag}-${Array.from(r, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

function time(f: () => void): number {
  const t = performance.now();
  f();
  return performance.now() - t;
}

function ours(ns: string): number {
  using h = new NetlinkHandle(openNetlinkSocket({ netns: ns }));
  return h.linkList().length + h.addrList().length;
}

function iproute2(ns: string): number {
  const links = JSON.parse(ip(["-j", "-n", ns, "link", "show"])) as unknown[];
  const addrs = JSON.parse(ip(["-j", "-n", ns, "addr", "show"])) as unknown[];
  return links.length + addrs.length;
}

function dumpBench(counts: number[], runs: number): void {
  console.log(`\nDump N links + their addresses (median of ${runs}, ms)`);
  console.log(
    "| links | Manifold netlink | ip -j link + ip -j addr | speed-up | Manifold µs/link |",
  );
  console.log("| ---: | ---: | ---: | ---: | ---: |");
  for (const n of counts) {
    const ns = netnsName(String(n));
    ip(["netns", "add", ns]);
    try {
      const lines = ["link set lo up"];
      for (let i = 0; i < n; i++) {
        lines.push(`link add mfbr${i} type bridge`);
        lines.push(`addr add 10.${100 + (i >> 8)}.${i & 255}.1/32 dev mfbr${i}`);
      }
      batch(ns, lines);
      for (let i = 0; i < 3; i++) (ours(ns), iproute2(ns)); // warm-up
      const a: number[] = [], b: number[] = [];
      for (let i = 0; i < runs; i++) {
        a.push(time(() => ours(ns)));
        b.push(time(() => iproute2(ns)));
      }
      const ma = median(a), mb = median(b);
      console.log(
        `| ${n} | ${ma.toFixed(3)} | ${mb.toFixed(2)} | ${(mb / ma).toFixed(1)}× | ${
          (ma * 1000 / (n + 1)).toFixed(1)
        } |`,
      );
    } finally {
      ip(["netns", "del", ns]);
    }
  }
}

function inspectBench(runs: number): void {
  const ns = netnsName("pod");
  ip(["netns", "add", ns]);
  try {
    batch(ns, [
      "link set lo up",
      "link add eth0 type veth peer name eth0p",
      "link add mfparent type bridge",
      "link add net1 link mfparent type macvlan mode bridge",
      "link add net2 type vxlan id 42 dstport 4789 local 10.1.0.5",
      "link set eth0 up",
      "link set eth0p up",
      "link set mfparent up",
      "link set net1 up",
      "link set net2 up",
      "addr add 10.1.0.5/24 dev eth0",
      "addr add fd01::5/64 dev eth0 nodad",
      "addr add 10.2.0.5/24 dev net1",
      "addr add 10.3.0.5/24 dev net2",
      "route add default via 10.1.0.1 dev eth0",
    ]);
    for (let i = 0; i < 20; i++) inspectNetns(`/var/run/netns/${ns}`);
    const t: number[] = [];
    for (let i = 0; i < runs; i++) t.push(time(() => inspectNetns(`/var/run/netns/${ns}`)));
    const snap = inspectNetns(`/var/run/netns/${ns}`);
    const ipT: number[] = [];
    for (let i = 0; i < Math.min(runs, 50); i++) {
      ipT.push(time(() => {
        ip(["-j", "-n", ns, "link", "show"]);
        ip(["-j", "-n", ns, "addr", "show"]);
        ip(["-j", "-n", ns, "route", "show"]);
      }));
    }
    console.log(
      `\ninspectNetns, pod netns with 3 attachments (${snap.interfaces.length} links, ${snap.routes.length} routes), warm process, ${runs} runs:`,
    );
    console.log(
      `  median ${median(t).toFixed(3)} ms, p95 ${percentile(t, 0.95).toFixed(3)} ms, max ${
        Math.max(...t).toFixed(3)
      } ms (target ≤ 2 ms) — ${median(t) <= 2 ? "met" : "MISSED"}`,
    );
    console.log(`  same view via 3 ip -j processes: median ${median(ipT).toFixed(2)} ms`);
  } finally {
    ip(["netns", "del", ns]);
  }
}

if (import.meta.main) {
  const i = Deno.args.indexOf("--runs");
  const runs = Math.max(20, i === -1 ? 25 : Number(Deno.args[i + 1]) || 25);
  console.log(`Manifold netlink benchmark — Deno ${Deno.version.deno}, kernel ${Deno.osRelease()}`);
  dumpBench([1, 10, 100, 1000], runs);
  inspectBench(Math.max(runs, 200));
}
