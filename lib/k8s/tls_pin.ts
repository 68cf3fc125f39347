/**
 * TLS trust pinned to the kubeconfig's certificate authority (issue 28 §1). Deno verifies a
 * server certificate against its root store (Mozilla's, `DENO_CERT`, the OS store with
 * `DENO_TLS_CA_STORE=system`) *plus* the `caCerts` given, so a certificate issued by any of
 * those roots for the API server's name passes the handshake. client-go trusts the configured
 * CA only (`tls.Config.RootCAs`). After Deno's handshake (chain, validity, host name), this
 * module checks that the server's certificate was issued — signature verified — by one of
 * the kubeconfig's CA certificates (or is one of them), and refuses the connection otherwise.
 *
 * Only what the check needs is parsed: the X.509 `Certificate` DER (RFC 5280 §4.1) down to
 * tbsCertificate, issuer, subject, subjectPublicKeyInfo and the signature; the signature is
 * verified with WebCrypto (no import cost): sha256/384/512WithRSAEncryption,
 * ecdsa-with-SHA256/384 on P-256/P-384, Ed25519. Anything else (RSA-PSS, DSA) is refused,
 * naming the algorithm: fail closed.
 *
 * Limitation: Deno reports only the server's leaf certificate, so a server certificate signed
 * by an intermediate CA passes only when that intermediate is in the kubeconfig's
 * `certificate-authority(-data)` bundle (client-go also accepts the root alone).
 *
 * @module
 */

/** The parts of an X.509 certificate the pin check reads (DER slices). */
export interface CertificateParts {
  /** The whole certificate, DER. */
  der: Uint8Array;
  /** tbsCertificate as signed (tag and length included). */
  tbs: Uint8Array;
  /** The issuer Name, DER. */
  issuer: Uint8Array;
  /** The subject Name, DER. */
  subject: Uint8Array;
  /** subjectPublicKeyInfo, DER (what WebCrypto imports as `"spki"`). */
  spki: Uint8Array;
  /** The SPKI algorithm's parameters as an OID when they are one (an EC curve). */
  spkiCurve?: string;
  /** signatureAlgorithm OID, dotted. */
  signatureAlgorithm: string;
  /** signatureValue, the BIT STRING's bytes. */
  signature: Uint8Array;
}

interface Tlv {
  tag: number;
  start: number;
  body: number;
  end: number;
}

/** One DER TLV at `pos` (definite lengths only, as DER requires). */
function tlv(b: Uint8Array, pos: number): Tlv {
  if (pos + 2 > b.length) throw new Error("truncated DER");
  const tag = b[pos];
  let len = b[pos + 1];
  let body = pos + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || body + n > b.length) throw new Error("bad DER length");
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + b[body + i];
    body += n;
  }
  const end = body + len;
  if (end > b.length) throw new Error("truncated DER");
  return { tag, start: pos, body, end };
}

/** The children of a constructed TLV. */
function children(b: Uint8Array, t: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let p = t.body; p < t.end;) {
    const c = tlv(b, p);
    out.push(c);
    p = c.end;
  }
  return out;
}

/** An OBJECT IDENTIFIER's body, dotted. */
function oid(b: Uint8Array, t: Tlv): string {
  if (t.tag !== 0x06) throw new Error("expected an OID");
  const parts: number[] = [];
  let v = 0;
  for (let i = t.body; i < t.end; i++) {
    v = v * 128 + (b[i] & 0x7f);
    if (!(b[i] & 0x80)) {
      if (parts.length === 0) parts.push(v < 80 ? Math.floor(v / 40) : 2, v < 80 ? v % 40 : v - 80);
      else parts.push(v);
      v = 0;
    }
  }
  return parts.join(".");
}

/**
 * Parses the parts of an X.509 certificate the pin check needs.
 *
 * @param der the certificate, DER
 * @returns its parts, as slices of `der`
 * @throws {Error} when `der` is not a well-formed certificate
 * @example
 * ```ts
 * parseCertificate(pemCertificates(caPem)[0]).subject; // the CA's Name, DER
 * ```
 */
