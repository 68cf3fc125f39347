/**
 * A real Kubernetes API server for tests, in the style of controller-runtime's envtest:
 * etcd and kube-apiserver on free loopback ports, fresh certificates (tests/support/certs.ts),
 * static bearer tokens (an admin in `system:masters`, plus any users the test asks for), RBAC
 * on, service-account token signing (TokenRequest works), no controller-manager.
 *
 * Enabled when `MANIFOLD_KUBE_APISERVER` names a kube-apiserver binary and `etcd` is on PATH;
 * otherwise every real-API test is ignored and one line (printed once per `deno test` run)
 * says how to enable them. Test files use {@link realApiSuite}: one server per file, started
 * by the first test that needs it and stopped by the file's last test (and, as a safety net,
 * by the `unload` event), each test in its own namespace.
 *
 * The object helpers (create, get, patch, delete, watch, TokenRequest) are in
 * tests/support/kube_rest.ts.
 *
 * @module
 */

import { createCa, issueCert } from "./certs.ts";
import { KubeRest } from "./kube_rest.ts";
import { loopbackPort } from "./ports.ts";

/** Environment variable naming the kube-apiserver binary. */

/** The Service ClusterIP range of the API server. */
export const SERVICE_CIDR = "10.96.0.0/16";

/** The `kubernetes` Service's ClusterIP (the range's first address), in the serving cert. */
export const KUBERNETES_SERVICE_IP = "10.96.0.1";

export const KUBE_APISERVER_ENV = "MANIFOLD_KUBE_APISERVER";

/** The one line printed when the real-API tests are skipped. */
export const SKIP_NOTICE = `real kube-apiserver tests skipped: set ${KUBE_APISERVER_ENV} to a ` +
  "kube-apiserver binary (server/bin/kube-apiserver of the official Kubernetes release tarball " +
  "kubernetes-server-linux-amd64.tar.gz) and install etcd (apt-get install etcd-server)";

/** A static-token user of the server. */
export interface StaticUser {
  name: string;
  groups?: string[];
  /** The bearer token; generated when absent. */
  token?: string;
}

/** Options of {@link startKubeApiServer}. */
export interface StartOptions {
  /** kube-apiserver binary; default `$MANIFOLD_KUBE_APISERVER`. */
  binary?: string;
  /** Users besides the admin (static tokens; read at start, kept across restarts). */
  users?: StaticUser[];
  /** Extra kube-apiserver flags. */
  extraArgs?: string[];
  /** Bound on reaching `/readyz`, ms; default 60 000. */
  readyTimeoutMs?: number;
  /** Write an audit log (level Metadata, ResponseComplete) readable with `auditEvents()`. */
  audit?: boolean;
  /**
   * Where the retry line goes when kube-apiserver exited before `/readyz` and is started once
   * more (fresh etcd data dir and ports); default `console.error`.
   */
  log?: (line: string) => void;
}

/**
 * kube-apiserver or its etcd exited before `/readyz` answered `ok` (e.g. a loopback port taken
 * by another process between choosing it and binding it): the start is repeated once.
 */
class ApiServerExited extends Error {}

/** One audit record (`audit.k8s.io/v1` Event, level Metadata), the fields tests read. */
export interface AuditEvent {
  verb: string;
  requestURI: string;
  user: { username: string; groups?: string[] };
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
  responseStatus?: { code: number };
}

/** The binary named by `MANIFOLD_KUBE_APISERVER` when it and `etcd` are usable, else undefined. */
export function kubeApiServerBinary(): string | undefined {
  const bin = Deno.env.get(KUBE_APISERVER_ENV);
  if (!bin) return undefined;
  try {
    if (!Deno.statSync(bin).isFile) return undefined;
  } catch {
    return undefined;
  }
  return onPath("etcd") ? bin : undefined;
}

function onPath(cmd: string): boolean {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (Deno.statSync(`${dir}/${cmd}`).isFile) return true;
    } catch { /* next */ }
  }
  return false;
}

function randomToken(): string {
  return crypto.randomUUID().replaceAll("-", "") + crypto.randomUUID().replaceAll("-", "");
}

/** A process whose output goes to `log` (appended), started through `bash -c exec`. */
class Daemon {
  #child: Deno.ChildProcess;
  readonly status: Promise<Deno.CommandStatus>;
  #exited = false;

