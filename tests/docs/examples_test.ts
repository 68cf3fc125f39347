/**
 * Every example in README.md and docs/ is run (issue: "every example is tested"):
 * - each `json` block parses, and a CNI config naming `"type": "manifold"` is accepted by
 *   Manifold's own config parser exactly as the plugin reads it (the list's name and cniVersion
 *   injected);
 * - each `yaml` block parses, and each of its objects is accepted by a server-side dry run
 *   (`dryRun=All`) against the real kube-apiserver with deploy/'s CRDs installed (when
 *   `MANIFOLD_KUBE_APISERVER` is set; an API version that server does not serve is named in the
 *   test's output, never silently passed);
 * - each shell line that runs `manifold <command>`, `deno task conformance` or
 *   `deno run … scripts/<x>.ts` uses only flags that command's `--help` lists.
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { parseNetworkConfig } from "../../lib/cni/types.ts";
import { parseManifoldConf } from "../../lib/multinet/config.ts";
import { type KubeApiServer, realApiSuite } from "../support/kube_apiserver.ts";
import { MANIFOLD } from "../support/plugin.ts";
import { deployObjects } from "../realapi/cluster.ts";

const ROOT = new URL("../../", import.meta.url);

/** One fenced block of a page: its language word, text, and where it starts. */
interface Block {
  file: string;
  line: number;
  lang: string;
  text: string;
}

/** README.md and every docs/*.md page. */
function pages(): string[] {
  const docs = [...Deno.readDirSync(new URL("docs/", ROOT))]
    .filter((e) => e.isFile && e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`)
    .sort();
  return ["README.md", ...docs];
}

/** The fenced code blocks of the pages. */
function blocks(): Block[] {
  const out: Block[] = [];
  for (const file of pages()) {
    const lines = Deno.readTextFileSync(new URL(file, ROOT)).split("\n");
    for (let i = 0; i < lines.length; i++) {
      const open = /^```(\w*)\s*$/.exec(lines[i]);
      if (!open) continue;
      const start = i;
      const body: string[] = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) body.push(lines[i]);
      out.push({ file, line: start + 1, lang: open[1], text: body.join("\n") });
    }
  }
  return out;
}

Deno.test("docs: README links every docs/ page and stays a front door (≤ 300 lines)", () => {
  const readme = Deno.readTextFileSync(new URL("README.md", ROOT));
  assert.ok(readme.split("\n").length <= 300, `README.md has ${readme.split("\n").length} lines`);
  for (const page of pages().slice(1)) {
    assert.ok(readme.includes(`](${page})`), `README links ${page}`);
  }
});

