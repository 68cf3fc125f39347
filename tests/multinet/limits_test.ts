/**
 * Tests of the input caps of lib/multinet: JSON nesting depth of the selection annotation
 * (lib/multinet/plan/selection.ts) and of NAD `spec.config`, and the NAD `spec.config` size cap
 * (lib/multinet/plan/resolve.ts). Pure, except the confDir test (temp dir:
 * `--allow-read --allow-write`), which is skipped without those permissions.
 */

import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../lib/cni/errors.ts";
import type { NetworkAttachmentDefinition } from "../../lib/k8s/types.ts";
import { StaticNadSource } from "../../lib/multinet/nad/source.ts";
import {
  MAX_NAD_CONFIG_BYTES,
  resolveClusterNetwork,
  resolveNetwork,
  type ResolveOptions,
} from "../../lib/multinet/plan/resolve.ts";
import {
  MAX_SELECTION_ANNOTATION_BYTES,
  MAX_SELECTION_DEPTH,
  parseNetworkSelection,
} from "../../lib/multinet/plan/selection.ts";

function nested(depth: number): string {
  return "[".repeat(depth) + "]".repeat(depth);
}

function caught(fn: () => unknown): CniError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof CniError, `expected a CniError, got ${err}`);
    return err;
  }
  assert.fail("expected a CniError");
}

async function rejected(p: Promise<unknown>): Promise<CniError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof CniError, `expected a CniError, got ${err}`);
    return err;
  }
  assert.fail("expected a CniError");
}

// ---------------------------------------------------------------- selection annotation

/** A one-element annotation whose `cni-args` holds `deep` under "x". */
function annotation(deep: string): string {
  return `[{"name":"net-a","cni-args":{"x":${deep}}}]`;
}

Deno.test("selection: nesting up to 64 levels is accepted, deeper is code 7 naming the limit", () => {
  assert.equal(MAX_SELECTION_DEPTH, 64);
  // list (1) → element (2) → cni-args (3) → x: 61 more levels = 64.
  const [el] = parseNetworkSelection(annotation(nested(61)), "ns");
  assert.equal(el.name, "net-a");
  for (const depth of [62, 2_500, 80_000]) {
    const text = annotation(nested(depth));
    assert.ok(new TextEncoder().encode(text).length <= MAX_SELECTION_ANNOTATION_BYTES);
    const e = caught(() => parseNetworkSelection(text, "ns"));
    assert.equal(e.code, CniErrorCode.InvalidNetworkConfig);
    assert.equal(
      e.msg,
      "network selection annotation is nested more than 64 levels deep (limit 64)",
    );
  }
});

Deno.test("selection: a deep non-list is refused by depth before its shape", () => {
  const e = caught(() => parseNetworkSelection(`{"a":${nested(100)}}`, "ns"));
  assert.match(e.msg, /nested more than 64 levels/);
});

// ---------------------------------------------------------------- NAD spec.config

function nad(name: string, config: string): NetworkAttachmentDefinition {
  return { metadata: { name, namespace: "pod-ns" }, spec: { config } };
}

function options(nads: NetworkAttachmentDefinition[]): ResolveOptions {
  return {
    nads: new StaticNadSource(nads),
    confDir: "/nonexistent/manifold-confdir",
    namespaceIsolation: false,
    globalNamespaces: ["default"],
    podNamespace: "pod-ns",
  };
}

/** A valid bridge config padded with an unknown key to exactly `bytes` bytes of UTF-8. */
function configOfSize(bytes: number, pad = "a"): string {
  const head = '{"cniVersion":"1.0.0","type":"bridge","pad":"';
  const tail = '"}';
  const unit = new TextEncoder().encode(pad).length;
  const room = bytes - head.length - tail.length;
  const n = Math.floor(room / unit);
  return head + pad.repeat(n) + "a".repeat(room - n * unit) + tail;
}

Deno.test("NAD: spec.config of exactly 256 KiB is accepted", async () => {
  assert.equal(MAX_NAD_CONFIG_BYTES, 256 * 1024);
  const config = configOfSize(MAX_NAD_CONFIG_BYTES);
  const d = await resolveNetwork(
    { namespace: "pod-ns", name: "big" },
    options([nad("big", config)]),
  );
  assert.equal(d.statusName, "pod-ns/big");
});

Deno.test("NAD: spec.config over 256 KiB is code 7 naming the NAD and the limit", async () => {
  // ASCII one byte over, and multi-byte text whose UTF-16 length is far under the cap.
  for (const config of [configOfSize(MAX_NAD_CONFIG_BYTES + 1), configOfSize(300_000, "€")]) {
    const e = await rejected(
      resolveNetwork({ namespace: "pod-ns", name: "big" }, options([nad("big", config)])),
    );
    const size = new TextEncoder().encode(config).length;
    assert.equal(e.code, CniErrorCode.InvalidNetworkConfig);
    assert.equal(
      e.msg,
      `network attachment definition "pod-ns/big": spec.config is ${size} bytes, more than the limit of 262144 bytes`,
    );
  }
});

Deno.test("NAD: spec.config nested deeper than 64 levels is code 7 naming the NAD", async () => {
  const ok = `{"cniVersion":"1.0.0","type":"bridge","x":${nested(63)}}`;
  await resolveNetwork({ namespace: "pod-ns", name: "n" }, options([nad("n", ok)]));
  for (const depth of [64, 3_000, 100_000]) {
    const config = `{"cniVersion":"1.0.0","type":"bridge","x":${nested(depth)}}`;
    const e = await rejected(
      resolveNetwork({ namespace: "pod-ns", name: "deep" }, options([nad("deep", config)])),
    );
    assert.equal(e.code, CniErrorCode.InvalidNetworkConfig);
    assert.equal(
      e.msg,
      'network attachment definition "pod-ns/deep": spec.config is nested more than 64 levels deep (limit 64)',
    );
  }
});

Deno.test("NAD: the caps also apply to clusterNetwork / defaultNetworks NADs", async () => {
  const config = `{"cniVersion":"1.0.0","type":"bridge","x":${nested(500)}}`;
  const e = await rejected(resolveClusterNetwork("deep", {
    nads: new StaticNadSource([{
      ...nad("deep", config),
      metadata: { name: "deep", namespace: "kube-system" },
    }]),
    confDir: "/nonexistent/manifold-confdir",
    multusNamespace: "kube-system",
    isDefault: true,
  }));
  assert.equal(e.code, 7);
  assert.match(e.msg, /^network attachment definition "kube-system\/deep": spec\.config is nested/);
});

const canWrite = (["read", "write"] as const).every((name) =>
  Deno.permissions.querySync({ name }).state === "granted"
);

Deno.test({
  name: "confDir: a config file nested too deeply is skipped, with the reason in details",
  ignore: !canWrite,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "mft-limits-" });
    try {
      await Deno.writeTextFile(
        `${dir}/10-deep.conf`,
        `{"cniVersion":"1.0.0","name":"deep","type":"bridge","x":${nested(3_000)}}`,
      );
      const e = await rejected(resolveClusterNetwork(dir, {
        nads: new StaticNadSource([]),
        confDir: dir,
        multusNamespace: "kube-system",
        isDefault: true,
      }));
      assert.equal(e.code, 7);
      assert.match(e.details, /10-deep\.conf: skipped \(/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
