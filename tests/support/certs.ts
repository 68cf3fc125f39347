/**
 * Test PKI made with the `openssl` CLI (OpenSSL 3): a CA, a server certificate for
 * `127.0.0.1`/`::1`/`localhost`, and client certificates shaped like a Kubernetes user
 * (CN = user name, O = group). EC P-256 keys, PKCS#8 PEM, valid for 2 days.
 *
 * @module
 */

/** A PEM certificate with its PEM private key. */
export interface KeyPair {
  certPem: string;
  keyPem: string;
}

/** The default PKI of the Kubernetes API stand-in. */
export interface CertSet {
  ca: KeyPair;
  /** `serverAuth`, SAN `IP:127.0.0.1, IP:::1, DNS:localhost`. */
  server: KeyPair;
  /** `clientAuth`, subject `/O=<clientGroup>/CN=<clientUser>`. */
  client: KeyPair;
  clientUser: string;
  clientGroup: string;
}

/** Options of {@link issueCert}. */
export interface IssueOptions {
  /** Subject common name (the Kubernetes user name for client certificates). */
  cn: string;
  /** Subject organisation (the Kubernetes group). */
  org?: string;
  /** Extended key usage. */
  usage: "serverAuth" | "clientAuth";
  /** subjectAltName entries, e.g. `["IP:127.0.0.1", "DNS:localhost"]`. */
  sans?: string[];
}

const DAYS = "2";

async function openssl(args: string[], cwd: string): Promise<void> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command("openssl", { args, cwd, stdout: "null", stderr: "piped" })
      .output();
  } catch (err) {
    throw new Error(
      `Cannot run openssl (install the openssl package): ${(err as Error).message}`,
    );
  }
  if (!out.success) {
    throw new Error(
      `openssl ${args[0]} failed: ${new TextDecoder().decode(out.stderr).trim()}`,
    );
  }
}

async function inTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "manifold-pki-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

/**
 * Creates a self-signed CA.
 * @param cn the CA's common name.
 * @returns the CA certificate and key (PEM).
 */
export function createCa(cn: string): Promise<KeyPair> {
  return inTempDir(async (dir) => {
    await openssl(
      [
        "req",
        "-x509",
        ...EC,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        DAYS,
        "-subj",
        `/CN=${cn}`,
      ],
      dir,
    );
    return {
      certPem: await Deno.readTextFile(`${dir}/ca.crt`),
      keyPem: await Deno.readTextFile(`${dir}/ca.key`),
    };
  });
}

/**
 * Issues a leaf certificate signed by `ca`.
 * @param ca the signing CA.
 * @param opts subject, usage and SANs.
 * @returns the certificate and key (PEM).
 */
export function issueCert(ca: KeyPair, opts: IssueOptions): Promise<KeyPair> {
  return inTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/ca.crt`, ca.certPem);
    await Deno.writeTextFile(`${dir}/ca.key`, ca.keyPem);
    const ext = [
      "basicConstraints=CA:FALSE",
      "keyUsage=digitalSignature,keyEncipherment",
      `extendedKeyUsage=${opts.usage}`,
    ];
    if (opts.sans?.length) ext.push(`subjectAltName=${opts.sans.join(",")}`);
    await Deno.writeTextFile(`${dir}/leaf.ext`, ext.join("\n") + "\n");
    const subj = `${opts.org ? `/O=${opts.org}` : ""}/CN=${opts.cn}`;
    await openssl(["req", ...EC, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", subj], dir);
    await openssl(
      [
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.crt",
        "-days",
        DAYS,
        "-extfile",
        "leaf.ext",
      ],
      dir,
    );
    return {
      certPem: await Deno.readTextFile(`${dir}/leaf.crt`),
      keyPem: await Deno.readTextFile(`${dir}/leaf.key`),
    };
  });
}

let cached: Promise<CertSet> | undefined;

/**
 * The stand-in's CA, server and client certificates, generated once per process
 * (≈0.1 s) and shared by every stand-in.
 * @returns the certificate set.
 * @throws Error when `openssl` is missing or fails.
 */
export function defaultCertSet(): Promise<CertSet> {
  cached ??= (async () => {
    const clientUser = "system:node:manifold-test";
    const clientGroup = "system:nodes";
    const ca = await createCa("manifold-test-ca");
    const [server, client] = await Promise.all([
      issueCert(ca, {
        cn: "kube-apiserver",
        usage: "serverAuth",
        sans: ["IP:127.0.0.1", "IP:0:0:0:0:0:0:0:1", "DNS:localhost"],
      }),
      issueCert(ca, { cn: clientUser, org: clientGroup, usage: "clientAuth" }),
    ]);
    return { ca, server, client, clientUser, clientGroup };
  })();
  cached.catch(() => cached = undefined);
  return cached;
}
