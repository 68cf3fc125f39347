/**
 * Schema checks of deploy/*.yaml with zod: each manifest's apiVersion/kind/required
 * fields, the NetworkAttachmentDefinition and MultiNetworkPolicy CRDs, least-privilege RBAC (no
 * "*", exactly the verbs the plugin, the mirror and policy enforcement use), and
 * the DaemonSet's host paths, tolerations, resources, install flags and the NAD mirror
 * container.
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { z } from "zod";
import { runInstall } from "../../lib/cli/install.ts";
import { runMirror } from "../../lib/cli/mirror.ts";
import { DEFAULT_NAD_MIRROR_DIR } from "../../lib/multinet/nad_mirror.ts";

const DEPLOY = new URL("../../deploy/", import.meta.url).pathname;

async function manifests(): Promise<{ file: string; doc: Record<string, unknown> }[]> {
  const files: string[] = [];
  for await (const e of Deno.readDir(DEPLOY)) if (e.name.endsWith(".yaml")) files.push(e.name);
  files.sort();
  const out: { file: string; doc: Record<string, unknown> }[] = [];
  for (const file of files) {
    for (const d of parseAllDocuments(await Deno.readTextFile(`${DEPLOY}${file}`))) {
      assert.deepEqual(d.errors, [], file);
      const doc = d.toJS();
      if (doc !== null) out.push({ file, doc });
    }
  }
  return out;
}

function find(all: { doc: Record<string, unknown> }[], kind: string, name?: string) {
  const found = all.filter((m) =>
    m.doc.kind === kind &&
    (name === undefined || (m.doc.metadata as { name?: string } | undefined)?.name === name)
  );
  assert.equal(found.length, 1, `exactly one ${kind} ${name ?? ""}`);
  return found[0].doc;
}

const NAD_CRD = "network-attachment-definitions.k8s.cni.cncf.io";
const MNP_CRD = "multi-networkpolicies.k8s.cni.cncf.io";

const meta = (namespaced: boolean) =>
  z.object({
    name: z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/),
    ...(namespaced ? { namespace: z.literal("kube-system") } : {}),
  }).loose();

const crdSchema = z.object({
  apiVersion: z.literal("apiextensions.k8s.io/v1"),
  kind: z.literal("CustomResourceDefinition"),
  metadata: z.object({ name: z.literal("network-attachment-definitions.k8s.cni.cncf.io") }),
  spec: z.object({
    group: z.literal("k8s.cni.cncf.io"),
    scope: z.literal("Namespaced"),
    names: z.object({
      plural: z.literal("network-attachment-definitions"),
      singular: z.literal("network-attachment-definition"),
      kind: z.literal("NetworkAttachmentDefinition"),
      shortNames: z.array(z.string()).optional(),
    }),
    versions: z.array(z.object({
      name: z.literal("v1"),
      served: z.literal(true),
      storage: z.literal(true),
      schema: z.object({
        openAPIV3Schema: z.object({
          type: z.literal("object"),
          properties: z.object({
            spec: z.object({
              type: z.literal("object"),
              properties: z.object({ config: z.object({ type: z.literal("string") }).loose() }),
            }).loose(),
          }).loose(),
        }).loose(),
      }),
    })).length(1),
  }),
});

const ruleSchema = z.object({
  apiGroups: z.array(z.string()).min(1),
  resources: z.array(z.string()).min(1),
  verbs: z.array(z.enum(["get", "list", "watch", "create", "update", "patch", "delete"])).min(1),
}).strict(); // no resourceNames/nonResourceURLs surprises

const roleSchema = z.object({
  apiVersion: z.literal("rbac.authorization.k8s.io/v1"),
  kind: z.literal("ClusterRole"),
  metadata: meta(false),
  rules: z.array(ruleSchema).min(1),
});

const bindingSchema = z.object({
  apiVersion: z.literal("rbac.authorization.k8s.io/v1"),
  kind: z.literal("ClusterRoleBinding"),
  metadata: meta(false),
  roleRef: z.object({
    apiGroup: z.literal("rbac.authorization.k8s.io"),
    kind: z.literal("ClusterRole"),
    name: z.string(),
  }),
  subjects: z.array(z.object({
    kind: z.literal("ServiceAccount"),
    name: z.string(),
    namespace: z.string(),
  })).length(1),
});

const saSchema = z.object({
  apiVersion: z.literal("v1"),
  kind: z.literal("ServiceAccount"),
  metadata: meta(true),
});

const quantity = z.union([z.string().regex(/^\d+(\.\d+)?(m|Mi|Gi|Ki)?$/), z.number()]);
const dsSchema = z.object({
  apiVersion: z.literal("apps/v1"),
  kind: z.literal("DaemonSet"),
  metadata: meta(true),
  spec: z.object({
    selector: z.object({ matchLabels: z.record(z.string(), z.string()) }),
    template: z.object({
      metadata: z.object({ labels: z.record(z.string(), z.string()) }),
      spec: z.object({
        serviceAccountName: z.string(),
        hostNetwork: z.literal(true),
        priorityClassName: z.literal("system-node-critical"),
        tolerations: z.array(z.object({
          operator: z.enum(["Exists", "Equal"]),
          key: z.string().optional(),
          effect: z.string().optional(),
        })).min(1),
        containers: z.array(
          z.object({
            name: z.string(),
            image: z.string().regex(/:[\w.-]+$/, "a pinned tag"),
            command: z.array(z.string()).min(1),
            args: z.array(z.string()),
            resources: z.object({
              requests: z.object({ cpu: quantity, memory: quantity }),
              limits: z.object({ memory: quantity }),
            }),
            volumeMounts: z.array(z.object({
              name: z.string(),
              mountPath: z.string(),
              readOnly: z.boolean().optional(),
            })),
          }).loose(),
        ).length(2),
        volumes: z.array(z.object({
          name: z.string(),
          hostPath: z.object({ path: z.string(), type: z.string().optional() }),
        })),
      }).loose(),
    }),
  }).loose(),
});

function mebibytes(q: string | number): number {
  const s = String(q);
  const n = parseFloat(s);
  return s.endsWith("Gi")
    ? n * 1024
    : s.endsWith("Mi")
    ? n
    : s.endsWith("Ki")
    ? n / 1024
    : n / 2 ** 20;
}

Deno.test("every manifest has apiVersion, kind and metadata.name; kubectl apply order", async () => {
  const all = await manifests();
  assert.deepEqual(
    all.map((m) => m.doc.kind),
    [
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "CustomResourceDefinition",
      "ServiceAccount",
      "ClusterRole",
      "ClusterRoleBinding",
      "DaemonSet",
      "ServiceAccount",
      "ClusterRole",
      "ClusterRoleBinding",
      "Deployment",
    ],
  );
  for (const { file, doc } of all) {
    const r = z.object({
      apiVersion: z.string().min(1),
      kind: z.string().min(1),
      metadata: z.object({ name: z.string().min(1) }).loose(),
    }).loose().safeParse(doc);
    assert.ok(r.success, `${file}: ${r.success ? "" : z.prettifyError(r.error)}`);
  }
});

Deno.test("the NetworkAttachmentDefinition CRD: apiextensions v1, spec.config string", async () => {
  const r = crdSchema.safeParse(find(await manifests(), "CustomResourceDefinition", NAD_CRD));
  assert.ok(r.success, r.success ? "" : z.prettifyError(r.error));
});

const selectorSchema = z.object({
  type: z.literal("object"),
  properties: z.object({
    matchLabels: z.object({ type: z.literal("object") }).loose(),
    matchExpressions: z.object({ type: z.literal("array") }).loose(),
  }),
}).loose();
const peerSchema = z.object({
  type: z.literal("array"),
  items: z.object({
    properties: z.object({
      podSelector: selectorSchema,
      namespaceSelector: selectorSchema,
      ipBlock: z.object({
        required: z.tuple([z.literal("cidr")]),
        properties: z.object({ cidr: z.object({}).loose(), except: z.object({}).loose() }),
      }).loose(),
    }),
  }).loose(),
}).loose();
const portsSchema = z.object({
  items: z.object({
    properties: z.object({
      protocol: z.object({ enum: z.tuple([z.literal("TCP"), z.literal("UDP"), z.literal("SCTP")]) })
        .loose(),
      port: z.object({ "x-kubernetes-int-or-string": z.literal(true) }).loose(),
      endPort: z.object({ type: z.literal("integer") }).loose(),
    }),
  }).loose(),
}).loose();
const ruleSchemaOf = (key: "from" | "to") =>
  z.object({
    type: z.literal("array"),
    items: z.object({
      properties: z.object({ ports: portsSchema, [key]: peerSchema }),
    }).loose(),
  }).loose();
const mnpCrdSchema = z.object({
  apiVersion: z.literal("apiextensions.k8s.io/v1"),
  kind: z.literal("CustomResourceDefinition"),
  metadata: z.object({ name: z.literal(MNP_CRD) }),
  spec: z.object({
    group: z.literal("k8s.cni.cncf.io"),
    scope: z.literal("Namespaced"),
    names: z.object({
      plural: z.literal("multi-networkpolicies"),
      singular: z.literal("multi-networkpolicy"),
      kind: z.literal("MultiNetworkPolicy"),
      shortNames: z.array(z.string()).optional(),
    }),
    versions: z.array(z.object({
      name: z.literal("v1beta1"),
      served: z.literal(true),
      storage: z.literal(true),
      schema: z.object({
        openAPIV3Schema: z.object({
          type: z.literal("object"),
          properties: z.object({
            spec: z.object({
              type: z.literal("object"),
              properties: z.object({
                podSelector: selectorSchema,
                policyTypes: z.object({
                  items: z.object({ enum: z.tuple([z.literal("Ingress"), z.literal("Egress")]) })
                    .loose(),
                }).loose(),
                ingress: ruleSchemaOf("from"),
                egress: ruleSchemaOf("to"),
              }),
            }).loose(),
          }).loose(),
        }).loose(),
      }),
    })).length(1),
  }),
});

Deno.test("the MultiNetworkPolicy CRD: k8s.cni.cncf.io/v1beta1, the NetworkPolicy spec", async () => {
  const r = mnpCrdSchema.safeParse(find(await manifests(), "CustomResourceDefinition", MNP_CRD));
  assert.ok(r.success, r.success ? "" : z.prettifyError(r.error));
});

Deno.test("ClusterRole is least privilege: exactly the plugin's verbs, no wildcard", async () => {
  const doc = find(await manifests(), "ClusterRole", "manifold");
  assert.ok(!JSON.stringify(doc).includes('"*"'), "no * anywhere");
  const r = roleSchema.safeParse(doc);
  assert.ok(r.success, r.success ? "" : z.prettifyError(r.error));
  const grants = new Set<string>();
  for (const rule of r.data!.rules) {
    for (const g of rule.apiGroups) {
      for (const res of rule.resources) for (const v of rule.verbs) grants.add(`${g}|${res}|${v}`);
    }
  }
  assert.deepEqual(
    [...grants].sort(),
    [
      "|events|create",
      "|namespaces|list",
      "|namespaces|watch",
      "|pods/status|patch",
      "|pods|get",
      "|pods|list",
      "|pods|watch",
      "k8s.cni.cncf.io|multi-networkpolicies|list",
      "k8s.cni.cncf.io|multi-networkpolicies|watch",
      "k8s.cni.cncf.io|network-attachment-definitions|get",
      "k8s.cni.cncf.io|network-attachment-definitions|list",
      "k8s.cni.cncf.io|network-attachment-definitions|watch",
      "multinetwork.manifold.dev|podnetworkattachments|get",
      "multinetwork.manifold.dev|podnetworks|get",
    ].sort(),
  );
});

Deno.test("ServiceAccount and ClusterRoleBinding tie the role to the DaemonSet's account", async () => {
  const all = await manifests();
  const sa = saSchema.parse(find(all, "ServiceAccount", "manifold"));
  const crb = bindingSchema.parse(find(all, "ClusterRoleBinding", "manifold"));
  const role = roleSchema.parse(find(all, "ClusterRole", "manifold"));
  const ds = dsSchema.parse(find(all, "DaemonSet"));
  assert.equal(crb.roleRef.name, role.metadata.name);
  assert.deepEqual(crb.subjects[0], {
    kind: "ServiceAccount",
    name: sa.metadata.name,
    namespace: sa.metadata.namespace,
  });
  assert.equal(ds.spec.template.spec.serviceAccountName, sa.metadata.name);
});

Deno.test("DaemonSet: host paths mounted, every node tolerated, resources, install flags", async () => {
  const r = dsSchema.safeParse(find(await manifests(), "DaemonSet"));
  assert.ok(r.success, r.success ? "" : z.prettifyError(r.error));
  const spec = r.data!.spec.template.spec;
  const c = spec.containers.find((x) => x.args[0] === "install");
  assert.ok(c, "an install container");
  // Selector matches the template.
  for (const [k, v] of Object.entries(r.data!.spec.selector.matchLabels)) {
    assert.equal(r.data!.spec.template.metadata.labels[k], v);
  }
  // Tolerate every taint: an Exists toleration with no key and no effect.
  assert.ok(spec.tolerations.some((t) => t.operator === "Exists" && !t.key && !t.effect));
  // The host directories, each mounted under --host-root at the same path.
  const hostPaths = new Map(spec.volumes.map((v) => [v.name, v.hostPath.path]));
  const wanted = [
    "/opt/cni/bin",
    "/etc/cni/net.d",
    "/var/lib/cni",
    "/run/k8s.cni.cncf.io",
    "/var/lib/kubelet/pod-resources",
  ];
  assert.deepEqual([...hostPaths.values()].sort(), [...wanted].sort());
  for (const m of spec.containers.flatMap((x) => x.volumeMounts)) {
    assert.equal(m.mountPath, `/host${hostPaths.get(m.name)}`, m.name);
  }
  assert.deepEqual(c.volumeMounts.map((m) => m.name).sort(), [...hostPaths.keys()].sort());
  assert.equal(c.volumeMounts.find((m) => m.name === "pod-resources")?.readOnly, true);
  // Room for the installer and exec'd doctor/explain; a limit so a leak cannot starve the node.
  assert.ok(mebibytes(c.resources.requests.memory) >= 64);
  assert.ok(mebibytes(c.resources.limits.memory) >= mebibytes(c.resources.requests.memory));
  // The container runs `manifold install` with flags the installer accepts.
  assert.equal(c.args[0], "install");
  assert.ok(c.args.includes("--host-root=/host"));
  const out = { err: "" };
  const code = await runInstall([...c.args.slice(1), "--help"], {
    stdout: () => {},
    stderr: (s) => void (out.err += s),
    env: {},
  });
  assert.equal(code, 0, out.err);
});

Deno.test("DaemonSet: the nad-mirror container mirrors into the dir the plugin reads", async () => {
  const ds = dsSchema.parse(find(await manifests(), "DaemonSet"));
  const spec = ds.spec.template.spec;
  const install = spec.containers.find((x) => x.args[0] === "install")!;
  const mirror = spec.containers.find((x) => x.args[0] === "mirror");
  assert.ok(mirror, "a mirror container");
  assert.equal(mirror.image, install.image, "the same image");
  // In-cluster service account: no kubeconfig flag; flags the mirror accepts.
  assert.ok(!mirror.args.some((a) => a.startsWith("--kubeconfig")));
  const err = { text: "" };
  const code = await runMirror([...mirror.args.slice(1), "--help"], {
    stdout: () => {},
    stderr: (s) => void (err.text += s),
    env: {},
  });
  assert.equal(code, 0, err.text);
  // The mirror writes below the host's /run/k8s.cni.cncf.io, mounted read-write at /host…
  const dir = mirror.args.find((a) => a.startsWith("--dir="))?.slice("--dir=".length);
  assert.equal(dir, `/host${DEFAULT_NAD_MIRROR_DIR}`);
  const hostPaths = new Map(spec.volumes.map((v) => [v.name, v.hostPath.path]));
  const mount = mirror.volumeMounts.find((m) => dir!.startsWith(`${m.mountPath}/`));
  assert.ok(mount && !mount.readOnly, "the mirror dir is on a writable host mount");
  assert.equal(hostPaths.get(mount.name), "/run/k8s.cni.cncf.io");
  // …and the generated plugin config names the same directory as the host sees it.
  const conf = install.args.find((a) => a.startsWith("--plugin-conf="));
  assert.ok(conf, "--plugin-conf");
  assert.deepEqual(JSON.parse(conf.slice("--plugin-conf=".length)), {
    nadMirrorDir: DEFAULT_NAD_MIRROR_DIR,
  });
  // Only what the mirror needs: no other host path.
  assert.deepEqual(mirror.volumeMounts.map((m) => m.name), [mount.name]);
  assert.ok(
    mebibytes(mirror.resources.limits.memory) >= mebibytes(mirror.resources.requests.memory),
  );
});

/** The KEP's provider pattern (KEP-3698 PodNetworkSpec.Provider `+kubebuilder:validation:Pattern`). */
const KEP_PROVIDER_PATTERN =
  "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\\/[A-Za-z0-9\\/\\-._~%!$&'()*+,;=:]+$";

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

