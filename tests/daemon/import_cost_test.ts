/**
 * prom-client stays off the plugin's per-call path: in `deno info main.ts`, nothing the plugin
 * mode loads (main.ts, then everything reachable from it except main.ts's dynamic imports of the
 * `manifold <tool>` commands in lib/cli/) reaches `npm:prom-client` or lib/daemon/metrics.ts.
 * Importing prom-client costs ≈ 50–100 ms and ≈ 20 MiB RSS on this machine kind.
 */

import assert from "node:assert/strict";

interface Dep {
  specifier: string;
  code?: { specifier: string };
  type?: { specifier: string };
  isDynamic?: boolean;
}
interface Mod {
  specifier: string;
  dependencies?: Dep[];
}

const ROOT = new URL("../../", import.meta.url);

Deno.test("the plugin path (main.ts without its lib/cli tools) never loads prom-client", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "main.ts"],
    cwd: ROOT.pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: Mod[];
    redirects: Record<string, string>;
  };
  const bySpec = new Map(info.modules.map((m) => [m.specifier, m]));
  const main = new URL("main.ts", ROOT).href;
  const cli = new URL("lib/cli/", ROOT).href;
  const seen = new Set<string>();
  const stack = [main];
  while (stack.length > 0) {
    const s = stack.pop()!;
    if (seen.has(s)) continue;
    seen.add(s);
    for (const d of bySpec.get(s)?.dependencies ?? []) {
      const target = d.code?.specifier;
      if (target === undefined) continue; // type-only
      if (s === main && d.isDynamic && target.startsWith(cli)) continue; // a tool, not the plugin
      stack.push(info.redirects[target] ?? target);
    }
  }
  assert.ok(seen.has(new URL("lib/multinet/plugin.ts", ROOT).href), "the walk reaches the plugin");
  const heavy = [...seen].filter((s) =>
    s.includes("prom-client") || s.endsWith("/lib/daemon/metrics.ts") ||
    s.endsWith("/lib/daemon/http.ts")
  );
  assert.deepEqual(heavy, []);
  // And the walk would see it: the metrics module itself does import prom-client.
  const metrics = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "lib/daemon/http.ts"],
    cwd: ROOT.pathname,
    stdout: "piped",
  }).output();
  assert.match(new TextDecoder().decode(metrics.stdout), /npm:prom-client@15\./);
});