export function parseCertificate(der: Uint8Array): CertificateParts {
  const cert = tlv(der, 0);
  const [tbsT, algT, sigT] = children(der, cert);
  if (!tbsT || !algT || !sigT || sigT.tag !== 0x03) throw new Error("not an X.509 certificate");
  const tbs = children(der, tbsT);
  const i = tbs[0]?.tag === 0xa0 ? 1 : 0; // [0] version is optional (v1)
  const [, , issuerT, , subjectT, spkiT] = tbs.slice(i);
  if (!issuerT || !subjectT || !spkiT) throw new Error("not an X.509 certificate");
  const spkiAlg = children(der, children(der, spkiT)[0]);
  return {
    der,
    tbs: der.subarray(tbsT.start, tbsT.end),
    issuer: der.subarray(issuerT.start, issuerT.end),
    subject: der.subarray(subjectT.start, subjectT.end),
    spki: der.subarray(spkiT.start, spkiT.end),
    spkiCurve: spkiAlg[1]?.tag === 0x06 ? oid(der, spkiAlg[1]) : undefined,
    signatureAlgorithm: oid(der, children(der, algT)[0]),
    signature: der.subarray(sigT.body + 1, sigT.end), // skip the unused-bits byte
  };
}

/**
 * The certificates of a PEM bundle, DER-decoded, in order (other PEM blocks skipped).
 *
 * @param pem one or more `-----BEGIN CERTIFICATE-----` blocks
 * @returns each certificate's DER
 */
export function pemCertificates(pem: string): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const m of pem.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)) {
    // Not atob, whose module Deno loads at its first call (≈ 1.2 ms of a plugin ADD).
    out.push(Uint8Array.fromBase64(m[1].replace(/\s+/g, "")));
  }
  return out;
}

const RSA: Record<string, string> = {
  "1.2.840.113549.1.1.11": "SHA-256",
  "1.2.840.113549.1.1.12": "SHA-384",
  "1.2.840.113549.1.1.13": "SHA-512",
};
const ECDSA: Record<string, string> = {
  "1.2.840.10045.4.3.2": "SHA-256",
  "1.2.840.10045.4.3.3": "SHA-384",
};
const CURVES: Record<string, [string, number]> = {
  "1.2.840.10045.3.1.7": ["P-256", 32],
  "1.3.132.0.34": ["P-384", 48],
};
const ED25519 = "1.3.101.112";

/** An ECDSA-Sig-Value (DER SEQUENCE of r, s) → WebCrypto's r‖s of `size` bytes each. */
function ecdsaRaw(sig: Uint8Array, size: number): Uint8Array {
  const [r, s] = children(sig, tlv(sig, 0));
  const out = new Uint8Array(size * 2);
  for (const [k, t] of [[0, r], [1, s]] as const) {
    let v = sig.subarray(t.body, t.end);
    while (v.length > size && v[0] === 0) v = v.subarray(1);
    if (v.length > size) throw new Error("bad ECDSA signature");
    out.set(v, k * size + size - v.length);
  }
  return out;
}

