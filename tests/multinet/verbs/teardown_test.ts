/** Tests of lib/multinet/verbs/teardown.ts: the give-up bound (no permissions). */

import assert from "node:assert/strict";
import type { CachedAttachment } from "../../../lib/multinet/cache/cache.ts";
import type { ManifoldDeps } from "../../../lib/multinet/deps.ts";
import { CniError } from "../../../lib/cni/errors.ts";
import {
  GIVE_UP_AFTER_FAILED_DELS,
  GIVE_UP_AFTER_MS,
  giveUpExhausted,
  leakHint,
  neverRan,
  shouldGiveUp,
} from "../../../lib/multinet/verbs/teardown.ts";

const T0 = "2026-03-01T12:00:00.000Z";
const at = (ms: number) => new Date(Date.parse(T0) + ms);

function attachment(state: "adding" | "added", count?: number): CachedAttachment {
  return {
    statusName: "ns1/blue",
    isDefault: false,
    ifName: "net1",
    conflist: {
      cniVersion: "1.0.0",
      name: "blue",
      plugins: [{ type: "macvlan", ipam: { type: "host-local" } }, { type: "tuning" }],
    },
    capabilityArgs: {},
    cniArgs: [],
    state,
    deviceId: "0000:18:02.5",
    ...(count ? { delFailures: { count, firstAt: T0, lastError: "[ns1/p:ns1/blue] boom" } } : {}),
  };
}

Deno.test("shouldGiveUp: only unfinished ADDs, at the count or the time bound", () => {
  assert.equal(GIVE_UP_AFTER_FAILED_DELS, 3);
  assert.equal(GIVE_UP_AFTER_MS, 600_000);
  assert.equal(shouldGiveUp(attachment("adding"), at(GIVE_UP_AFTER_MS * 2)), false);
  assert.equal(shouldGiveUp(attachment("adding", 2), at(1000)), false);
  assert.equal(shouldGiveUp(attachment("adding", 3), at(1000)), true);
  assert.equal(shouldGiveUp(attachment("adding", 1), at(GIVE_UP_AFTER_MS - 1)), false);
  assert.equal(shouldGiveUp(attachment("adding", 1), at(GIVE_UP_AFTER_MS)), true);
  assert.equal(shouldGiveUp(attachment("added", 50), at(GIVE_UP_AFTER_MS * 10)), false);
});

Deno.test("leakHint names plugins, IPAM and the device", () => {
  assert.equal(
    leakHint(attachment("adding")),
    "plugins macvlan, tuning, ipam host-local, device 0000:18:02.5",
  );
  assert.equal(
    leakHint({ ...attachment("adding"), conflist: {}, deviceId: undefined }),
    "plugins ?",
  );
});

Deno.test("giveUpExhausted: splits, logs, sends one Warning event per given-up attachment", async () => {
  const logged: [string, Record<string, unknown>][] = [];
  const events: { reason: string; type: string; message: string }[] = [];
  let flushed = 0;
  const logger = {
    error: (msg: string, fields: Record<string, unknown>) => logged.push([msg, fields]),
    warn: () => {},
  };
  const deps = {
    env: { containerId: "c1" },
    logger,
    events: {
      emit: (_pod: unknown, ev: (typeof events)[0]) => events.push(ev),
      flush: () => Promise.resolve(void flushed++),
    },
  } as unknown as ManifoldDeps;
  const pod = { namespace: "ns1", name: "p", uid: "", infraContainerId: "c1" };
  const error = new CniError(999, "boom");
  const failures = [
    { attachment: attachment("added", 5), error },
    { attachment: attachment("adding", 1), error },
    { attachment: attachment("adding", 3), error },
  ];
  const { retry, abandoned } = await giveUpExhausted(deps, failures, { pod, now: at(1000) });
  assert.deepEqual(retry, failures.slice(0, 2));
  assert.deepEqual(abandoned, [failures[2].attachment]);
  assert.equal(events.length, 1);
  assert.equal(events[0].reason, "TeardownAbandoned");
  assert.equal(events[0].type, "Warning");
  assert.match(
    events[0].message,
    /\[ns1\/p:ns1\/blue\] gave up DEL of net1 .* 3 failed attempts .*macvlan/,
  );
  assert.equal(flushed, 1);
  assert.equal(logged.length, 1);
  assert.equal(
    logged[0][1].mayHaveLeaked,
    "plugins macvlan, tuning, ipam host-local, device 0000:18:02.5",
  );

  // Without a pod (non-Kubernetes runtime): logged, no event.
  const none = await giveUpExhausted(deps, failures.slice(2), { pod: undefined, now: at(1000) });
  assert.equal(none.abandoned.length, 1);
  assert.equal(events.length, 1);
});

Deno.test("neverRan: an unfinished attachment whose first plugin is not installed", () => {
  const notFound = (type: string) =>
    new CniError(7, `[ns1/p:ns1/blue] failed to find plugin "${type}" in path [/opt/cni/bin]`);
  const f = (state: "adding" | "added", error: CniError) => ({
    attachment: attachment(state, 1),
    error,
  });
  assert.equal(neverRan(f("adding", notFound("macvlan"))), true);
  // A later plugin missing: the first one ran at ADD and its DEL has not run yet.
  assert.equal(neverRan(f("adding", notFound("tuning"))), false);
  // A completed ADD ran its binary: keep retrying.
  assert.equal(neverRan(f("added", notFound("macvlan"))), false);
  // A delegate's own error about a binary it needs is not ours (code 999 from Go's skel).
  assert.equal(neverRan(f("adding", new CniError(999, notFound("macvlan").msg))), false);
  assert.equal(neverRan(f("adding", new CniError(7, "macvlan: master gone"))), false);
  // The same type later in the list: the failure may be the later one.
  const twice = {
    attachment: {
      ...attachment("adding", 1),
      conflist: { cniVersion: "1.0.0", name: "b", plugins: [{ type: "x" }, { type: "x" }] },
    },
    error: notFound("x"),
  };
  assert.equal(neverRan(twice), false);
  // A type with a quote in it, named as findPlugin names it (not JSON-escaped).
  const quoted = {
    attachment: {
      ...attachment("adding", 1),
      conflist: { cniVersion: "1.0.0", name: "q", plugins: [{ type: 'my"plugin' }] },
    },
    error: notFound('my"plugin'),
  };
  assert.equal(neverRan(quoted), true);
});

Deno.test("giveUpExhausted: a first plugin that is not installed is given up at the first failure", async () => {
  const logged: Record<string, unknown>[] = [];
  const events: { reason: string; message: string }[] = [];
  const deps = {
    env: { containerId: "c1" },
    logger: { error: (_m: string, fields: Record<string, unknown>) => logged.push(fields) },
    events: {
      emit: (_pod: unknown, ev: (typeof events)[0]) => events.push(ev),
      flush: () => Promise.resolve(),
    },
  } as unknown as ManifoldDeps;
  const pod = { namespace: "ns1", name: "p", uid: "", infraContainerId: "c1" };
  const error = new CniError(7, '[ns1/p:ns1/blue] failed to find plugin "macvlan" in path [/b]');
  const failures = [{ attachment: attachment("adding", 1), error }];
  const { retry, abandoned } = await giveUpExhausted(deps, failures, { pod, now: at(1000) });
  assert.deepEqual(retry, []);
  assert.deepEqual(abandoned, [failures[0].attachment]);
  assert.equal(events[0].reason, "TeardownAbandoned");
  assert.match(events[0].message, /gave up DEL of net1 \(its ADD never completed\) at once/);
  assert.equal(logged[0].mayHaveLeaked, "nothing (its first plugin is not installed)");
});
