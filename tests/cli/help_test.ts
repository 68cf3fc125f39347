/**
 * Tests of the CLI front door (main.ts `wantsHelp`, lib/cli/help.ts): `manifold --help`,
 * `help`, `-h`, and `manifold` on a terminal without `CNI_COMMAND` print the commands and the
 * CNI usage and exit 0, through the real process (scripts/manifold, as a person runs it);
 * without a terminal a missing `CNI_COMMAND` stays the plugin's code-4 error. The terminal is
 * a real pseudo-terminal from util-linux `script` when it is installed.
 */

import assert from "node:assert/strict";
import { VERSION, wantsHelp } from "../../main.ts";
import { manifoldHelp } from "../../lib/cli/help.ts";
import { SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";
import { MANIFOLD } from "../support/plugin.ts";

const PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Runs scripts/manifold with `args`, stdin from /dev/null (no terminal), no CNI_* variables. */
async function manifold(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(MANIFOLD, {
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
  for (const cmd of ["inspect", "explain", "doctor", "install", "mirror"]) {
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
