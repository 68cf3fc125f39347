/**
 * Tests of the CLI front door (main.ts `wantsHelp`, lib/cli/help.ts): `manifold --help`,
 * `help`, `-h`, and `manifold` on a terminal without `CNI_COMMAND` print the commands and the
 * CNI usage and exit 0, through the real process (scripts/manifold, as a person runs it);
 * without a terminal a missing `CNI_COMMAND` stays the plugin's code-4 error. The terminal is
 * a real pseudo-terminal from util-linux `script` when it is installed.
 */

import assert from "node:assert/strict";
import { VERSION } from "../../main.ts";
import { wantsHelp } from "../../lib/cli/entry.ts";
import { manifoldHelp } from "../../lib/cli/help.ts";
import { SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";
import { MANIFOLD } from "../support/plugin.ts";

const PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * Runs scripts/manifold (or `binary`, e.g. a symlink to it) with `args`, stdin from /dev/null (no
 * terminal), no CNI_* variables.
 */
async function manifold(args: string[], env: Record<string, string> = {}, binary = MANIFOLD) {
  const out = await new Deno.Command(binary, {
    args,
    clearEnv: true,
    env: { PATH, ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

function assertHelp(text: string): void {
  assert.match(text, new RegExp(`^manifold ${VERSION.replaceAll(".", "\\.")}: `));
  assert.ok(text.includes(SUPPORTED_VERSIONS.join(", ")), text);
  for (const cmd of ["inspect", "explain", "doctor", "install", "mirror", "daemon", "controller"]) {
    assert.match(text, new RegExp(`\\n  manifold ${cmd} `), `${cmd} listed`);
  }
  assert.match(text, /CNI_COMMAND=ADD\|DEL\|CHECK\|GC\|STATUS\|VERSION/);
}

Deno.test("wantsHelp: help words always; no arguments only on a terminal without CNI_COMMAND", () => {
  const tty = () => true;
  const pipe = () => false;
  for (const word of ["--help", "-h", "help"]) {
    assert.equal(wantsHelp([word], undefined, pipe), true, word);
    assert.equal(wantsHelp([word], "ADD", pipe), true, word);
  }
  assert.equal(wantsHelp([], undefined, tty), true);
  assert.equal(wantsHelp([], "", tty), true, "an empty CNI_COMMAND is unset");
  assert.equal(wantsHelp([], undefined, pipe), false, "a runtime's pipes: plugin mode");
  assert.equal(wantsHelp([], "VERSION", tty), false, "CNI_COMMAND set: plugin mode");
  assert.equal(wantsHelp(["inspect"], undefined, tty), false);
  let asked = false;
  wantsHelp([], "ADD", () => (asked = true));
  assert.equal(asked, false, "the terminal is not queried in plugin mode");
});

Deno.test("manifoldHelp: name, version, CNI versions, every subcommand", () => {
  assertHelp(manifoldHelp(VERSION));
});

Deno.test("manifold --help, help, -h: the help text on stdout, exit 0 (real process)", async () => {
  for (const word of ["--help", "help", "-h"]) {
    const r = await manifold([word]);
    assert.equal(r.code, 0, `${word}: ${r.stderr}`);
    assertHelp(r.stdout);
    assert.equal(r.stderr, "");
  }
});

Deno.test("manifold without CNI_COMMAND and without a terminal: the code-4 error JSON (real process)", async () => {
  const r = await manifold([]);
  assert.equal(r.code, 1, r.stderr);
  const err = JSON.parse(r.stdout);
  assert.equal(err.code, 4);
  assert.match(err.msg, /CNI_COMMAND/);
});

const haveScript = (() => {
  try {
    return Deno.statSync("/usr/bin/script").isFile;
  } catch {
    return false;
  }
})();

Deno.test({
  name: "manifold on a terminal without CNI_COMMAND: the help text, exit 0 (real process, pty)",
  ignore: !haveScript,
  async fn() {
    // script(1) gives the child a pseudo-terminal as stdin/stdout; -e returns its exit code.
    const out = await new Deno.Command("/usr/bin/script", {
      args: ["-qec", MANIFOLD, "/dev/null"],
      clearEnv: true,
      env: { PATH, TERM: "dumb" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout).replaceAll("\r\n", "\n");
    assert.equal(out.code, 0, text);
    assertHelp(text);
  },
});

/** Runs `name` (a symlink to scripts/manifold made in a scratch directory) with `args`. */
async function asInstalled(name: string, args: string[], env: Record<string, string> = {}) {
  const dir = await Deno.makeTempDir({ prefix: "mf-argv0-" });
  try {
    await Deno.symlink(MANIFOLD, `${dir}/${name}`);
    return await manifold(args, env, `${dir}/${name}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("every subcommand of main.ts's table answers --help with its usage and exit codes (real process)", async () => {
  const { COMMANDS } = await import("../../main.ts");
  for (const name of Object.keys(COMMANDS)) {
    const r = await manifold([name, "--help"]);
    assert.equal(r.code, 0, `${name}: ${r.stderr}`);
    assert.match(r.stdout, new RegExp(`Usage:[\\s\\S]*manifold ${name}`), name);
    assert.match(r.stdout, /Exit codes: 0 /, `${name} lists its exit codes`);
    assert.match(manifoldHelp(VERSION), new RegExp(`\\n  manifold ${name} `), `${name} in help`);
  }
});

Deno.test("a person's unknown command: exit 2, the help on stderr (not the plugin's code-4 JSON)", async () => {
  const r = await manifold(["explian"]);
  assert.equal(r.code, 2);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, /^manifold: unknown command "explian"\n\nmanifold /);
});

Deno.test("kubectl-manifold (argv[0]) is a kubectl plugin: its help, its commands, kubectl's kubeconfig", async () => {
  let r = await asInstalled("kubectl-manifold", []);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^kubectl manifold \(manifold /);
  assert.match(r.stdout, /kubectl manifold explain POD -n NAMESPACE/);
  r = await asInstalled("kubectl-manifold", ["install", "--help"]);
  assert.equal(r.code, 2, "node-only commands are not kubectl's");
  assert.match(r.stderr, /^kubectl manifold: unknown command "install"/);
  r = await asInstalled("kubectl-manifold", ["explain", "--help"]);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /manifold explain POD \[-n NAMESPACE\]/);
  // The kubeconfig is kubectl's ~/.kube/config; `manifold` itself never reads it.
  const home = await Deno.makeTempDir({ prefix: "mf-home-" });
  try {
    await Deno.mkdir(`${home}/.kube`);
    await Deno.writeTextFile(`${home}/.kube/config`, "apiVersion: v1\nkind: Config\nclusters: 7\n");
    const conf = `${home}/00-manifold.conflist`;
    await Deno.writeTextFile(
      conf,
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "m",
        plugins: [{ type: "manifold", clusterNetwork: `${home}/10-x.conflist` }],
      }),
    );
    const args = ["explain", "web-0", "-n", "ns1", "--config", conf];
    // Deno's own cache stays where it is (it defaults to $HOME/.cache/deno).
    const denoDir = Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME")}/.cache/deno`;
    r = await asInstalled("kubectl-manifold", args, { HOME: home, DENO_DIR: denoDir });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`${home}/\\.kube/config`), r.stderr);
    r = await asInstalled("manifold", args, { HOME: home, DENO_DIR: denoDir });
    assert.equal(r.code, 1);
    assert.doesNotMatch(r.stderr, /\.kube\/config/, r.stderr);
    assert.match(r.stderr, /a pod needs the Kubernetes API/, r.stderr);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("manifold daemon: --config names the config; --conf is accepted with a deprecation line", async () => {
  const missing = "/nonexistent/manifold-daemon.conflist";
  let r = await manifold(["daemon", "--config", missing]);
  assert.equal(r.code, 1, r.stderr);
  assert.doesNotMatch(r.stderr, /deprecated/);
  assert.match(r.stderr, /nonexistent\/manifold-daemon\.conflist/);
  // A missing file is waited for (the installer writes it); a missing directory is an error.
  assert.match(r.stderr, /the directory \/nonexistent does not exist/);
  r = await manifold(["daemon", "--conf", missing]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /^manifold daemon: --conf is deprecated; use --config PATH\n/);
  r = await manifold(["daemon", "--conf", missing, "--config", missing]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--conf is the old spelling of --config: give one of them/);
  r = await manifold(["daemon"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--config is required/);
});
