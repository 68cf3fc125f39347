/**
 * Schema checks of deploy/*.yaml with zod: each manifest's apiVersion/kind/required
 * fields, the NetworkAttachmentDefinition, MultiNetworkPolicy and KEP-3698 CRDs,
 * least-privilege RBAC (no "*", exactly the verbs the plugin, the daemon, policy enforcement and
 * the controller use), and the DaemonSet's host paths, tolerations, resources, install flags and
 * the daemon container (socket, probes on the metrics address, NAD mirror).
 * tests/deploy/delegate_paths_test.ts checks that the daemon sees every host path a delegate
 * touches at the same path.
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { z } from "zod";
import { runInstall } from "../../lib/cli/install.ts";
import { DEFAULT_NAD_MIRROR_DIR } from "../../lib/multinet/nad/mirror.ts";

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
  // Only `manifold doctor`'s read of deploy/60-status-policy.yaml's objects names a resource.
  resourceNames: z.array(z.literal("manifold-network-status-writers")).length(1).optional(),
}).strict(); // no nonResourceURLs surprises

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
        hostPID: z.literal(true),
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
              mountPropagation: z.enum(["None", "HostToContainer"]).optional(),
            })),
          }).loose(),
        ).length(2),
        volumes: z.array(z.union([
          z.object({
            name: z.string(),
            hostPath: z.object({ path: z.string(), type: z.string().optional() }),
          }),
          z.object({ name: z.string(), configMap: z.object({ name: z.string() }) }),
        ])),
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
      "ConfigMap",
      "DaemonSet",
      "ServiceAccount",
      "ClusterRole",
      "ClusterRoleBinding",
      "Deployment",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
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
      // Any case, as multi-networkpolicy-iptables reads it (CEL; tests/deploy/mnp_crd_validation_test.ts).
      protocol: z.object({ "x-kubernetes-validations": z.array(z.unknown()).length(1) }).loose(),
      port: z.object({
        "x-kubernetes-int-or-string": z.literal(true),
        minimum: z.literal(1),
        maximum: z.literal(65535),
        pattern: z.string(),
      }).loose(),
      endPort: z.object({ type: z.literal("integer"), maximum: z.literal(65535) }).loose(),
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
                  items: z.object({ "x-kubernetes-validations": z.array(z.unknown()).length(1) })
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
      for (const res of rule.resources) {
        for (const v of rule.verbs) {
          grants.add(`${g}|${res}|${v}${rule.resourceNames ? `|${rule.resourceNames}` : ""}`);
        }
      }
    }
  }
  assert.deepEqual(
    [...grants].sort(),
    [
      "|events|create",
      "|namespaces|get",
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
      "resource.k8s.io|resourceclaims|get",
      "resource.k8s.io|resourceslices|list",
      "admissionregistration.k8s.io|validatingadmissionpolicies|get|manifold-network-status-writers",
      "admissionregistration.k8s.io|validatingadmissionpolicybindings|get|manifold-network-status-writers",
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
  // The host directories: the installer's under --host-root, the daemon's at the same path
  // (besides the host's root at /hostroot, the `chrootDir` of the delegates).
  const hostPaths = new Map(
    spec.volumes.flatMap((v) =>
      "hostPath" in v && v.name !== "hostroot" ? [[v.name, v.hostPath.path]] : []
    ),
  );
  const hostroot = spec.volumes.find((v) => v.name === "hostroot");
  assert.equal(hostroot && "hostPath" in hostroot ? hostroot.hostPath.path : undefined, "/");
  const installer = [
    "/opt/cni/bin",
    "/etc/cni/net.d",
    "/var/lib/cni",
    "/run/k8s.cni.cncf.io",
    "/var/lib/kubelet/pod-resources",
  ];
  const daemonOnly = [
    "/var/run/netns",
    "/run/manifold",
    "/run/cni",
    "/run/xtables.lock",
    "/sys",
    "/var/lib/kubelet/device-plugins",
  ];
  assert.deepEqual([...hostPaths.values()].sort(), [...installer, ...daemonOnly].sort());
  const hostMounts = c.volumeMounts.filter((m) => m.name !== "manifold-config");
  for (const m of hostMounts) {
    assert.equal(m.mountPath, `/host${hostPaths.get(m.name)}`, m.name);
  }
  assert.deepEqual(
    hostMounts.map((m) => hostPaths.get(m.name)).sort(),
    [...installer].sort(),
  );
  assert.equal(c.volumeMounts.find((m) => m.name === "pod-resources")?.readOnly, true);
  const daemon = spec.containers.find((x) => x.args[0] === "daemon")!;
  const samePath = daemon.volumeMounts.filter((m) => m.name !== "hostroot");
  for (const m of samePath) assert.equal(m.mountPath, hostPaths.get(m.name), m.name);
  assert.deepEqual(
    samePath.map((m) => m.mountPath).sort(),
    [...hostPaths.values()].sort(),
    "the daemon mounts every host path",
  );
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

Deno.test("DaemonSet: the daemon container serves the socket the config names, probes, mirror", async () => {
  const ds = dsSchema.parse(find(await manifests(), "DaemonSet"));
  const spec = ds.spec.template.spec;
  const install = spec.containers.find((x) => x.args[0] === "install")!;
  const daemon = spec.containers.find((x) => x.args[0] === "daemon");
  assert.ok(daemon, "a daemon container");
  assert.equal(daemon.image, install.image, "the same image");
  assert.equal(spec.containers[0], daemon, "the main (first) container");
  const flag = (c: { args: string[] }, name: string) =>
    c.args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  // In-cluster service account: no kubeconfig flag.
  assert.ok(!daemon.args.some((a) => a.startsWith("--kubeconfig")));
  // The socket the daemon listens on is the one the installer writes into the config.
  const socket = flag(daemon, "socket");
  assert.ok(socket?.startsWith("/"), "--socket");
  // The installer's keys come from the ConfigMap (35-configmap.yaml), mounted read-only.
  const confFile = flag(install, "plugin-conf-file")!;
  const mount = install.volumeMounts.find((m) => m.mountPath === confFile.replace(/\/[^/]+$/, ""));
  assert.equal(mount?.readOnly, true);
  const vol = spec.volumes.find((v) => v.name === mount?.name);
  assert.ok(vol && "configMap" in vol, "a ConfigMap volume");
  const cm = z.object({ data: z.record(z.string(), z.string()) }).loose().parse(
    find(await manifests(), "ConfigMap", vol.configMap.name),
  );
  const keys = JSON.parse(cm.data[confFile.slice(confFile.lastIndexOf("/") + 1)]);
  assert.equal(keys.daemonSocket, socket);
  assert.equal(flag(daemon, "config"), "/etc/cni/net.d/00-manifold.conflist");
  // Privileged on the host's network and PID namespaces (it enters netns, runs delegates).
  const sc = z.object({ privileged: z.literal(true), runAsUser: z.literal(0) }).loose();
  assert.ok(sc.safeParse(daemon.securityContext).success, JSON.stringify(daemon.securityContext));
  // NODE_NAME from the downward API, for the node-scoped pod informer.
  const env = z.array(z.object({ name: z.string() }).loose()).parse(daemon.env);
  assert.deepEqual(env.find((e) => e.name === "NODE_NAME"), {
    name: "NODE_NAME",
    valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } },
  });
  // Liveness /healthz and readiness /readyz on the metrics address (host network: loopback).
  const [host, port] = flag(daemon, "metrics-address")!.split(":");
  assert.equal(host, "127.0.0.1");
  const probe = z.object({
    httpGet: z.object({ host: z.string(), port: z.number(), path: z.string() }),
    periodSeconds: z.number().min(1),
    timeoutSeconds: z.number().min(1),
    failureThreshold: z.number().min(1),
  });
  const live = probe.parse(daemon.livenessProbe);
  const ready = probe.parse(daemon.readinessProbe);
  assert.deepEqual(live.httpGet, { host, port: Number(port), path: "/healthz" });
  assert.deepEqual(ready.httpGet, { host, port: Number(port), path: "/readyz" });
  // The daemon writes the NAD mirror at the host path the generated config names.
  const hostPaths = new Map(
    spec.volumes.flatMap((v) => "hostPath" in v ? [[v.name, v.hostPath.path]] : []),
  );
  const mirror = daemon.volumeMounts.find((m) => hostPaths.get(m.name) === "/run/k8s.cni.cncf.io");
  assert.ok(mirror && !mirror.readOnly && mirror.mountPath === "/run/k8s.cni.cncf.io");
  assert.ok(DEFAULT_NAD_MIRROR_DIR.startsWith(`${mirror.mountPath}/`));
  assert.ok(!install.args.some((a) => a.startsWith("--plugin-conf=")), "one source: the ConfigMap");
  assert.deepEqual(keys, {
    nadMirrorDir: DEFAULT_NAD_MIRROR_DIR,
    chrootDir: "/hostroot",
    daemonSocket: socket,
  });
  // Delegates run in the host's root: `/` mounted read-write where `chrootDir` says, with
  // later mounts (netns files) propagated.
  const hostroot = daemon.volumeMounts.find((m) => hostPaths.get(m.name) === "/");
  assert.equal(hostroot?.mountPath, "/hostroot");
  assert.equal(hostroot?.mountPropagation, "HostToContainer");
  assert.notEqual(hostroot?.readOnly, true);
  // New network namespaces appear in the running daemon.
  const netns = daemon.volumeMounts.find((m) => m.mountPath === "/var/run/netns");
  assert.equal(netns?.mountPropagation, "HostToContainer");
  assert.ok(mebibytes(daemon.resources.limits.memory) >= 512, "room for the delegates it runs");
  // The daemon's flags are the ones `manifold daemon` accepts (once lib/cli/daemon.ts exists).
  const cli = await import(new URL("../../lib/cli/daemon.ts", import.meta.url).href).catch(
    () => undefined,
  );
  if (typeof cli?.runDaemon === "function") {
    const err = { text: "" };
    const code = await cli.runDaemon([...daemon.args.slice(1), "--help"], {
      stdout: () => {},
      stderr: (s: string) => void (err.text += s),
      env: {},
    });
    assert.equal(code, 0, err.text);
  }
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
      "|namespaces|list",
      "|namespaces|watch",
      "|pods|list",
      "|pods|watch",
      "k8s.cni.cncf.io|network-attachment-definitions|list",
      "k8s.cni.cncf.io|network-attachment-definitions|watch",
      "multinetwork.manifold.dev|podnetworkattachments/status|patch",
      "multinetwork.manifold.dev|podnetworkattachments|list",
      "multinetwork.manifold.dev|podnetworkattachments|patch",
      "multinetwork.manifold.dev|podnetworkattachments|watch",
      "multinetwork.manifold.dev|podnetworks/status|patch",
      "multinetwork.manifold.dev|podnetworks|create",
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
