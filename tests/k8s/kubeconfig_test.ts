import assert from "node:assert/strict";
import { kubeErrorCode } from "../../lib/multinet/api_errors.ts";
import {
  inClusterConnection,
  kubeconfigPaths,
  KubeError,
  loadKubeconfig,
} from "../../lib/k8s/mod.ts";

const CA = "-----BEGIN CERTIFICATE-----\nQ0FDRVJU\n-----END CERTIFICATE-----\n";
const CERT = "-----BEGIN CERTIFICATE-----\nQ0xJRU5U\n-----END CERTIFICATE-----\n";
const KEY = "-----BEGIN EC PRIVATE KEY-----\nU0VDUkVUS0VZ\n-----END EC PRIVATE KEY-----\n";
const SECRET_TOKEN = "tok-3f9a-very-secret";

type Doc = Record<string, unknown>;

function kubeconfig(cluster: Doc, user: Doc | undefined, extra: Doc = {}): Doc {
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c1", cluster }],
    users: user ? [{ name: "u1", user }] : [],
    contexts: [{ name: "ctx", context: { cluster: "c1", ...(user ? { user: "u1" } : {}) } }],
    "current-context": "ctx",
    ...extra,
  };
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "manifold-kubeconfig-test-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function rejects7(path: string, includes: string): Promise<KubeError> {
  let caught: unknown;
  try {
    await loadKubeconfig(path);
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof KubeError, `expected a KubeError, got ${caught}`);
  assert.equal(kubeErrorCode(caught), 7);
  assert.ok(caught.message.includes(includes), `"${caught.message}" should include "${includes}"`);
  return caught;
}

Deno.test("loadKubeconfig reads a JSON kubeconfig with a token and a CA file", async () => {
  await withDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/ca.crt`, CA);
    const path = `${dir}/kc.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify(kubeconfig(
        { server: "https://10.96.0.1:443/", "certificate-authority": `${dir}/ca.crt` },
        { token: SECRET_TOKEN },
      )),
    );
    assert.deepEqual(await loadKubeconfig(path), {
      server: "https://10.96.0.1:443",
      caCertPem: CA,
      insecureSkipTlsVerify: false,
      token: SECRET_TOKEN,
    });
  });
});

Deno.test("loadKubeconfig resolves relative paths against the kubeconfig's directory", async () => {
  await withDir(async (dir) => {
    await Deno.mkdir(`${dir}/conf/pki`, { recursive: true });
    await Deno.writeTextFile(`${dir}/conf/pki/ca.crt`, CA);
    await Deno.writeTextFile(`${dir}/conf/pki/client.crt`, CERT);
    await Deno.writeTextFile(`${dir}/conf/pki/client.key`, KEY);
    const path = `${dir}/conf/kc.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify(kubeconfig(
        { server: "https://api.example:6443", "certificate-authority": "pki/ca.crt" },
        {
          "client-certificate": "pki/client.crt",
          "client-key": "pki/client.key",
          tokenFile: "sa/token",
        },
      )),
    );
    const conn = await loadKubeconfig(path);
    assert.deepEqual(conn.caCertPem, CA);
    assert.deepEqual(conn.clientCertPem, CERT);
    assert.deepEqual(conn.clientKeyPem, KEY);
    assert.deepEqual(conn.tokenFile, `${dir}/conf/sa/token`);
    assert.deepEqual(conn.token, undefined);
  });
});

Deno.test("loadKubeconfig decodes certificate-authority-data and client-*-data", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/kc.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify(kubeconfig(
        { server: "https://[fd00::1]:6443", "certificate-authority-data": btoa(CA) },
        { "client-certificate-data": btoa(CERT), "client-key-data": btoa(KEY) },
      )),
    );
    const conn = await loadKubeconfig(path);
    assert.deepEqual(conn.server, "https://[fd00::1]:6443");
    assert.deepEqual(conn.caCertPem, CA);
    assert.deepEqual(conn.clientCertPem, CERT);
    assert.deepEqual(conn.clientKeyPem, KEY);
  });
});

Deno.test("loadKubeconfig reads YAML (loading the yaml package lazily)", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/kubeconfig`;
    await Deno.writeTextFile(
      path,
      `apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: ${btoa(CA)}
users:
- name: u1
  user:
    tokenFile: /var/run/secrets/token
contexts:
- name: ctx
  context:
    cluster: c1
    user: u1
    namespace: kube-system
current-context: ctx
`,
    );
    assert.deepEqual(await loadKubeconfig(path), {
      server: "https://127.0.0.1:6443",
      caCertPem: CA,
      insecureSkipTlsVerify: false,
      tokenFile: "/var/run/secrets/token",
    });
  });
});

