/**
 * Token rotation for the per-call plugin (issue 29 §4), against a real kube-apiserver:
 * `manifold install` runs as a process (its keep-in-step loop at the default period) and
 * mirrors a service-account directory laid out exactly as kubelet's AtomicWriter writes a
 * projected volume (tests/support/projected_volume.ts); the test rotates that directory as
 * kubelet does. The tokens are TokenRequest tokens of deploy/'s ServiceAccount, each bound to
 * its own Secret: deleting the Secret makes the server refuse the token at once, which is
 * what an expired token is to the server (a real expiry cannot be shorter than 600 s). The
 * plugin — a real process, real delegates in a real netns, the config the installer
 * generated — then ADDs with the new token and the network-status it publishes is read back.
 * Needs root and `MANIFOLD_KUBE_APISERVER` (else skipped with one line).
 */

import assert from "node:assert/strict";
import type { KubeApiServer } from "../support/kube_apiserver.ts";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { linkNames, Scratch } from "../support/netns.ts";
import { MANIFOLD } from "../support/plugin.ts";
import { ProjectedVolume } from "../support/projected_volume.ts";
import { until } from "../support/wait.ts";
import { tokenDue } from "../../lib/install/mod.ts";
import { expectOk } from "../support/world.ts";
import { deployObjects, done, networkStatus, POD, realWorld } from "./cluster.ts";

const suite = realApiSuite({ root: true });

const SA_NS = "kube-system";
const SA = "manifold";
const USER = `system:serviceaccount:${SA_NS}:${SA}`;
const STATUS = "k8s.v1.cni.cncf.io/network-status";

/** deploy/'s ServiceAccount, ClusterRole and binding (idempotent). */
async function deployAccount(api: KubeApiServer): Promise<void> {
  for (const o of await deployObjects()) {
    if (o.metadata?.name !== SA) continue;
    if (["ServiceAccount", "ClusterRole", "ClusterRoleBinding"].includes(o.kind)) {
      await api.admin.ensure(o);
    }
  }
}

/**
 * A token of deploy/'s ServiceAccount (TokenRequest, 600 s: the shortest a projected token
 * may ask for) bound to a new Secret `name`: deleting the Secret invalidates the token.
 */
async function boundToken(api: KubeApiServer, name: string): Promise<string> {
  const secret = await api.admin.create({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, namespace: SA_NS },
    type: "Opaque",
  });
  const r = await api.admin.request(
    "POST",
    `/api/v1/namespaces/${SA_NS}/serviceaccounts/${SA}/token`,
    {
      body: {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: {
          expirationSeconds: 600,
          boundObjectRef: { apiVersion: "v1", kind: "Secret", name, uid: secret.metadata.uid },
        },
      },
    },
  );
  return r.status.token as string;
}

/** Who the server says `token` is (SelfSubjectReview), or undefined when it refuses it (401). */
async function whoIs(api: KubeApiServer, token: string): Promise<string | undefined> {
  const client = api.client(token);
  try {
    const r = await client.raw("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
    });
    if (r.status === 401) return undefined;
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return (r.body as { status: { userInfo: { username: string } } }).status.userInfo.username;
  } finally {
    client.close();
  }
}

/** A running `manifold install` (scripts/manifold, as the DaemonSet runs the binary). */
interface Installer {
  /** stderr so far (JSON log lines). */
  log(): string;
  /** SIGTERM; the exit code and the whole stderr. */
  stop(): Promise<{ code: number; stderr: string }>;
}

function startInstaller(args: string[]): Installer {
  const child = new Deno.Command(MANIFOLD, {
    args: ["install", ...args],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let err = "";
  const pump = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) err += chunk;
  })();
  let stopped: Promise<{ code: number; stderr: string }> | undefined;
  return {
    log: () => err,
    stop() {
      stopped ??= (async () => {
        try {
          child.kill("SIGTERM");
        } catch { /* already gone */ }
        const status = await child.status;
        await pump.catch(() => {});
        return { code: status.code, stderr: err };
      })();
      return stopped;
    },
  };
}

/** The installer's flags for a node whose CNI config directory is `confDir` (root `/`). */
function installArgs(
  api: KubeApiServer,
  dirs: { conf: string; bin: string; cache: string },
  saDir: string,
): string[] {
  return [
    "--host-root=/",
    `--cni-conf-dir=${dirs.conf}`,
    `--cni-bin-dir=${dirs.bin}`,
    "--skip-binary-copy",
    "--primary-config=10-default.conflist",
    `--kube-server=${api.server}`,
    `--service-account-dir=${saDir}`,
    `--plugin-conf=${
      JSON.stringify({
        confDir: dirs.conf,
        cniDir: dirs.cache,
        binDir: dirs.bin,
        logLevel: "debug",
        logToStderr: true,
      })
    }`,
  ];
}