Deno.test("docs: every relative link and #anchor points at a file and heading that exist", () => {
  const slug = (h: string) =>
    h.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, "").replaceAll(" ", "-");
  const anchors = new Map<string, Set<string>>();
  for (const file of pages()) {
    const set = new Set<string>();
    let fence = false;
    for (const l of Deno.readTextFileSync(new URL(file, ROOT)).split("\n")) {
      if (l.startsWith("```")) fence = !fence;
      const h = /^#+ (.*)$/.exec(l);
      if (h && !fence) set.add(slug(h[1]));
    }
    anchors.set(file, set);
  }
  const broken: string[] = [];
  for (const file of pages()) {
    const text = Deno.readTextFileSync(new URL(file, ROOT));
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1];
      if (/^[a-z]+:/.test(target)) continue;
      const [path, anchor] = target.split("#");
      const resolved = path === ""
        ? file
        : new URL(path, new URL(file, ROOT)).pathname.slice(ROOT.pathname.length);
      if (path !== "") {
        try {
          Deno.statSync(new URL(path, new URL(file, ROOT)));
        } catch {
          broken.push(`${file}: ${target} (no such file)`);
          continue;
        }
      }
      if (anchor && !anchors.get(resolved)?.has(anchor)) {
        broken.push(`${file}: ${target} (no such heading)`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

Deno.test("docs: every JSON example parses; every Manifold config passes the plugin's own parser", () => {
  const json = blocks().filter((b) => b.lang === "json");
  assert.ok(json.length >= 3, "the pages show JSON configs");
  let manifoldConfigs = 0;
  for (const b of json) {
    const where = `${b.file}:${b.line}`;
    let value: unknown;
    try {
      value = JSON.parse(b.text);
    } catch (e) {
      assert.fail(`${where}: not JSON: ${e}`);
    }
    const v = value as { type?: string; plugins?: { type?: string }[] };
    if (Array.isArray(v.plugins) || v.type === "manifold") {
      const list = parseNetworkConfig(b.text, { source: where });
      const plugin = list.plugins.find((p) => p.type === "manifold");
      if (!plugin) continue;
      parseManifoldConf({ ...plugin, name: list.name, cniVersion: list.cniVersion });
      manifoldConfigs++;
    }
  }
  assert.ok(manifoldConfigs >= 2, `${manifoldConfigs} Manifold configs checked`);
});

/** Flags (`--long`, `-x`) a shell line passes, without values, quoted text or comments. */
function flagsOf(line: string): string[] {
  const code = line.replace(/'[^']*'/g, "''").replace(/"[^"]*"/g, '""').replace(/\s#.*$/, "");
  return [...code.matchAll(/(?:^|\s|\[)(--?[a-zA-Z][\w-]*)/g)].map((m) => m[1]);
}

const helps = new Map<string, string>();

/**
 * The `--help` text of a command a shell line runs (a script's source: its `parseArgs` options),
 * or undefined for other commands.
 */
async function helpOf(line: string): Promise<{ name: string; help: string } | undefined> {
  const run = async (cmd: string, args: string[]) => {
    const key = [cmd, ...args].join(" ");
    if (helps.has(key)) return helps.get(key)!;
    const out = await new Deno.Command(cmd, {
      args,
      cwd: ROOT.pathname,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dec = new TextDecoder();
    helps.set(key, dec.decode(out.stdout) + dec.decode(out.stderr));
    return helps.get(key)!;
  };
  const manifold = /(?:^|\s|--\s)(?:manifold|scripts\/manifold|\$PWD\/scripts\/manifold)\s+([a-z]+)/
    .exec(line);
  if (manifold) {
    const name = `manifold ${manifold[1]}`;
    return { name, help: await run(MANIFOLD, [manifold[1], "--help"]) };
  }
  if (/deno task conformance/.test(line)) {
    return {
      name: "conformance",
      help: await run(Deno.execPath(), ["run", "-A", "conformance/main.ts", "--help"]),
    };
  }
  const script = /deno run -A (scripts\/\w+\.ts)/.exec(line);
  if (script) {
    // A script's flags are its parseArgs options: `name: { type: … }` (listed as `--name`).
    const source = await Deno.readTextFile(new URL(script[1], ROOT));
    const options = [...source.matchAll(/^\s+"?([a-z][\w-]*)"?: \{ type: "(?:string|boolean)"/gm)];
    return { name: script[1], help: options.map((m) => `--${m[1]}`).join(" ") };
  }
  return undefined;
}

Deno.test("docs: every flag a shell example passes to a Manifold command is in that command's --help", async () => {
  const problems: string[] = [];
  let checked = 0;
  for (const b of blocks().filter((b) => b.lang === "sh")) {
    // Join continuation lines: a command's flags may span several.
    const lines = b.text.replace(/\\\n\s*/g, " ").split("\n");
    for (const line of lines) {
      const found = await helpOf(line);
      if (!found) continue;
      const tail = line.slice(line.indexOf(found.name.split(" ").pop()!));
      for (const flag of flagsOf(tail)) {
        checked++;
        if (flag === "-A") continue; // deno's own
        const listed = new RegExp(`(^|[\\s,\\[(])${flag.replace(/-/g, "\\-")}\\b`).test(
          found.help,
        );
        if (!listed) problems.push(`${b.file}:${b.line}: ${found.name} has no ${flag}`);
      }
    }
  }
  assert.ok(checked >= 20, `${checked} flags checked`);
  assert.deepEqual(problems, []);
});

const suite = realApiSuite({
  extraArgs: [
    "--feature-gates=DynamicResourceAllocation=true",
    "--runtime-config=resource.k8s.io/v1beta1=true",
  ],
});

/** The plural and scope of `apiVersion`/`kind`, from the server's discovery. */
async function resourceOf(
  api: KubeApiServer,
  apiVersion: string,
  kind: string,
): Promise<{ plural: string; namespaced: boolean } | undefined> {
  const path = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  const r = await api.admin.raw("GET", path);
  if (r.status === 404) return undefined;
  const list = r.body as { resources?: { name: string; kind: string; namespaced: boolean }[] };
  const found = list.resources?.find((x) => x.kind === kind && !x.name.includes("/"));
  return found && { plural: found.name, namespaced: found.namespaced };
}

suite.test("docs: every YAML example is accepted by a server-side dry run (real kube-apiserver)", async (api) => {
  for (const crd of (await deployObjects()).filter((o) => o.kind === "CustomResourceDefinition")) {
    await api.admin.installCrd(crd);
  }
  let accepted = 0;
  const unserved: string[] = [];
  for (const b of blocks().filter((b) => b.lang === "yaml")) {
    for (const doc of parseAllDocuments(b.text)) {
      assert.deepEqual(doc.errors, [], `${b.file}:${b.line}`);
      const obj = doc.toJS();
      if (!obj) continue;
      const where = `${b.file}:${b.line} ${obj.kind}/${obj.metadata?.name}`;
      const res = await resourceOf(api, obj.apiVersion, obj.kind);
      if (!res) {
        unserved.push(`${where} (${obj.apiVersion} not served by this kube-apiserver)`);
        continue;
      }
      const ns = obj.metadata?.namespace ?? "default";
      if (res.namespaced) {
        // No controller-manager: a namespace and its `default` ServiceAccount are made here.
        await api.admin.createNamespace(ns).catch(() => {});
        await api.admin.ensure({
          apiVersion: "v1",
          kind: "ServiceAccount",
          metadata: { name: "default", namespace: ns },
        });
      }
      const prefix = obj.apiVersion.includes("/") ? `/apis/${obj.apiVersion}` : `/api/v1`;
      const path = `${prefix}${res.namespaced ? `/namespaces/${ns}` : ""}/${res.plural}`;
      const r = await api.admin.raw("POST", `${path}?dryRun=All&fieldValidation=Strict`, {
        body: obj,
      });
      assert.ok(r.status < 300, `${where}: ${r.status} ${JSON.stringify(r.body)}`);
      accepted++;
    }
  }
  if (unserved.length) console.log(`not dry-run here: ${unserved.join("; ")}`);
  assert.ok(accepted >= 5, `${accepted} objects accepted`);
});
suite.end();
