/** Label selectors: matchLabels AND matchExpressions, Kubernetes semantics for absent keys. */

import assert from "node:assert/strict";
import { matchesSelector } from "../../lib/k8s/label_selector.ts";

const labels = { app: "web", tier: "front" };

Deno.test("empty selector selects everything", () => {
  assert.ok(matchesSelector({}, {}));
  assert.ok(matchesSelector({ matchLabels: {}, matchExpressions: [] }, labels));
});

Deno.test("matchLabels: every pair must match", () => {
  assert.ok(matchesSelector({ matchLabels: { app: "web" } }, labels));
  assert.ok(!matchesSelector({ matchLabels: { app: "web", tier: "back" } }, labels));
  assert.ok(!matchesSelector({ matchLabels: { env: "" } }, labels), "absent ≠ empty value");
});

Deno.test("matchExpressions: In, NotIn, Exists, DoesNotExist", () => {
  const m = (
    operator: "In" | "NotIn" | "Exists" | "DoesNotExist",
    key: string,
    values?: string[],
  ) => matchesSelector({ matchExpressions: [{ key, operator, values }] }, labels);
  assert.ok(m("In", "app", ["db", "web"]));
  assert.ok(!m("In", "app", ["db"]));
  assert.ok(!m("In", "env", ["prod"]), "In needs the key");
  assert.ok(m("NotIn", "app", ["db"]));
  assert.ok(!m("NotIn", "app", ["web"]));
  assert.ok(m("NotIn", "env", ["prod"]), "NotIn holds for an absent key");
  assert.ok(m("Exists", "tier"));
  assert.ok(!m("Exists", "env"));
  assert.ok(m("DoesNotExist", "env"));
  assert.ok(!m("DoesNotExist", "app"));
});

Deno.test("matchLabels and matchExpressions are ANDed", () => {
  const sel = {
    matchLabels: { app: "web" },
    matchExpressions: [{ key: "tier", operator: "In" as const, values: ["back"] }],
  };
  assert.ok(!matchesSelector(sel, labels));
  assert.ok(matchesSelector(sel, { app: "web", tier: "back" }));
});