/** A copy on its own ArrayBuffer (what WebCrypto takes). */
function own(b: Uint8Array): Uint8Array<ArrayBuffer> {
  return new Uint8Array(b);
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Whether `issuer`'s key signed `cert` (`cert.issuer` must name `issuer.subject`).
 *
 * @param cert the certificate to check
 * @param issuer the candidate issuer
 * @returns true when the signature verifies
 * @throws {Error} naming the algorithm when it is not one this check supports
 */
export async function issuedBy(cert: CertificateParts, issuer: CertificateParts): Promise<boolean> {
  if (!equal(cert.issuer, issuer.subject)) return false;
  const alg = cert.signatureAlgorithm;
  const spki = own(issuer.spki);
  const data = own(cert.tbs);
  if (RSA[alg]) {
    const key = await crypto.subtle.importKey(
      "spki",
      spki,
      { name: "RSASSA-PKCS1-v1_5", hash: RSA[alg] },
      false,
      ["verify"],
    );
    return await crypto.subtle.verify("RSASSA-PKCS1-v1_5", key, own(cert.signature), data);
  }
  if (ECDSA[alg]) {
    const curve = CURVES[issuer.spkiCurve ?? ""];
    if (!curve) throw new Error(`unsupported EC curve ${issuer.spkiCurve} of the CA`);
    const key = await crypto.subtle.importKey(
      "spki",
      spki,
      { name: "ECDSA", namedCurve: curve[0] },
      false,
      ["verify"],
    );
    const sig = own(ecdsaRaw(cert.signature, curve[1]));
    return await crypto.subtle.verify({ name: "ECDSA", hash: ECDSA[alg] }, key, sig, data);
  }
  if (alg === ED25519) {
    const key = await crypto.subtle.importKey("spki", spki, "Ed25519", false, ["verify"]);
    return await crypto.subtle.verify("Ed25519", key, own(cert.signature), data);
  }
  throw new Error(`unsupported certificate signature algorithm ${alg}`);
}

/**
 * Whether the server's certificate is pinned by the kubeconfig's CA bundle: it is one of the
 * bundle's certificates, or one of them issued it (signature verified).
 *
 * @param serverDer the server's leaf certificate, DER (as the TLS handshake presented it)
 * @param caPem the kubeconfig's `certificate-authority(-data)` bundle, PEM
 * @returns `{ ok: true }`, or `{ ok: false, reason }` saying why (for the error message)
 */
export async function pinnedByBundle(
  serverDer: Uint8Array,
  caPem: string,
): Promise<{ ok: true } | { ok: false; reason: string }> {
  let leaf: CertificateParts;
  try {
    leaf = parseCertificate(serverDer);
  } catch (e) {
    return {
      ok: false,
      reason: `the server's certificate cannot be read: ${(e as Error).message}`,
    };
  }
  const cas = pemCertificates(caPem);
  if (cas.length === 0) return { ok: false, reason: "the kubeconfig's CA holds no certificate" };
  const problems: string[] = [];
  for (const der of cas) {
    if (equal(der, serverDer)) return { ok: true };
    try {
      if (await issuedBy(leaf, parseCertificate(der))) return { ok: true };
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  return {
    ok: false,
    reason: "the API server's certificate was not issued by the kubeconfig's certificate " +
      "authority (trust is pinned to it; another root the process trusts does not count)" +
      (problems.length ? `: ${problems.join("; ")}` : ""),
  };
}

/** Deno's internal accessor of a TLS connection's peer certificate (what `node:tls` uses). */
function peerCertificateKey(): symbol | undefined {
  const internal = (Deno as unknown as Record<symbol, Record<string, unknown>>)[
    (Deno as unknown as { internal: symbol }).internal
  ];
  const key = internal?.getPeerCertificate;
  return typeof key === "symbol" ? key : undefined;
}

/**
 * Checks a finished TLS handshake against the kubeconfig's CA bundle (module doc): throws
 * when the server's certificate is not pinned by it, or when it cannot be read (fail closed).
 *
 * @param conn the connection, handshake done
 * @param caPem the kubeconfig's CA bundle, PEM
 * @throws {Deno.errors.InvalidData} as a failed certificate verification does, naming why
 */
export async function checkPinnedPeer(conn: Deno.TlsConn, caPem: string): Promise<void> {
  const key = peerCertificateKey();
  const peer = key
    ? (conn as unknown as Record<symbol, (detailed: boolean) => { raw?: Uint8Array } | undefined>)[
      key
    ]?.(false)
    : undefined;
  const raw = peer?.raw;
  if (!(raw instanceof Uint8Array)) {
    throw new Deno.errors.InvalidData(
      "invalid peer certificate: this Deno does not report the server's certificate, so it " +
        "cannot be checked against the kubeconfig's certificate authority",
    );
  }
  const verdict = await pinnedByBundle(raw, caPem);
  if (!verdict.ok) throw new Deno.errors.InvalidData(`invalid peer certificate: ${verdict.reason}`);
}
