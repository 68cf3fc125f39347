/**
 * Tests of lib/cni/env.ts: CNI environment validation (CNI SPEC 1.1 "Parameters",
 * libcni skel and `pkg/utils`) and the CNI_ARGS codec. Pure.
 */

import assert from "node:assert/strict";
import {
  formatCniArgs,
  parseCniArgs,
  parseCniEnv,
  validateContainerId,
  validateInterfaceName,
} from "../../lib/cni/env.ts";
import { CniError } from "../../lib/cni/errors.ts";

const FULL = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "3f6940ab5ab43bc5",
  CNI_NETNS: "/var/run/netns/cni-1",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAME=web",
  CNI_PATH: "/opt/cni/bin::/usr/lib/cni",
};

function envError(env: Record<string, string | undefined>): CniError {
  try {
    parseCniEnv(env);
  } catch (err) {
    assert.ok(err instanceof CniError);
    return err;
  }
  assert.fail("expected an error");
}

Deno.test("parseCniEnv: a complete ADD environment", () => {
  assert.deepEqual(parseCniEnv(FULL), {
    command: "ADD",
    containerId: "3f6940ab5ab43bc5",
    netns: "/var/run/netns/cni-1",
    ifName: "eth0",
    args: "IgnoreUnknown=1;K8S_POD_NAME=web",
    argPairs: [["IgnoreUnknown", "1"], ["K8S_POD_NAME", "web"]],
    path: ["/opt/cni/bin", "/usr/lib/cni"],
  });
});

Deno.test("parseCniEnv: one error naming every missing variable", () => {
  const err = envError({ CNI_COMMAND: "ADD" });
  assert.equal(err.code, 4);
  for (const v of ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"]) {
    assert.match(err.msg, new RegExp(v));
    assert.match(err.details, new RegExp(`${v} is missing`));
  }
  assert.doesNotMatch(err.msg, /CNI_ARGS/);
});

Deno.test("parseCniEnv: missing and invalid variables are aggregated", () => {
  const err = envError({
    CNI_COMMAND: "CHECK",
    CNI_CONTAINERID: "bad id!",
    CNI_IFNAME: "much-too-long-name0",
    CNI_ARGS: "novalue",
    CNI_PATH: "/opt/cni/bin",
  });
  assert.equal(err.code, 4);
  assert.equal(
    err.msg,
    "invalid CNI environment variables [CNI_NETNS,CNI_CONTAINERID,CNI_IFNAME,CNI_ARGS]",
  );
  assert.equal(err.details.split("\n").length, 4);
});

Deno.test("parseCniEnv: DEL may omit CNI_NETNS", () => {
  const env = parseCniEnv({ ...FULL, CNI_COMMAND: "DEL", CNI_NETNS: undefined });
  assert.equal(env.command, "DEL");
  assert.equal(env.netns, "");
  assert.match(envError({ ...FULL, CNI_COMMAND: "DEL", CNI_IFNAME: "" }).msg, /CNI_IFNAME/);
});

Deno.test("parseCniEnv: GC and STATUS need only CNI_PATH", () => {
  for (const command of ["GC", "STATUS"]) {
    const env = parseCniEnv({ CNI_COMMAND: command, CNI_PATH: "/opt/cni/bin" });
    assert.equal(env.command, command);
    assert.equal(env.containerId, "");
    assert.deepEqual(env.path, ["/opt/cni/bin"]);
    const err = envError({ CNI_COMMAND: command });
    assert.match(err.msg, /\[CNI_PATH\]/);
    // Unused variables are not validated.
    parseCniEnv({ CNI_COMMAND: command, CNI_PATH: "/x", CNI_IFNAME: "bad/name" });
  }
});

Deno.test("parseCniEnv: VERSION needs only CNI_COMMAND", () => {
  const env = parseCniEnv({ CNI_COMMAND: "VERSION" });
  assert.equal(env.command, "VERSION");
  assert.deepEqual(env.path, []);
});

Deno.test("parseCniEnv: missing or unknown command → code 4", () => {
  const missing = envError({});
  assert.equal(missing.code, 4);
  assert.match(missing.msg, /CNI_COMMAND/);
  const unknown = envError({ ...FULL, CNI_COMMAND: "add" });
  assert.equal(unknown.code, 4);
  assert.match(unknown.details, /unknown/);
});

Deno.test("validateInterfaceName: kernel rules", () => {
  for (const ok of ["eth0", "net1", "a", "x".repeat(15), "vlan.100", "br-0_x"]) {
    validateInterfaceName(ok);
  }
  for (const bad of ["", ".", "..", "a/b", "a:b", "a b", "tab\tx", "x".repeat(16), "ééééééééé"]) {
    assert.throws(
      () => validateInterfaceName(bad),
      (e) => e instanceof CniError && e.code === 4,
      JSON.stringify(bad),
    );
  }
});

Deno.test("validateContainerId: libcni charset", () => {
  validateContainerId("3f6940ab5ab43bc522569d15b23f8c1bbde1d7678b080398506924fc01d72755");
  validateContainerId("pod_1.a-b");
  assert.throws(() => validateContainerId(""), (e) => e instanceof CniError && e.code === 3);
  for (const bad of ["-x", ".x", "a/b", "a b", "a;b"]) {
    assert.throws(() => validateContainerId(bad), (e) => e instanceof CniError && e.code === 4);
  }
});

Deno.test("parseCniArgs / formatCniArgs", () => {
  assert.deepEqual(parseCniArgs(""), []);
  assert.deepEqual(parseCniArgs("A=1;B=;C=x=y;"), [["A", "1"], ["B", ""], ["C", "x=y"]]);
  for (const bad of ["A", "=1", "A=1;B"]) {
    assert.throws(() => parseCniArgs(bad), (e) => e instanceof CniError && e.code === 4);
  }
  const pairs: [string, string][] = [["IgnoreUnknown", "1"], ["K8S_POD_NAMESPACE", "default"]];
  assert.equal(formatCniArgs(pairs), "IgnoreUnknown=1;K8S_POD_NAMESPACE=default");
  assert.deepEqual(parseCniArgs(formatCniArgs(pairs)), pairs);
  assert.equal(formatCniArgs([]), "");
  assert.throws(() => formatCniArgs([["A;B", "1"]]), (e) => e instanceof CniError && e.code === 4);
  assert.throws(() => formatCniArgs([["A", "1;2"]]), (e) => e instanceof CniError && e.code === 4);
});