Deno.test("KEP-3698 CRDs: scope, names, status subresource, the KEP's provider pattern and MaxItems", async () => {
  const all = await manifests();
  const pn = find(all, "CustomResourceDefinition", "podnetworks.multinetwork.manifold.dev") as Obj;
  const pna = find(
    all,
    "CustomResourceDefinition",
    "podnetworkattachments.multinetwork.manifold.dev",
  ) as Obj;
  for (
    const [crd, scope, kind] of [[pn, "Cluster", "PodNetwork"], [
      pna,
      "Namespaced",
      "PodNetworkAttachment",
    ]] as const
  ) {
    assert.equal(crd.spec.group, "multinetwork.manifold.dev");
    assert.equal(crd.spec.scope, scope);
    assert.equal(crd.spec.names.kind, kind);
    assert.equal(crd.spec.versions.length, 1);
    const v = crd.spec.versions[0];
    assert.equal(v.name, "v1alpha1");
    assert.deepEqual(v.subresources, { status: {} });
    const props = v.schema.openAPIV3Schema.properties;
    const conditions = props.status.properties.conditions;
    assert.equal(conditions.maxItems, 5, "KEP: +kubebuilder:validation:MaxItems=5");
    assert.equal(conditions["x-kubernetes-list-type"], "map");
    assert.deepEqual(conditions["x-kubernetes-list-map-keys"], ["type"]);
    const ref = props.spec.properties.parametersRefs.items;
    assert.deepEqual(ref.required, ["group", "kind", "name"]);
    assert.deepEqual(Object.keys(ref.properties).sort(), ["group", "kind", "name", "namespace"]);
  }
  const spec = pn.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties;
  assert.equal(spec.provider.pattern, KEP_PROVIDER_PATTERN);
  assert.equal(spec.provider.maxLength, 253);
  assert.equal(spec.enabled.default, true);
  assert.ok(new RegExp(KEP_PROVIDER_PATTERN).test("manifold.dev/cni"), "our provider matches");
  const pnaSpec = pna.spec.versions[0].schema.openAPIV3Schema.properties.spec;
  assert.deepEqual(pnaSpec.required, ["podNetworkName"]);
});