async function readIf(path: string): Promise<string | undefined> {
  return await Deno.readTextFile(path).catch(() => undefined);
}

suite.test("per-call ADDs after the first token is invalidated still publish network-status: the installer's mirror follows kubelet's AtomicWriter swap", async (api) => {
  await deployAccount(api);
  const w = await realWorld(api, { annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
  const holders = [`mft-token-a-${w.scratch.id}`, `mft-token-b-${w.scratch.id}`];
  let installer: Installer | undefined;
  try {
    const first = await boundToken(api, holders[0]);
    assert.equal(await whoIs(api, first), USER);
    const volume = new ProjectedVolume(`${w.dirs.kube}/serviceaccount`);
    const payload = (token: string) => ({ token, "ca.crt": api.caPem, namespace: SA_NS });
    await volume.write(payload(first));

    installer = startInstaller(installArgs(api, w.dirs, volume.dir));
    const conflist = `${w.dirs.conf}/00-manifold.conflist`;
    const mirror = `${w.dirs.conf}/manifold.d/token`;
    await until(async () => (await readIf(conflist)) !== undefined, "00-manifold.conflist", 60_000);
    // What a runtime hands the plugin: the generated entry with the list's name and version.
    const list = JSON.parse((await readIf(conflist))!);
    const config = { ...list.plugins[0], name: list.name, cniVersion: list.cniVersion };
    const kubeconfigPath = `${w.dirs.conf}/manifold.d/manifold.kubeconfig`;
    assert.equal(config.kubeconfig, kubeconfigPath);
    const kubeconfig = JSON.parse((await readIf(kubeconfigPath))!);
    assert.deepEqual(kubeconfig.users[0].user, { tokenFile: mirror }, "the token only by file");

    // The mirror: the current token, 0600, owned by root (the installer).
    assert.equal(await readIf(mirror), first);
    const st = await Deno.lstat(mirror);
    assert.ok(st.isFile, "a regular file, not a link into the pod's volume");
    assert.equal(st.mode! & 0o777, 0o600);
    assert.equal(st.uid, 0);

    const add = async (what: string) => {
      const out = await w.call("ADD", { config });
      expectOk(out, what);
      assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1"], what);
      const status = networkStatus(await w.pod());
      assert.deepEqual(
        status?.map((s) => [s.name, s.interface]),
        [["cbr0", "eth0"], [`${w.ns}/bridge-net`, "net1"]],
        `${what}: network-status as the server stores it`,
      );
      expectOk(await w.call("DEL", { config }), `DEL after ${what}`);
      // Cleared by the admin, so the next ADD has to publish it again.
      await api.admin.patch(
        { apiVersion: "v1", kind: "Pod", namespace: w.ns, name: POD },
        { metadata: { annotations: { [STATUS]: null } } },
        "status",
      );
      assert.equal(networkStatus(await w.pod()), undefined);
    };
    await add("ADD with the first token");

    // kubelet rotates: a new token, published by an AtomicWriter swap of `..data`.
    const second = await boundToken(api, holders[1]);
    const swapped = performance.now();
    await volume.write(payload(second));
    await until(
      async () => (await readIf(mirror)) === second,
      "the rotated token mirrored",
      30_000,
    );
    const lagMs = Math.round(performance.now() - swapped);
    console.log(`rotated token mirrored ${lagMs} ms after the ..data swap (poll period 1000 ms)`);
    assert.equal((await Deno.lstat(mirror)).mode! & 0o777, 0o600);

    // The first token expires (to the server): its bound Secret is deleted.
    await api.admin.delete("v1", "Secret", SA_NS, holders[0]);
    await until(async () => (await whoIs(api, first)) === undefined, "first token refused", 30_000);
    assert.equal(await whoIs(api, second), USER);

    await add("ADD after the first token was refused");
    const log = installer.log();
    assert.equal(
      log.split("\n").filter((l) => l.includes("service-account token mirrored for the plugin"))
        .length,
      2,
      log,
    );
    // Nothing went wrong in between (e.g. a check the binary's permissions do not allow).
    assert.deepEqual(
      log.split("\n").filter((l) => /"level":"(warning|error)"/.test(l)),
      [],
      "no warning or error from the installer",
    );
  } finally {
    const out: { code: number; stderr: string } | undefined = installer
      ? await installer.stop()
      : undefined;
    for (const h of holders) await api.admin.delete("v1", "Secret", SA_NS, h).catch(() => {});
    await done(w);
    if (out) assert.equal(out.code, 0, out.stderr.slice(-2000));
  }
});

suite.test("the token leaving the volume: the installer says so and keeps the last copy (0600)", async (api) => {
  await deployAccount(api);
  const scratch = new Scratch();
  let installer: Installer | undefined;
  const holder = `mft-token-v-${scratch.id}`;
  try {
    const base = await scratch.dir();
    const dirs = { conf: `${base}/net.d`, bin: `${base}/bin`, cache: `${base}/cache` };
    for (const d of Object.values(dirs)) await Deno.mkdir(d, { recursive: true });
    await Deno.writeTextFile(
      `${dirs.conf}/10-default.conflist`,
      JSON.stringify({ cniVersion: "1.0.0", name: "cbr0", plugins: [{ type: "bridge" }] }),
    );
    const token = await boundToken(api, holder);
    const volume = new ProjectedVolume(`${base}/serviceaccount`);
    await volume.write({ token, "ca.crt": api.caPem, namespace: SA_NS });
    installer = startInstaller(installArgs(api, dirs, volume.dir));
    const mirror = `${dirs.conf}/manifold.d/token`;
    await until(async () => (await readIf(mirror)) === token, "token mirrored", 60_000);

    // An update whose payload has no token: AtomicWriter removes the `token` link.
    await volume.write({ "ca.crt": api.caPem, namespace: SA_NS });
    await until(
      () => installer!.log().includes("cannot refresh the plugin's credentials"),
      "the installer's warning",
      30_000,
    );
    const line = installer.log().split("\n").find((l) =>
      l.includes("cannot refresh the plugin's credentials")
    )!;
    assert.match(line, /"level":"warning"/);
    assert.match(line, /keeps the last copy/);
    assert.equal(JSON.parse(line).tokenFile, mirror);
    assert.match(JSON.parse(line).error, /serviceaccount\/token/);
    assert.equal(await readIf(mirror), token, "the last token is kept");
    assert.equal((await Deno.lstat(mirror)).mode! & 0o777, 0o600);
  } finally {
    const out: { code: number; stderr: string } | undefined = installer
      ? await installer.stop()
      : undefined;
    await api.admin.delete("v1", "Secret", SA_NS, holder).catch(() => {});
    await scratch.cleanup();
    if (out) assert.equal(out.code, 0, out.stderr.slice(-2000));
  }
});

suite.test("tokenDue agrees with the server: status.expirationTimestamp (what kubelet rotates against) for a plain and an extended token; a pod-bound token dies with its pod", async (api) => {
  await deployAccount(api);
  const name = `mft-due-${crypto.randomUUID().slice(0, 8)}`;
  try {
    // A pod of the ServiceAccount (never run: no kubelet), as the DaemonSet's pod would be.
    const pod = await api.admin.create({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: SA_NS },
      spec: {
        serviceAccountName: SA,
        automountServiceAccountToken: false,
        nodeName: "envtest-node",
        containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }],
      },
    });
    const request = async (seconds: number, bound: Record<string, unknown>) => {
      const r = await api.admin.request(
        "POST",
        `/api/v1/namespaces/${SA_NS}/serviceaccounts/${SA}/token`,
        {
          body: {
            apiVersion: "authentication.k8s.io/v1",
            kind: "TokenRequest",
            spec: { expirationSeconds: seconds, boundObjectRef: bound },
          },
        },
      );
      return { token: r.status.token as string, expires: Date.parse(r.status.expirationTimestamp) };
    };
    const podRef = { apiVersion: "v1", kind: "Pod", name, uid: pod.metadata.uid };
    // kubelet's default projected request (3607 s, bound to the pod): signed for a year
    // (--service-account-extend-token-expiration, on by default), due after 3607 s.
    const ext = await request(3607, podRef);
    const extDue = tokenDue(ext.token);
    assert.equal(extDue?.claim, "warnafter");
    assert.equal(extDue?.due.getTime(), ext.expires);
    assert.ok(extDue.expires.getTime() - ext.expires > 30 * 86_400_000, "signed for far longer");
    assert.ok(extDue.issuedAt && ext.expires - extDue.issuedAt.getTime() === 3607_000);
    // Any other lifetime is not extended: due at exp.
    const plain = await request(600, podRef);
    const plainDue = tokenDue(plain.token);
    assert.equal(plainDue?.claim, "exp");
    assert.equal(plainDue?.due.getTime(), plain.expires);

    // A projected token is bound to its pod: once the pod object is gone (a DaemonSet pod
    // replaced or removed) the server refuses it, a year of exp notwithstanding; the copy
    // the plugin reads is only good again when the next pod's installer mirrors its own.
    assert.equal(await whoIs(api, ext.token), USER);
    const deleted = performance.now();
    await api.admin.delete("v1", "Pod", SA_NS, name);
    await until(async () => (await whoIs(api, ext.token)) === undefined, "token refused", 30_000);
    const ms = Math.round(performance.now() - deleted);
    console.log(`the pod-bound token was refused ${ms} ms after the pod's deletion`);
  } finally {
    await api.admin.delete("v1", "Pod", SA_NS, name).catch(() => {});
  }
});

suite.end();