  constructor(readonly cmd: string, args: string[], readonly log: string) {
    this.#child = new Deno.Command("bash", {
      args: ["-c", `exec "$0" "$@" >>'${log}' 2>&1`, cmd, ...args],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    this.status = this.#child.status.finally(() => this.#exited = true);
  }

  get pid(): number {
    return this.#child.pid;
  }

  get exited(): boolean {
    return this.#exited;
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  async stop(graceMs = 5000): Promise<void> {
    if (this.#exited) return;
    this.#signal("SIGTERM");
    const timer = setTimeout(() => this.#signal("SIGKILL"), graceMs);
    try {
      await this.status;
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILL without waiting (the `unload` safety net). */
  killNow(): void {
    if (!this.#exited) this.#signal("SIGKILL");
  }

  #signal(sig: Deno.Signal) {
    try {
      this.#child.kill(sig);
    } catch { /* already gone */ }
  }
}

async function tail(file: string, lines = 30): Promise<string> {
  try {
    return (await Deno.readTextFile(file)).trim().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/** A running etcd + kube-apiserver pair. Always {@link KubeApiServer.stop} it. */
export class KubeApiServer {
  /** Base URL of the API, `https://127.0.0.1:<port>`. */
  readonly server: string;
  /** etcd's client URL, `http://127.0.0.1:<port>` (v3 HTTP gateway under `/v3/`). */
  readonly etcdUrl: string;
  /** Admin client (`system:masters`). */
  readonly admin: KubeRest;
  /** How long the last (re)start took until `/readyz` answered `ok`, ms. */
  startMs = 0;
  /** {@link startKubeApiServer} from call to ready (certificates, files, both processes), ms. */
  bootMs = 0;
  #etcd?: Daemon;
  #apiserver?: Daemon;
  #stopped = false;

  /** Temp dir: certificates, `tokens.csv`, etcd's data, `apiserver.log`, `etcd.log`, `audit.log`. */
  readonly dir: string;
  /** PEM CA of the server certificate. */
  readonly caPem: string;
  /** Bearer token of `envtest-admin` (group `system:masters`). */
  readonly adminToken: string;
  /** The static users besides the admin, with their tokens. */
  readonly users: Required<StaticUser>[];
  /** Loopback ports: kube-apiserver (HTTPS), etcd client and peer. */
  readonly ports: { api: number; etcd: number; etcdPeer: number };
  /** The kube-apiserver binary. */
  readonly binary: string;
  /** Flags added to kube-apiserver's. */
  readonly extraArgs: string[];

  /** @internal use {@link startKubeApiServer}. */
  constructor(init: {
    dir: string;
    caPem: string;
    adminToken: string;
    users: Required<StaticUser>[];
    ports: { api: number; etcd: number; etcdPeer: number };
    binary: string;
    extraArgs: string[];
  }) {
    ({
      dir: this.dir,
      caPem: this.caPem,
      adminToken: this.adminToken,
      users: this.users,
      ports: this.ports,
      binary: this.binary,
      extraArgs: this.extraArgs,
    } = init);
    this.server = `https://127.0.0.1:${this.ports.api}`;
    this.etcdUrl = `http://127.0.0.1:${this.ports.etcd}`;
    this.admin = new KubeRest(this.server, this.caPem, this.adminToken);
  }

  /** Bearer token of a static user given at start. @throws Error for an unknown user. */
  token(user: string): string {
    const u = this.users.find((x) => x.name === user);
    if (!u) throw new Error(`no static user ${user}`);
    return u.token;
  }

  /** A REST client authenticating with `token`. */
  client(token: string): KubeRest {
    return new KubeRest(this.server, this.caPem, token);
  }

  /**
   * Writes a kubeconfig (JSON) for this server: CA inline, and the token inline or as
   * `tokenFile` (the file is written too, 0600).
   */
  async writeKubeconfig(
    path: string,
    auth: { token?: string; tokenFile?: string } = {},
  ): Promise<void> {
    const token = auth.token ?? this.adminToken;
    const user: Record<string, string> = {};
    if (auth.tokenFile) {
      await Deno.writeTextFile(auth.tokenFile, token, { mode: 0o600 });
      user.tokenFile = auth.tokenFile;
    } else {
      user.token = token;
    }
    const doc = {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{
        name: "envtest",
        cluster: { server: this.server, "certificate-authority-data": btoa(this.caPem) },
      }],
      users: [{ name: "envtest-user", user }],
      contexts: [{ name: "envtest", context: { cluster: "envtest", user: "envtest-user" } }],
      "current-context": "envtest",
    };
    await Deno.writeTextFile(path, JSON.stringify(doc, null, 2), { mode: 0o600 });
  }

  /** The audit log so far (empty unless started with `audit: true`). */
  async auditEvents(): Promise<AuditEvent[]> {
    let text = "";
    try {
      text = await Deno.readTextFile(`${this.dir}/audit.log`);
    } catch { /* none yet */ }
    return text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  }

  /** Starts etcd (once) and kube-apiserver, and waits for `/readyz`. */
  async start(readyTimeoutMs = 60_000): Promise<void> {
    const began = performance.now();
    this.#etcd ??= this.#startEtcd();
    this.#apiserver = new Daemon(this.binary, this.#apiserverArgs(), `${this.dir}/apiserver.log`);
    const deadline = Date.now() + readyTimeoutMs;
    const apiserver = this.#apiserver;
    for (;;) {
      if (this.#etcd.exited) {
        throw new ApiServerExited(`etcd exited during start:\n${await tail(this.#etcd.log)}`);
      }
      if (apiserver.exited) {
        throw new ApiServerExited(
          `kube-apiserver exited during start:\n${await tail(apiserver.log)}`,
        );
      }
      const r = await this.admin.raw("GET", "/readyz").catch(() => undefined);
      if (r?.status === 200) break;
      if (Date.now() > deadline) {
        throw new Error(
          `kube-apiserver not ready after ${readyTimeoutMs} ms:\n${await tail(apiserver.log)}`,
        );
      }
      await new Promise((res) => setTimeout(res, 100));
    }
    this.startMs = Math.round(performance.now() - began);
  }

  /**
   * Stops kube-apiserver and starts it again on the same port with the same flags (etcd and
   * its data stay): clients see their connections and watches drop.
   *
   * SIGTERM stops its listener at once, but its graceful shutdown then waits for open
   * watches to end (up to a minute); after `graceMs` it is killed.
   * @param opts `downMs`: how long to stay down before starting again (default 0);
   *   `graceMs`: SIGTERM → SIGKILL delay (default 1000).
   */
  async restartApiServer(opts: { downMs?: number; graceMs?: number } = {}): Promise<void> {
    await this.#apiserver?.stop(opts.graceMs ?? 1000);
    this.admin.close();
    if (opts.downMs) await new Promise((r) => setTimeout(r, opts.downMs));
    await this.start();
  }

  /** etcd's current revision (= the newest resourceVersion of the API). */
  async etcdRevision(): Promise<number> {
    const r = await this.#etcdPost("/v3/kv/range", { key: btoa("\0"), limit: 1 });
    return Number((r.header as { revision: string }).revision);
  }

  /**
   * Compacts etcd's history up to `revision` (default: the current one), physically, through
   * the v3 HTTP gateway (`POST /v3/kv/compaction`): watches and lists from an older
   * resourceVersion then get `410 Gone` from etcd.
   * @returns the revision compacted to.
   */
  async compactEtcd(revision?: number): Promise<number> {
    const rev = revision ?? await this.etcdRevision();
    await this.#etcdPost("/v3/kv/compaction", { revision: String(rev), physical: true });
    return rev;
  }

  /** Stops both processes and removes the temp dir; idempotent, never throws. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.admin.close();
    await this.#apiserver?.stop().catch(() => {});
    await this.#etcd?.stop().catch(() => {});
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }

  /** Synchronous last resort (`unload`): SIGKILL both, remove the temp dir. */
  killNow(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#apiserver?.killNow();
    this.#etcd?.killNow();
    try {
      Deno.removeSync(this.dir, { recursive: true });
    } catch { /* best effort */ }
  }

  async #etcdPost(path: string, body: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${this.etcdUrl}${path}`, {
      method: "POST",
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`etcd ${path}: ${res.status} ${text}`);
    return JSON.parse(text);
  }

  #startEtcd(): Daemon {
    const { etcdPeer } = this.ports;
    const peer = `http://127.0.0.1:${etcdPeer}`;
    return new Daemon("etcd", [
      "--name=envtest",
      `--data-dir=${this.dir}/etcd`,
      `--listen-client-urls=${this.etcdUrl}`,
      `--advertise-client-urls=${this.etcdUrl}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=envtest=${peer}`,
      "--log-level=warn",
      "--logger=zap",
    ], `${this.dir}/etcd.log`);
  }

  #apiserverArgs(): string[] {
    const d = this.dir;
    return [
      "--bind-address=127.0.0.1",
      `--secure-port=${this.ports.api}`,
      `--etcd-servers=${this.etcdUrl}`,
      `--token-auth-file=${d}/tokens.csv`,
      "--authorization-mode=RBAC",
      `--client-ca-file=${d}/ca.crt`,
      `--tls-cert-file=${d}/server.crt`,
      `--tls-private-key-file=${d}/server.key`,
      `--service-account-key-file=${d}/sa.pub`,
      `--service-account-signing-key-file=${d}/sa.key`,
      "--service-account-issuer=https://kubernetes.default.svc",
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      "--endpoint-reconciler-type=none",
      "--allow-privileged=true",
      `--cert-dir=${d}/certs`,
      "--profiling=false",
      "--v=0",
      ...this.extraArgs,
    ];
  }
}

/**
 * Starts etcd and kube-apiserver on free loopback ports with fresh certificates and tokens,
 * and waits until `/readyz` is `ok`. On any failure both processes are stopped and the temp
 * dir removed before the error is thrown. kube-apiserver sometimes dies in a post-start hook
 * under load (seen: the APF configuration controller): when it exits before `/readyz`, the
 * whole start is repeated once (new temp dir, etcd data and ports), with one line to
 * `opts.log` giving the reason.
 * @throws Error when the binary is not configured, kube-apiserver exits twice, etcd exits, or
 *   `/readyz` times out (with the tail of the process's log).
 */
export async function startKubeApiServer(opts: StartOptions = {}): Promise<KubeApiServer> {
  const binary = opts.binary ?? kubeApiServerBinary();
  if (!binary) throw new Error(SKIP_NOTICE);
  try {
    return await startOnce(binary, opts);
  } catch (e) {
    if (!(e instanceof ApiServerExited)) throw e;
    (opts.log ?? console.error)(
      `real kube-apiserver harness: ${e.message.replace(/\n/g, "\n  ")}\n` +
        "  retrying once with a fresh etcd data dir and ports",
    );
  }
  return await startOnce(binary, opts);
}

async function startOnce(binary: string, opts: StartOptions): Promise<KubeApiServer> {
  // etcd fsyncs every write: tmpfs keeps that cheap.
  let base: string | undefined;
  try {
    if (Deno.statSync("/dev/shm").isDirectory) base = "/dev/shm";
  } catch { /* default temp dir */ }
  const began = performance.now();
  const dir = await Deno.makeTempDir({ dir: base, prefix: "manifold-envtest-" });
  let api: KubeApiServer | undefined;
  try {
    const ca = await createCa("manifold-envtest-ca");
    const [server, signer] = await Promise.all([
      issueCert(ca, {
        cn: "kube-apiserver",
        usage: "serverAuth",
        // The `kubernetes` Service's ClusterIP and names too: pods reach the API there
        // (tests/node/daemonset_test.ts maps it to the loopback port, as kube-proxy would).
        sans: [
          "IP:127.0.0.1",
          "DNS:localhost",
          `IP:${KUBERNETES_SERVICE_IP}`,
          "DNS:kubernetes",
          "DNS:kubernetes.default",
          "DNS:kubernetes.default.svc",
        ],
      }),
      createCa("manifold-envtest-sa-signer"),
    ]);
    await Deno.writeTextFile(`${dir}/ca.crt`, ca.certPem);
    await Deno.writeTextFile(`${dir}/server.crt`, server.certPem);
    await Deno.writeTextFile(`${dir}/server.key`, server.keyPem, { mode: 0o600 });
    await Deno.writeTextFile(`${dir}/sa.key`, signer.keyPem, { mode: 0o600 });
    // The verification key: the signer's certificate carries its public key.
    await Deno.writeTextFile(`${dir}/sa.pub`, signer.certPem);
    const adminToken = randomToken();
    const users = (opts.users ?? []).map((u) => ({
      name: u.name,
      groups: u.groups ?? [],
      token: u.token ?? randomToken(),
    }));
    const rows = [
      { name: "envtest-admin", groups: ["system:masters"], token: adminToken },
      ...users,
    ]
      .map((u, i) => `${u.token},${u.name},uid-${i},"${u.groups.join(",")}"`);
    await Deno.writeTextFile(`${dir}/tokens.csv`, rows.join("\n") + "\n", { mode: 0o600 });
    const extraArgs = [...opts.extraArgs ?? []];
    if (opts.audit) {
      const policy = {
        apiVersion: "audit.k8s.io/v1",
        kind: "Policy",
        omitStages: ["RequestReceived"],
        rules: [{ level: "Metadata" }],
      };
      await Deno.writeTextFile(`${dir}/audit-policy.json`, JSON.stringify(policy));
      extraArgs.push(
        `--audit-policy-file=${dir}/audit-policy.json`,
        `--audit-log-path=${dir}/audit.log`,
        "--audit-log-mode=blocking",
      );
    }
    const ports = { api: loopbackPort(), etcd: loopbackPort(), etcdPeer: loopbackPort() };
    api = new KubeApiServer({
      dir,
      caPem: ca.certPem,
      adminToken,
      users,
      ports,
      binary,
      extraArgs,
    });
    await api.start(opts.readyTimeoutMs);
    api.bootMs = Math.round(performance.now() - began);
    return api;
  } catch (e) {
    if (api) await api.stop();
    else await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw e;
  }
}

let noticeShown = false;

/** True (and the skip line printed once per process) when real-API tests cannot run. */
export function realApiIgnored(): boolean {
  if (kubeApiServerBinary()) return false;
  // Test files run in separate isolates of one process: the environment is shared.
  if (!noticeShown && !Deno.env.get("MANIFOLD_REALAPI_NOTICE_SHOWN")) {
    console.log(SKIP_NOTICE);
    Deno.env.set("MANIFOLD_REALAPI_NOTICE_SHOWN", "1");
  }
  noticeShown = true;
  return true;
}

/** One server shared by the tests of a file; see {@link realApiSuite}. */
export interface RealApiSuite {
  /** True when the tests are ignored (no binary or no etcd). */
  readonly ignore: boolean;
  /** The file's server, started on first use. */
  server(): Promise<KubeApiServer>;
  /** Registers a test that gets the server; sanitizers off (the server outlives it). */
  test(name: string, fn: (api: KubeApiServer) => Promise<void>): void;
  /** Registers the file's last test, which stops the server. Call after every `test`. */
  end(): void;
}

/**
 * One kube-apiserver per test file: the first test starts it, {@link RealApiSuite.end}'s
 * test stops it, and the `unload` event kills it if that test did not run (a `--filter`).
 * @param opts passed to {@link startKubeApiServer}; `root: true` also ignores the tests
 *   when not running as root (real netns and delegates).
 */
export function realApiSuite(opts: StartOptions & { root?: boolean } = {}): RealApiSuite {
  const ignore = realApiIgnored() || (opts.root === true && Deno.uid() !== 0);
  let started: Promise<KubeApiServer> | undefined;
  let instance: KubeApiServer | undefined;
  const server = () => {
    started ??= startKubeApiServer(opts).then((s) => {
      instance = s;
      console.log(`kube-apiserver ready in ${s.bootMs} ms at ${s.server}`);
      return s;
    });
    return started;
  };
  if (!ignore) globalThis.addEventListener("unload", () => instance?.killNow());
  const common = { ignore, sanitizeOps: false, sanitizeResources: false, sanitizeExit: false };
  return {
    ignore,
    server,
    test(name, fn) {
      Deno.test({ name, ...common, fn: async () => await fn(await server()) });
    },
    end() {
      if (ignore) return;
      Deno.test({
        name: "stop the kube-apiserver and etcd",
        ...common,
        async fn() {
          await instance?.stop();
        },
      });
    },
  };
}
