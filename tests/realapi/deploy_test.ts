/**
 * deploy/ applied to a real kube-apiserver (every object created, not a dry run), and least
 * privilege for real: the plugin and `manifold mirror` run with a token of deploy/'s
 * ServiceAccount (TokenRequest), bound only to deploy/'s ClusterRole. Every request they make
 * is allowed (the server's audit log says so), and writes outside pods/status are denied.
 * Needs root and `MANIFOLD_KUBE_APISERVER` (else skipped with one line).
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { objectPath } from "../support/kube_rest.ts";
import { linkNames } from "../support/netns.ts";
import { exists, until } from "../support/wait.ts";
import { MANIFOLD } from "../support/plugin.ts";
import { expectOk } from "../support/world.ts";
import { deployObjects, done, networkStatus, POD, realWorld, startMirror } from "./cluster.ts";

const EDITOR = "pod-editor";
const suite = realApiSuite({ audit: true, root: true, users: [{ name: EDITOR }] });
const SA = "system:serviceaccount:kube-system:manifold";

suite.test("deploy/ is accepted by the server; the plugin with its ServiceAccount token needs nothing more", async (api) => {
  // 1. Apply every object of deploy/ (CRDs, ServiceAccount, ClusterRole, binding, DaemonSet).
  const objects = await deployObjects();
  assert.deepEqual(
    objects.map((o) => o.kind).sort(),
    [
      "ClusterRole",
      "ClusterRole",
      "ClusterRoleBinding",
      "ClusterRoleBinding",
      "ConfigMap",
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "DaemonSet",
      "Deployment",
      "ServiceAccount",
      "ServiceAccount",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
    ],
  );
  for (const o of objects) {
    if (o.kind === "CustomResourceDefinition") await api.admin.installCrd(o);
    else await api.admin.create(o);
  }
  // Read back as stored (defaults filled in, nothing dropped that we set).
  const ds = await api.admin.get("apps/v1", "DaemonSet", "kube-system", "manifold");
  assert.equal(ds.spec.template.spec.serviceAccountName, "manifold");
  assert.deepEqual(
    ds.spec.template.spec.containers.map((c: { name: string }) => c.name),
    ["daemon", "install"],
  );
  const role = await api.admin.get(
    "rbac.authorization.k8s.io/v1",
    "ClusterRole",
    undefined,
    "manifold",
  );
  const declared = objects.find((o) => o.kind === "ClusterRole")!;
  assert.deepEqual(role.rules, declared.rules);

  // The CRD's schema is enforced: config must be a string; unknown spec fields are pruned.
  const ns = `mfd-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const nadPath = objectPath("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", ns);
  const nad = (name: string, spec: unknown) => ({
    apiVersion: "k8s.cni.cncf.io/v1",
    kind: "NetworkAttachmentDefinition",
    metadata: { name, namespace: ns },
    spec,
  });
  const invalid = await api.admin.raw("POST", nadPath, {
    body: nad("object-config", { config: { type: "bridge" } }),
  });
  assert.equal(invalid.status, 422, JSON.stringify(invalid.body));
  const pruned = await api.admin.create(
    nad("extra-field", { config: '{"cniVersion":"1.0.0","type":"bridge"}', extra: 1 }),
  );
  assert.deepEqual(Object.keys(pruned.spec), ["config"]);
  await api.admin.delete("v1", "Namespace", undefined, ns);

  // 2. A token of the ServiceAccount, minted by the TokenRequest API.
  const token = await api.admin.serviceAccountToken("kube-system", "manifold");
  const sa = api.client(token);
  try {
    const w = await realWorld(api, {
      token,
      annotations: {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify([
          { name: "bridge-net" },
          { name: "macvlan-net", ips: ["10.240.3.9/24"], mac: "02:00:00:0a:f0:09" },
        ]),
      },
      // "all": the event POSTs are exercised too.
      conf: { events: "all" },
    });
    try {
      const auditFrom = (await api.auditEvents()).length;
      const add = await w.call("ADD");
      expectOk(add, "ADD with the ServiceAccount token");
      assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1", "net2"]);
      assert.equal(networkStatus(await w.pod())?.length, 3);
      assert.equal(
        (await api.admin.events(w.ns, POD)).filter((e) => e.reason === "AddedInterface").length,
        3,
      );

      // `manifold mirror` (the NAD list + watch the daemon also runs): list + watch NADs.
      const mirrorDir = `${w.dirs.cache}/nads`;
      const mirror = startMirror(mirrorDir, w.kubeconfig);
      try {
        await until(() => exists(mirror.file(w.ns, "bridge-net")), "mirror list", 20_000);
        await api.admin.createNad(w.ns, "late-net", w.nadConfigs["bridge-net"]);
        await until(() => exists(mirror.file(w.ns, "late-net")), "mirror watch event", 20_000);
      } finally {
        const out = await mirror.stop();
        assert.equal(out.code, 0, out.stderr.slice(-2000));
      }

      // The server's own record: the ServiceAccount made requests, none was refused.
      const made = (await api.auditEvents()).slice(auditFrom).filter((e) => e.user.username === SA);
      const what = made.map((e) =>
        `${e.verb} ${e.objectRef?.resource}${
          e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ""
        } ${e.responseStatus?.code}`
      );
      for (
        const needed of [
          "get pods",
          "get network-attachment-definitions",
          "patch pods/status",
          "create events",
          "list network-attachment-definitions",
          "watch network-attachment-definitions",
        ]
      ) {
        assert.ok(what.some((x) => x.startsWith(`${needed} `)), `${needed} in ${what}`);
      }
      const refused = made.filter((e) => (e.responseStatus?.code ?? 0) >= 400);
      assert.deepEqual(refused.map((e) => `${e.verb} ${e.requestURI}`), [], "nothing refused");

      expectOk(await w.call("DEL"), "DEL");
      assert.deepEqual(await linkNames(w.podNetns), []);

      // 3. Denied: writes outside pods/status, and anything the role does not name.
      const denied: [string, string, unknown?][] = [
        ["PATCH", objectPath("v1", "Pod", w.ns, POD), { metadata: { labels: { x: "y" } } }],
        [
          "PATCH",
          objectPath("v1", "Pod", w.ns, POD),
          { metadata: { annotations: { "k8s.v1.cni.cncf.io/network-status": "[]" } } },
        ],
        ["DELETE", objectPath("v1", "Pod", w.ns, POD)],
        // (listing pods is granted: `manifold daemon`'s MultiNetworkPolicy peers, cluster-wide)
        ["GET", `/api/v1/namespaces/${w.ns}/secrets`],
        ["GET", `/api/v1/namespaces/${w.ns}/events`],
        [
          "POST",
          objectPath("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", w.ns),
          {
            apiVersion: "k8s.cni.cncf.io/v1",
            kind: "NetworkAttachmentDefinition",
            metadata: { name: "evil", namespace: w.ns },
            spec: { config: "{}" },
          },
        ],
      ];
      for (const [method, path, body] of denied) {
        const r = await sa.raw(method, path, {
          body,
          contentType: method === "PATCH" ? "application/merge-patch+json" : undefined,
        });
        assert.equal(r.status, 403, `${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
      }
      // …while the one write it has is allowed.
      const ok = await sa.raw("PATCH", `${objectPath("v1", "Pod", w.ns, POD)}/status`, {
        body: { metadata: { annotations: { "example.com/probe": "1" } } },
        contentType: "application/merge-patch+json",
      });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      const after = await w.pod();
      assert.equal(after.metadata.labels?.x, undefined, "label write did not happen");

      // 4. deploy/60-status-policy.yaml: a user with only `patch pods` in the namespace is
      // refused a network-status change (the ADD above wrote it as the ServiceAccount, through
      // pods/status, with the policy in place), while a label edit by the same user passes.
      await api.admin.create({
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: "pod-patcher" },
        rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["patch"] }],
      });
      const rb = await api.admin.raw(
        "POST",
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${w.ns}/rolebindings`,
        {
          body: {
            apiVersion: "rbac.authorization.k8s.io/v1",
            kind: "RoleBinding",
            metadata: { name: "pod-patcher", namespace: w.ns },
            roleRef: {
              apiGroup: "rbac.authorization.k8s.io",
              kind: "ClusterRole",
              name: "pod-patcher",
            },
            subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: EDITOR }],
          },
        },
      );
      assert.equal(rb.status, 201, JSON.stringify(rb.body));
      const editor = api.client(api.token(EDITOR));
      try {
        const forged = JSON.stringify([{ name: "x/evil", interface: "net1", ips: ["10.0.0.66"] }]);
        const editorPatch = (annotations: Record<string, string | null>, labels = {}) =>
          editor.raw("PATCH", objectPath("v1", "Pod", w.ns, POD), {
            body: { metadata: { annotations, labels } },
            contentType: "application/merge-patch+json",
          });
        // The policy's informer takes effect within seconds of its creation: poll.
        let refusal = { status: 0, body: undefined as unknown };
        await until(
          async () => {
            refusal = await editorPatch({ "k8s.v1.cni.cncf.io/network-status": forged });
            return refusal.status === 403;
          },
          `network-status refused to ${EDITOR}`,
          30_000,
          500,
        );
        assert.match(JSON.stringify(refusal.body), /manifold-network-status-writers/);
        for (
          const key of [
            "k8s.v1.cni.cncf.io/networks-status",
            "multinetwork.manifold.dev/networks-status",
          ]
        ) {
          const r = await editorPatch({ [key]: forged });
          assert.equal(r.status, 403, `${key}: ${r.status}`);
        }
        const removed = await editorPatch({ "k8s.v1.cni.cncf.io/network-status": null });
        assert.equal(removed.status, 403, `removal: ${removed.status}`);
        const label = await editorPatch({}, { tier: "web" });
        assert.equal(label.status, 200, JSON.stringify(label.body));
        const now = await w.pod();
        assert.equal(now.metadata.labels?.tier, "web");
        assert.equal(networkStatus(now)?.length, 3, "the status Manifold wrote is intact");
        // The node agent's ServiceAccount still writes network-status through pods/status.
        const own = await sa.raw("PATCH", `${objectPath("v1", "Pod", w.ns, POD)}/status`, {
          body: { metadata: { annotations: { "k8s.v1.cni.cncf.io/network-status": "[]" } } },
          contentType: "application/merge-patch+json",
        });
        assert.equal(own.status, 200, JSON.stringify(own.body));

        // `manifold doctor` with the ServiceAccount's kubeconfig: installed and bound; then
        // without the binding: a warning naming what is exposed.
        const policyCheck = async () => {
          const out = await new Deno.Command(MANIFOLD, {
            args: ["doctor", "--kubeconfig", w.kubeconfig, "--json"],
            stdout: "piped",
            stderr: "piped",
          }).output();
          const report = JSON.parse(new TextDecoder().decode(out.stdout));
          return report.checks.find((c: { name: string }) =>
            c.name === "api: network-status admission policy"
          );
        };
        const bound = await policyCheck();
        assert.equal(bound?.status, "ok", JSON.stringify(bound));
        await api.admin.delete(
          "admissionregistration.k8s.io/v1",
          "ValidatingAdmissionPolicyBinding",
          undefined,
          "manifold-network-status-writers",
        );
        const unbound = await policyCheck();
        assert.equal(unbound?.status, "warn", JSON.stringify(unbound));
        assert.match(unbound.message, /not bound/);
      } finally {
        editor.close();
      }
    } finally {
      await done(w);
    }
  } finally {
    sa.close();
  }
});

suite.end();
