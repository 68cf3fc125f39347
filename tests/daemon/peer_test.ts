/**
 * The daemon's peer check (issue 20 §5): requests are served only from root (SO_PEERCRED).
 * The socket is made reachable on purpose (a misconfigured mode) and a client running as
 * `nobody` (python3 under `setpriv`) is refused with an error naming its uid and pid, which the
 * daemon logs. Needs root.
 */

import assert from "node:assert/strict";
import { frame } from "../../lib/daemon/protocol.ts";
import { decodeAnswer, rawExchange, startDaemon } from "../support/daemon.ts";
import { isRoot } from "../support/netns.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

/** Connects as uid/gid 65534, sends `request`, prints the framed answer as hex. */
const CLIENT = `
import socket, sys, os
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(bytes.fromhex(sys.argv[2]))
out = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    out += b
print(os.getpid(), out.hex())
`;

function hex(bytes: Uint8Array): string {
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("daemon peer check: a client that is not root is refused and logged", root, async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-peer-" });
  const d = await startDaemon(dir, {
    cniVersion: "1.1.0",
    name: "manifold-net",
    type: "manifold",
    delegates: [{ cniVersion: "1.0.0", name: "lo", type: "loopback" }],
    cniDir: `${dir}/cache`,
  });
  try {
    const enc = new TextEncoder();
    const h = frame(enc.encode(JSON.stringify({ v: 1, env: { CNI_COMMAND: "VERSION" } })));
    const req = new Uint8Array([...h, ...frame(enc.encode("{}"))]);
    assert.equal(decodeAnswer(await rawExchange(d.socket, req))?.code, 0, "root is served");

    // The kernel's own gate (directory 0700, socket 0600) opened by a mistaken chmod.
    await Deno.chmod(dir, 0o711);
    await Deno.chmod(`${dir}/run`, 0o711);
    await Deno.chmod(d.socket, 0o666);
    const out = await new Deno.Command("setpriv", {
      args: [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "/usr/bin/python3",
        "-c",
        CLIENT,
        d.socket,
        hex(req),
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout).trim();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const [pid, answerHex] = text.split(" ");
    const bytes = new Uint8Array(answerHex.match(/../g)!.map((b) => parseInt(b, 16)));
    const answer = decodeAnswer(bytes);
    assert.equal(answer?.code, 1, String(answer?.stdout));
    const err = JSON.parse(answer!.stdout);
    assert.match(err.msg, new RegExp(`from root only; this client is uid 65534 \\(pid ${pid}\\)`));

    const stderr = (d.kill("SIGKILL"), (await d.exited()).stderr);
    const line = stderr.split("\n").find((l) => l.includes("the client is not root"));
    assert.ok(line, stderr);
    assert.equal(JSON.parse(line).uid, 65534);
    assert.equal(JSON.parse(line).pid, Number(pid));
  } finally {
    d.kill("SIGKILL");
    await d.exited();
    await Deno.remove(dir, { recursive: true });
  }
});
