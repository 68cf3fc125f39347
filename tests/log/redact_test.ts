/**
 * Tests of lib/log/redact.ts: secrets under well-known keys at any depth and inside text
 * (embedded JSON, escaped JSON, YAML, key=value, Authorization headers, JWTs, PEM keys)
 * never survive redaction; ordinary fields do; and a failing delegate's echoed secrets are
 * masked in the error lib/cni/invoke.ts makes of it. Pure.
 */

import assert from "node:assert/strict";
import { invokePlugin } from "../../lib/cni/invoke.ts";
import { execResponse, RecordingPluginExec } from "../../lib/cni/exec_fake.ts";
import { isSecretKey, redact, REDACTED, redactText } from "../../lib/log/redact.ts";

const TOKEN = "standin-5b1f3c7e-8a2d-4e0f-9c1b-2d3e4f5a6b7c";
const PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAwX1yZ\nabcDEF==\n" +
  "-----END RSA PRIVATE KEY-----";
const JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLXBhcnQ";

Deno.test("isSecretKey: known names, spellings and endings; paths are not secrets", () => {
  for (
    const k of [
      "token",
      "Token",
      "bearer",
      "password",
      "passwd",
      "secret",
      "key",
      "keyData",
      "kubeconfig",
      "kubeconfigContent",
      "authorization",
      "client-key-data",
      "client_key",
      "clientKey",
      "client-certificate-data",
      "privateKey",
      "private-key",
      "tls.key",
      "access_token",
      "refreshToken",
      "id-token",
      "client-secret",
      "apiKey",
      "api_key",
      "credentials",
    ]
  ) assert.ok(isSecretKey(k), k);
  for (
    const k of ["tokenFile", "name", "type", "path", "ifName", "msg", "error", "keys", "mode", ""]
  ) assert.ok(!isSecretKey(k), k);
});

Deno.test("redact: secret keys at any depth, arrays included; other fields untouched", () => {
  const input = {
    msg: "x",
    token: TOKEN,
    nested: [{ password: "hunter2", ok: 1 }, { kubeconfig: { users: [{ token: TOKEN }] } }],
    ipam: { type: "host-local", "client-key-data": "QUJD" },
    empty: { token: "" },
  };
  assert.deepEqual(redact(input), {
    msg: "x",
    token: REDACTED,
    nested: [{ password: REDACTED, ok: 1 }, { kubeconfig: REDACTED }],
    ipam: { type: "host-local", "client-key-data": REDACTED },
    empty: { token: "" },
  });
  assert.equal(input.token, TOKEN, "the input is not modified");
});

Deno.test("redact: __proto__ keys stay data; depth is capped", () => {
  const v = JSON.parse('{"__proto__":{"token":"x"}}');
  const out = redact(v) as Record<string, unknown>;
  assert.ok(Object.hasOwn(out, "__proto__"));
  assert.equal(JSON.stringify(out), '{"__proto__":{"token":"[redacted]"}}');
  let deep: unknown = "leaf";
  for (let i = 0; i < 100; i++) deep = [deep];
  assert.ok(JSON.stringify(redact(deep)).includes("[too deep]"));
});

Deno.test("redactText: headers, JWTs and PEM private keys", () => {
  assert.equal(redactText(`got Bearer ${TOKEN}`), `got Bearer ${REDACTED}`);
  assert.equal(redactText(`Authorization: Bearer ${TOKEN}`), `Authorization: ${REDACTED}`);
  assert.equal(redactText("basic: Basic dXNlcjpwYXNz"), `basic: Basic ${REDACTED}`);
  assert.equal(redactText(`got ${JWT} back`), `got ${REDACTED} back`);
  assert.equal(redactText(`key:\n${PEM}\nrest`), `key:\n${REDACTED}\nrest`);
  const cut = "-----BEGIN PRIVATE KEY-----\nMIIEowIBAAKCAQEAwX1yZ"; // clipped in an error
  assert.equal(redactText(`x ${cut}`), `x ${REDACTED}`);
  assert.equal(
    redactText("-----BEGIN CERTIFICATE-----\nMIIB\n"),
    "-----BEGIN CERTIFICATE-----\nMIIB\n",
  );
});

Deno.test("redactText: JSON members inside text, also escaped JSON inside JSON", () => {
  const config = JSON.stringify({ type: "bridge", password: 'p"w', token: TOKEN, name: "n" });
  const out = redactText(`plugin failed: ${config}`);
  assert.equal(
    out,
    `plugin failed: {"type":"bridge","password":"${REDACTED}","token":"${REDACTED}","name":"n"}`,
  );
  const twice = JSON.stringify({ config }); // {"config":"{\"type\":…,\"token\":\"…\"}"}
  const out2 = redactText(twice);
  assert.ok(!out2.includes(TOKEN) && !out2.includes('p\\\\\\"w'), out2);
  assert.ok(out2.includes(`\\"token\\":\\"${REDACTED}\\"`), out2);
});

Deno.test("redactText: YAML lines and key=value pairs", () => {
  const kubeconfig = [
    "apiVersion: v1",
    "users:",
    "- name: manifold",
    "  user:",
    `    token: ${TOKEN}`,
    "    client-key-data: QUJDREVG",
    "    tokenFile: /etc/token",
  ].join("\n");
  const out = redactText(kubeconfig);
  assert.ok(!out.includes(TOKEN) && !out.includes("QUJDREVG"), out);
  assert.ok(out.includes(`    token: ${REDACTED}`));
  assert.ok(out.includes("tokenFile: /etc/token"), "paths stay");
  assert.equal(
    redactText(`IgnoreUnknown=1;K8S_POD_NAME=web;password=${TOKEN}`),
    `IgnoreUnknown=1;K8S_POD_NAME=web;password=${REDACTED}`,
  );
  assert.equal(redactText("invalid token: expired"), "invalid token: expired");
});

Deno.test("redact: strings in any field go through redactText", () => {
  const out = JSON.stringify(redact({
    error: `{"cniVersion":"1.0.0","token":"${TOKEN}"}`,
    details: [`Bearer ${TOKEN}`],
    err: new Error(`bad config {"password":"${TOKEN}"}`),
  }));
  assert.ok(!out.includes(TOKEN), out);
});

Deno.test("invokePlugin: secrets a failing delegate echoes are masked in its error", async () => {
  const config = JSON.stringify({ type: "leaky", token: TOKEN, ipam: { password: "hunter2" } });
  const answers = [
    execResponse({ code: 1, stdout: { code: 7, msg: `bad ${config}`, details: config } }),
    execResponse({ code: 1, stderr: `cannot use ${config}` }),
    execResponse({ code: 1, stdout: `not json ${config}`, stderr: PEM }),
  ];
  for (const answer of answers) {
    const exec = new RecordingPluginExec(() => answer);
    await assert.rejects(
      invokePlugin(exec, "/x/leaky", {}, { command: "ADD", path: ["/x"], timeoutMs: 1000 }),
      (e) => {
        const text = JSON.stringify(e) + String((e as Error).message);
        assert.ok(!text.includes(TOKEN) && !text.includes("hunter2"), text);
        assert.ok(!text.includes("MIIEowIBAAKCAQEAwX1yZ"), text);
        assert.ok(text.includes(REDACTED), text);
        return true;
      },
    );
  }
});