Deno.test("loadKubeconfig adds https:// to a bare host:port and keeps a path prefix", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/kc.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify(kubeconfig({ server: "10.0.0.1:6443" }, undefined)),
    );
    assert.deepEqual((await loadKubeconfig(path)).server, "https://10.0.0.1:6443");
    await Deno.writeTextFile(
      path,
      JSON.stringify(
        kubeconfig({ server: "https://rancher.example/k8s/clusters/c-1/" }, undefined),
      ),
    );
    assert.deepEqual(
      (await loadKubeconfig(path)).server,
      "https://rancher.example/k8s/clusters/c-1",
    );
  });
});

Deno.test("loadKubeconfig: insecure-skip-tls-verify alone is kept, with a CA it is refused", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/kc.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify(
        kubeconfig({ server: "https://h:1", "insecure-skip-tls-verify": true }, undefined),
      ),
    );
    assert.deepEqual((await loadKubeconfig(path)).insecureSkipTlsVerify, true);
    await Deno.writeTextFile(
      path,
      JSON.stringify(kubeconfig({
        server: "https://h:1",
        "insecure-skip-tls-verify": true,
        "certificate-authority-data": btoa(CA),
      }, undefined)),
    );
    await rejects7(path, "both insecure-skip-tls-verify and a certificate authority");
  });
});

Deno.test("loadKubeconfig names the problem with code 7", async (t) => {
  await withDir(async (dir) => {
    const path = `${dir}/kc.json`;
    const write = (doc: unknown) =>
      Deno.writeTextFile(path, typeof doc === "string" ? doc : JSON.stringify(doc));
    const ok = { server: "https://h:1" };

    await t.step("unreadable file", async () => {
      await rejects7(`${dir}/missing.json`, `Cannot read kubeconfig ${dir}/missing.json`);
    });
    await t.step("missing current-context", async () => {
      await write(kubeconfig(ok, undefined, { "current-context": undefined }));
      await rejects7(path, "has no current-context");
    });
    await t.step("unknown context", async () => {
      await write(kubeconfig(ok, undefined, { "current-context": "nope" }));
      await rejects7(path, `no context named "nope"`);
    });
    await t.step("unknown cluster", async () => {
      await write({ ...kubeconfig(ok, undefined), clusters: [] });
      await rejects7(path, `no cluster named "c1"`);
    });
    await t.step("unknown user", async () => {
      await write({ ...kubeconfig(ok, { token: "x" }), users: null });
      await rejects7(path, `no user named "u1"`);
    });
    await t.step("no server", async () => {
      await write(kubeconfig({}, undefined));
      await rejects7(path, `cluster "c1" has no server`);
    });
    await t.step("auth-provider, naming the user entry and the provider", async () => {
      await write(kubeconfig(ok, { "auth-provider": { name: "gcp", config: {} } }));
      await rejects7(path, `user "u1" uses auth-provider "gcp", which is not supported`);
    });
    await t.step("exec plugin with an unsupported apiVersion", async () => {
      await write(kubeconfig(ok, {
        exec: { command: "aws", apiVersion: "client.authentication.k8s.io/v1alpha1" },
      }));
      await rejects7(path, `user "u1" has an exec plugin with apiVersion`);
    });
    await t.step("exec plugin without apiVersion", async () => {
      await write(kubeconfig(ok, { exec: { command: "aws" } }));
      await rejects7(path, "is malformed");
    });
    await t.step("exec plugin needing a terminal", async () => {
      await write(kubeconfig(ok, {
        exec: {
          command: "aws",
          apiVersion: "client.authentication.k8s.io/v1",
          interactiveMode: "Always",
        },
      }));
      await rejects7(path, "needs an interactive terminal");
    });
    await t.step("certificate without key", async () => {
      await write(kubeconfig(ok, { "client-certificate-data": btoa(CERT) }));
      await rejects7(path, "certificate without a key");
    });
    await t.step("missing CA file", async () => {
      await write(kubeconfig({ ...ok, "certificate-authority": "nope/ca.crt" }, undefined));
      await rejects7(path, `${dir}/nope/ca.crt`);
    });
    await t.step("wrong type", async () => {
      await write(kubeconfig({ server: 42 }, undefined));
      await rejects7(path, "is malformed");
    });
  });
});