Deno.test("manifold-controller: one replica, its own account, exactly the verbs the life cycle needs", async () => {
  const all = await manifests();
  const role = roleSchema.parse(find(all, "ClusterRole", "manifold-controller"));
  const crb = bindingSchema.parse(find(all, "ClusterRoleBinding", "manifold-controller"));
  const sa = saSchema.parse(find(all, "ServiceAccount", "manifold-controller"));
  const dep = find(all, "Deployment", "manifold-controller") as Obj;
  const grants = role.rules.flatMap((r) =>
    r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g}|${res}|${v}`)))
  );
  assert.deepEqual(
    grants.sort(),
    [
      "|pods|list",
      "|pods|watch",
      "k8s.cni.cncf.io|network-attachment-definitions|list",
      "k8s.cni.cncf.io|network-attachment-definitions|watch",
      "multinetwork.manifold.dev|podnetworkattachments/status|patch",
      "multinetwork.manifold.dev|podnetworkattachments|list",
      "multinetwork.manifold.dev|podnetworkattachments|patch",
      "multinetwork.manifold.dev|podnetworkattachments|watch",
      "multinetwork.manifold.dev|podnetworks/status|patch",
      "multinetwork.manifold.dev|podnetworks|list",
      "multinetwork.manifold.dev|podnetworks|patch",
      "multinetwork.manifold.dev|podnetworks|watch",
    ].sort(),
  );
  assert.equal(crb.roleRef.name, role.metadata.name);
  assert.deepEqual(crb.subjects[0], {
    kind: "ServiceAccount",
    name: sa.metadata.name,
    namespace: sa.metadata.namespace,
  });
  assert.equal(dep.spec.replicas, 1, "single instance");
  assert.equal(dep.spec.strategy.type, "Recreate", "no second replica during a rollout");
  const pod = dep.spec.template.spec;
  assert.equal(pod.serviceAccountName, sa.metadata.name);
  const [c] = pod.containers;
  assert.equal(c.args[0], "controller");
  const { runControllerCli } = await import("../../lib/cli/controller.ts");
  let err = "";
  const code = await runControllerCli([...c.args.slice(1), "--help"], {
    stdout: () => {},
    stderr: (s) => void (err += s),
  });
  assert.equal(code, 0, err);
});
