import assert from "node:assert/strict";
import { eventPolicy } from "../../lib/multinet/wiring.ts";
import type { EventSink } from "../../lib/multinet/deps.ts";

function recorder(): EventSink & { sent: string[]; flushed: number } {
  const r = {
    sent: [] as string[],
    flushed: 0,
    emit(_pod: unknown, ev: { reason: string }) {
      r.sent.push(ev.reason);
    },
    flush() {
      r.flushed++;
      return Promise.resolve();
    },
  };
  return r;
}

Deno.test("eventPolicy: all sends everything, warnings only Warning events, none nothing", async () => {
  const pod = { namespace: "ns", name: "p", uid: "u", infraContainerId: "c" };
  const events = [
    { reason: "AddedInterface", message: "m", type: "Normal" as const },
    { reason: "InterfaceMismatch", message: "m", type: "Warning" as const },
  ];
  for (
    const [policy, want] of [
      ["all", ["AddedInterface", "InterfaceMismatch"]],
      ["warnings", ["InterfaceMismatch"]],
      ["none", []],
    ] as const
  ) {
    const sink = recorder();
    const filtered = eventPolicy(policy, sink);
    for (const ev of events) filtered.emit(pod, ev);
    await filtered.flush();
    assert.deepEqual(sink.sent, want, policy);
    assert.equal(sink.flushed, 1);
  }
});