Deno.test("loadKubeconfig never echoes token or key contents in errors", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/kc.yaml`;
    // Broken YAML right next to a token: the yaml library would quote the line.
    await Deno.writeTextFile(
      path,
      `users:\n- name: u1\n  user:\n    token: ${SECRET_TOKEN}\n   bad: [unclosed\n`,
    );
    const e1 = await rejects7(path, "neither valid JSON nor valid YAML");
    assert.ok(!e1.message.includes(SECRET_TOKEN));

    await Deno.writeTextFile(
      path,
      JSON.stringify(kubeconfig({ server: "https://h:1" }, {
        "client-certificate-data": btoa(CERT),
        "client-key-data": `${SECRET_TOKEN}!!not-base64`,
        token: SECRET_TOKEN,
      })),
    );
    const e2 = await rejects7(path, 'client-key-data of user "u1" is not valid base64');
    assert.ok(!e2.message.includes(SECRET_TOKEN));

    await Deno.writeTextFile(
      path,
      JSON.stringify(kubeconfig({ server: "https://h:1" }, {
        "client-certificate-data": btoa(CERT),
        "client-key-data": btoa(SECRET_TOKEN),
      })),
    );
    const e3 = await rejects7(path, "is not base64-encoded PEM");
    assert.ok(!e3.message.includes(SECRET_TOKEN));
  });
});

Deno.test("inClusterConnection uses the service account and brackets IPv6 hosts", async () => {
  await withDir(async (dir) => {
    assert.deepEqual(inClusterConnection({}, { saDir: dir }), undefined);
    assert.deepEqual(
      inClusterConnection({ KUBERNETES_SERVICE_HOST: "10.96.0.1" }, { saDir: dir }),
      undefined,
    );
    const env = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };
    assert.throws(
      () => inClusterConnection(env, { saDir: dir }),
      (err) =>
        err instanceof KubeError && kubeErrorCode(err) === 7 &&
        err.message.includes(`${dir}/token`),
    );

    await Deno.writeTextFile(`${dir}/token`, SECRET_TOKEN);
    assert.deepEqual(inClusterConnection(env, { saDir: dir }), {
      server: "https://10.96.0.1:443",
      tokenFile: `${dir}/token`,
      insecureSkipTlsVerify: false,
    });
    await Deno.writeTextFile(`${dir}/ca.crt`, CA);
    assert.deepEqual(
      inClusterConnection({ KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "6443" }, {
        saDir: dir,
      }),
      {
        server: "https://[fd00::1]:6443",
        tokenFile: `${dir}/token`,
        caCertPem: CA,
        insecureSkipTlsVerify: false,
      },
    );
  });
});

Deno.test("loadKubeconfig: the context option replaces current-context", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/kc.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify({
        clusters: [
          { name: "prod", cluster: { server: "https://prod:6443" } },
          { name: "dev", cluster: { server: "https://dev:6443" } },
        ],
        users: [{ name: "p", user: { token: "tp" } }, { name: "d", user: { token: "td" } }],
        contexts: [
          { name: "prod", context: { cluster: "prod", user: "p" } },
          { name: "dev", context: { cluster: "dev", user: "d" } },
        ],
        "current-context": "prod",
      }),
    );
    assert.equal((await loadKubeconfig(path)).server, "https://prod:6443");
    const dev = await loadKubeconfig(path, { context: "dev" });
    assert.equal(dev.server, "https://dev:6443");
    assert.equal(dev.token, "td");
    const err = await loadKubeconfig(path, { context: "staging" }).catch((e) => e);
    assert.ok(err instanceof KubeError && err.kind === "config");
    assert.match(err.message, /no context named "staging"/);
  });
});

Deno.test("loadKubeconfig merges a KUBECONFIG list as kubectl does", async () => {
  await withDir(async (dir) => {
    await Deno.mkdir(`${dir}/a`);
    await Deno.mkdir(`${dir}/b/pki`, { recursive: true });
    await Deno.writeTextFile(`${dir}/b/pki/ca.crt`, CA);
    // a: the current-context and the user; b: the cluster (its CA relative to b/), and a
    // second definition of the user and a current-context, both ignored (first wins).
    await Deno.writeTextFile(
      `${dir}/a/config`,
      JSON.stringify({
        users: [{ name: "me", user: { token: "from-a" } }],
        contexts: [{ name: "work", context: { cluster: "c", user: "me" } }],
        "current-context": "work",
      }),
    );
    await Deno.writeTextFile(
      `${dir}/b/config`,
      JSON.stringify({
        clusters: [{
          name: "c",
          cluster: { server: "https://c:6443", "certificate-authority": "pki/ca.crt" },
        }],
        users: [{ name: "me", user: { token: "from-b" } }],
        contexts: [{ name: "other", context: { cluster: "c" } }],
        "current-context": "other",
      }),
    );

    const paths = kubeconfigPaths(
      `${dir}/a/config::${dir}/missing:${dir}/b/config:${dir}/a/config`,
    );
    assert.deepEqual(paths, [`${dir}/a/config`, `${dir}/missing`, `${dir}/b/config`]);
    assert.deepEqual(await loadKubeconfig(paths), {
      server: "https://c:6443",
      caCertPem: CA,
      insecureSkipTlsVerify: false,
      token: "from-a",
    });
    assert.equal((await loadKubeconfig(paths, { context: "other" })).token, undefined);
    const none = await loadKubeconfig([`${dir}/missing`]).catch((e) => e);
    assert.ok(none instanceof KubeError && /None of the kubeconfig files/.test(none.message));
  });
});

Deno.test("loadKubeconfig keeps an exec user for the client to run", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/kc.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify(kubeconfig({ server: "https://h:1" }, {
        exec: {
          apiVersion: "client.authentication.k8s.io/v1beta1",
          command: "aws",
          args: ["eks", "get-token"],
          env: [{ name: "AWS_PROFILE", value: "p" }],
          installHint: "install the AWS CLI",
        },
      })),
    );
    assert.deepEqual((await loadKubeconfig(path)).exec, {
      command: "aws",
      args: ["eks", "get-token"],
      env: { AWS_PROFILE: "p" },
      apiVersion: "client.authentication.k8s.io/v1beta1",
      provideClusterInfo: false,
      installHint: "install the AWS CLI",
      user: "u1",
    });
  });
});

Deno.test("Uint8Array.fromBase64 (kubeconfig and tls_pin, instead of atob) accepts and decodes as atob does", () => {
  // Both decode whitespace-stripped base64; a Deno upgrade changing either would change what a
  // kubeconfig's *-data or a PEM body means. Random strings over the alphabet, padding, the
  // URL-safe letters and a few others, 50,000 of them.
  const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_.!";
  let seed = 30;
  const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  for (let i = 0; i < 50_000; i++) {
    let s = "";
    for (let j = rnd(13); j > 0; j--) s += alpha[rnd(rnd(10) === 0 ? alpha.length : 65)];
    let viaAtob: string | undefined;
    let viaFrom: string | undefined;
    try {
      viaAtob = [...atob(s)].map((c) => c.charCodeAt(0)).join(",");
    } catch { /* rejected */ }
    try {
      viaFrom = [...Uint8Array.fromBase64(s)].join(",");
    } catch { /* rejected */ }
    assert.equal(viaFrom, viaAtob, JSON.stringify(s));
  }
});

Deno.test("loadKubeconfig loads the room's other files, zod and yaml only for their branch (issue 30)", async (t) => {
  // What a fresh process that loads one kubeconfig through lib/k8s/kubeconfig/load.ts (the
  // per-call entry) fetches, from Deno's debug log: the room's files, and the npm packages zod
  // and yaml. The plugin's kind of kubeconfig (JSON, tokenFile, CA data) needs load.ts and
  // document.ts only. tests/integration/lazy_import_test.ts checks a real ADD the same way, as root.
  const load = new URL("../../lib/k8s/kubeconfig/load.ts", import.meta.url).href;
  const fetched = async (path: string) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        `const { loadKubeconfig } = await import(${JSON.stringify(load)});
         await loadKubeconfig(${JSON.stringify(path)});`,
      ],
      env: { DENO_LOG: "debug", NO_COLOR: "1" },
      stdout: "null",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.ok(out.success, stderr.slice(-1500));
    const room = stderr.matchAll(/fetch_no_follow - specifier: \S+\/lib\/k8s\/kubeconfig\/(\S+)/g);
    const npm = stderr.matchAll(/Resolved package folder of (zod|yaml)@/g);
    return [...new Set([...room, ...npm].map((m) => m[1]))].sort();
  };
  const plain = kubeconfig({ server: "https://h:1" }, undefined);
  const cases: [string, string, string[]][] = [
    [
      "JSON, tokenFile, CA data",
      JSON.stringify(kubeconfig(
        { server: "https://h:1", "certificate-authority-data": btoa(CA) },
        { tokenFile: "token" },
      )),
      ["document.ts", "load.ts"],
    ],
    [
      "YAML",
      "clusters: [{name: c1, cluster: {server: 'https://h:1'}}]\n" +
      "contexts: [{name: ctx, context: {cluster: c1}}]\ncurrent-context: ctx\n",
      ["document.ts", "load.ts", "yaml", "yaml.ts"],
    ],
    [
      // An own `__proto__` key (JSON.parse makes one) is left to zod, which accepts the document.
      "a document the fast check refuses",
      JSON.stringify(plain).replace("{", '{"__proto__":{},'),
      ["document.ts", "load.ts", "schema.ts", "zod"],
    ],
    [
      "an exec user",
      JSON.stringify(kubeconfig({ server: "https://h:1" }, {
        exec: { apiVersion: "client.authentication.k8s.io/v1", command: "cred" },
      })),
      ["document.ts", "exec.ts", "load.ts"],
    ],
  ];
  await withDir(async (dir) => {
    for (const [name, text, want] of cases) {
      await t.step(name, async () => {
        await Deno.writeTextFile(`${dir}/kc`, text);
        assert.deepEqual(await fetched(`${dir}/kc`), want);
      });
    }
  });
});
