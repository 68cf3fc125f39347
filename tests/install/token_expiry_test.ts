/**
 * Tests of lib/install/token_expiry.ts (when a service-account token is due, from its JWT
 * claims) and of what the installer does with it and with the copy's permissions: a token
 * kubelet stopped replacing (ServiceAccount deleted) is warned about once, and a copy with the
 * right bytes but wider permissions is replaced. In-process installer on a fake host root,
 * polling every 15 ms; no root needed; every wait is bounded.
 */

import assert from "node:assert/strict";
import { runInstaller, tokenDue } from "../../lib/install/mod.ts";
import type { Logger } from "../../lib/log/mod.ts";
import { type FakeHost, fakeHost, flannelConflist, readIf, waitFor } from "./fixtures.ts";

/** A JWT-shaped token (unsigned: the installer never verifies, only the API server can). */
function jwt(payload: Record<string, unknown>): string {
  const b64url = (s: string) =>
    btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
  return [
    b64url(JSON.stringify({ alg: "RS256", kid: "k" })),
    b64url(JSON.stringify(payload)),
    "c2ln",
  ].join(".");
}

const NOW_S = () => Math.floor(Date.now() / 1000);

Deno.test("tokenDue: exp, or kubernetes.io.warnafter of an extended token; nothing for anything else", () => {
  const t = tokenDue(jwt({ iat: 1_700_000_000, exp: 1_700_000_600, sub: "x" }));
  assert.deepEqual(t, {
    due: new Date(1_700_000_600_000),
    claim: "exp",
    expires: new Date(1_700_000_600_000),
    issuedAt: new Date(1_700_000_000_000),
  });
  // The API server signed a 3607 s request for a year: kubelet's lifetime is warnafter.
  const ext = tokenDue(
    `  ${
      jwt({
        iat: 1_700_000_000,
        exp: 1_731_536_000,
        "kubernetes.io": { namespace: "kube-system", warnafter: 1_700_003_607 },
      })
    }\n`,
  );
  assert.equal(ext?.claim, "warnafter");
  assert.equal(ext?.due.getTime(), 1_700_003_607_000);
  assert.equal(ext?.expires.getTime(), 1_731_536_000_000, "the server accepts it until exp");
  assert.equal(tokenDue(jwt({ exp: 5 }))?.issuedAt, undefined);
  for (
    const opaque of [
      "0123456789abcdef0123456789abcdef", // a static token
      "a.b", // two parts
      "a.!!!.c", // not base64url
      `x.${btoa("not json")}.y`,
      jwt({ iat: 1 }), // no exp
      jwt({ exp: "1700000000" }), // exp not a NumericDate
      jwt({ exp: 1, "kubernetes.io": { warnafter: "soon" } }),
      "",
    ]
  ) {
    assert.equal(tokenDue(opaque), undefined, opaque);
  }
});

interface Line {
  level: string;
  msg: string;
  fields?: Record<string, unknown>;
}

function recordingLogger(lines: Line[]): Logger {
  const rec = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void lines.push({ level, msg, fields });
  const l: Logger = {
    debug: rec("debug"),
    info: rec("info"),
    warn: rec("warn"),
    error: rec("error"),
    with: () => l,
  };
  return l;
}

function start(h: FakeHost) {
  const ac = new AbortController();
  const lines: Line[] = [];
  const run = runInstaller({
    hostRoot: h.root,
    binary: h.binary,
    kubeconfig: { server: "https://10.96.0.1:443", serviceAccountDir: h.saDir },
    pollIntervalMs: 15,
    primaryTimeoutMs: 10_000,
    logger: recordingLogger(lines),
    signal: ac.signal,
  });
  run.catch(() => {});
  return {
    lines,
    async stop() {
      ac.abort();
      return await run;
    },
  };
}

const expiredWarnings = (lines: Line[]) =>
  lines.filter((l) => l.level === "warn" && /token has expired/.test(l.msg));

/** Lets the installer poll a few more times (15 ms period). */
const somePolls = () => new Promise((r) => setTimeout(r, 200));

Deno.test("an expired token kubelet did not replace: one warning per token, none for a current one", async () => {
  const h = await fakeHost();
  const mirror = `${h.confDir}/manifold.d/token`;
  // kubelet wrote this token 20 min ago with a 10 min lifetime and has not replaced it since.
  const staleExp = NOW_S() - 600;
  const stale = jwt({ iat: staleExp - 600, exp: staleExp });
  await Deno.writeTextFile(`${h.saDir}/token`, stale);
  await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
  const inst = start(h);
  try {
    await waitFor("the expired token warning", () => expiredWarnings(inst.lines).length > 0);
    await somePolls();
    const warned = expiredWarnings(inst.lines);
    assert.equal(warned.length, 1, "once, not every poll");
    assert.equal(warned[0].fields?.tokenFile, "/etc/cni/net.d/manifold.d/token");
    assert.equal(warned[0].fields?.expiredAt, new Date(staleExp * 1000).toISOString());
    assert.equal(warned[0].fields?.claim, "exp");
    assert.equal(warned[0].fields?.acceptedUntil, warned[0].fields?.expiredAt);
    assert.ok(!JSON.stringify(warned[0]).includes(stale), "the token itself is never logged");
    assert.equal(await readIf(mirror), stale, "still mirrored: the plugin has nothing better");

    // kubelet rotates again: a current token, no warning; then that one expires too.
    const fresh = jwt({ iat: NOW_S(), exp: NOW_S() + 600 });
    await Deno.writeTextFile(`${h.saDir}/.t`, fresh);
    await Deno.rename(`${h.saDir}/.t`, `${h.saDir}/token`);
    await waitFor("fresh token mirrored", async () => (await readIf(mirror)) === fresh);
    await somePolls();
    assert.equal(expiredWarnings(inst.lines).length, 1);
    const later = jwt({ iat: NOW_S() - 900, exp: NOW_S() - 1 });
    await Deno.writeTextFile(`${h.saDir}/.t`, later);
    await Deno.rename(`${h.saDir}/.t`, `${h.saDir}/token`);
    await waitFor("second warning", () => expiredWarnings(inst.lines).length === 2);

    // An opaque (non-JWT) token says nothing about its lifetime: no warning.
    await Deno.writeTextFile(`${h.saDir}/.t`, "opaque-static-token");
    await Deno.rename(`${h.saDir}/.t`, `${h.saDir}/token`);
    await waitFor("opaque mirrored", async () => (await readIf(mirror)) === "opaque-static-token");
    await somePolls();
    assert.equal(expiredWarnings(inst.lines).length, 2);
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});

Deno.test("a token copy with the right bytes but mode 0644 is replaced by a 0600 one", async () => {
  const h = await fakeHost();
  const mirror = `${h.confDir}/manifold.d/token`;
  await Deno.mkdir(`${h.confDir}/manifold.d`, { mode: 0o755 });
  await Deno.writeTextFile(mirror, "token-one"); // what the service-account dir holds
  await Deno.chmod(mirror, 0o644);
  await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
  const inst = start(h);
  try {
    await waitFor(
      "token copy 0600",
      async () => (await Deno.stat(mirror)).mode! % 0o1000 === 0o600,
    );
    assert.equal(await readIf(mirror), "token-one");
    // Someone widens it later: the next poll narrows it again.
    await Deno.chmod(mirror, 0o640);
    await waitFor("0600 again", async () => (await Deno.stat(mirror)).mode! % 0o1000 === 0o600);
  } finally {
    await inst.stop().catch(() => {});
    await h.cleanup();
  }
});
