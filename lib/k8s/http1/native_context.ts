/**
 * OpenSSL for native_tls.ts: the library opened once per process ({@link nativeTlsAvailable}),
 * the `SSL_CTX` of one trust (the kubeconfig's CA alone, a client certificate presented), and
 * OpenSSL's error queue turned into messages.
 *
 * The first `SSL_CTX_new` of a process also loads OpenSSL's default provider and its
 * algorithms (≈ 2.5 ms of CPU, measured in the plugin's timeline); it runs on a thread of
 * Deno's blocking pool (`nonblocking`), started when the library is opened — by main.ts for an
 * ADD that will talk to the API, well before the first connection needs it. `SSL_CTX_new` is
 * thread safe; the context is configured on the main thread once it returns. OpenSSL's error
 * queue is per thread: the reasons of a failing `SSL_CTX_new` stay on its pool thread, so that
 * error names none.
 *
 * What OpenSSL takes from the environment (a CNI plugin's is the container runtime's, never a
 * request's): not openssl.cnf nor `OPENSSL_CONF` (`OPENSSL_INIT_NO_LOAD_CONFIG` runs the
 * configuration step once, empty, and the later `SSL_CTX_new` calls' own initialisation finds it
 * done), so no system-wide policy of the host (RHEL's crypto-policies) applies, as Go's
 * defaults ignore it too; not `SSL_CERT_FILE` or `SSL_CERT_DIR` (no default verify paths); not
 * `OPENSSL_MODULES` or `OPENSSL_ENGINES` (the built-in default provider only). Still read:
 * `OPENSSL_ia32cap` (x86-64; `OPENSSL_armcap` on arm64), the CPU features libcrypto uses;
 * and `LD_LIBRARY_PATH` chooses which `libssl.so.3` opens — the variables that already choose
 * what deno itself links and runs.
 *
 * Contexts: four at most per process, one per CA, client certificate and key (an exec plugin
 * rotating its client certificate makes one per certificate); one pushed out of the cache is
 * freed at once, so a connection takes its context again right before `SSL_new` (native_tls.ts);
 * open connections keep their own reference. The spare made when the library opens goes to the first context only. An
 * encrypted client key is refused (an empty pass phrase, never one asked on a terminal), as
 * Go's `tls.X509KeyPair` refuses it.
 *
 * @module
 */

import {
  LIBSSL_COLD_SYMBOLS,
  LIBSSL_PATH,
  LIBSSL_PRELOAD_PATH,
  LIBSSL_PRELOAD_SYMBOLS,
  LIBSSL_SYMBOLS,
  RTLD_NOW,
  SSL,
} from "../../../native/libssl.ts";

/** The symbols of {@link LIBSSL_SYMBOLS}, bound. */
export type NativeLib = Deno.DynamicLibrary<typeof LIBSSL_SYMBOLS>["symbols"];
/** The symbols of {@link LIBSSL_COLD_SYMBOLS}, bound. */
export type NativeColdLib = Deno.DynamicLibrary<typeof LIBSSL_COLD_SYMBOLS>["symbols"];

/** Undefined: not tried yet; null: cannot be used in this process. */
let lib: NativeLib | null | undefined;
let coldLib: NativeColdLib | undefined;
/** An `SSL_CTX` being made ahead of the first connection (no trust in it yet). */
let spare: Promise<Deno.PointerValue> | undefined;
/** SSL_CTX per (CA, client certificate, key); a few at most (an exec plugin may rotate). */
const contexts = new Map<string, Promise<Deno.PointerObject>>();
const MAX_CONTEXTS = 4;
const encoder = new TextEncoder();
/** The empty C string: the pass phrase given for a PEM key (never one asked on a terminal). */
const NO_PASSPHRASE = new Uint8Array(new ArrayBuffer(1));

/** The trust and identity of a context (native_tls.ts `NativeTlsOptions`). */
export interface ContextOptions {
  /** The only trusted CA certificate(s), PEM. */
  caPem: string;
  /** Client certificate (chain, leaf first), PEM. */
  clientCertPem?: string;
  /** The client certificate's private key, PEM (PKCS#8, SEC1 or PKCS#1). */
  clientKeyPem?: string;
}

/**
 * Opens OpenSSL on first call (≈ 4 ms of main thread: `libssl.so.3`, `libcrypto.so.3` and the
 * symbols bound) and starts making the first `SSL_CTX` on another thread; says whether this
 * process can use it, and keeps the answer. False without `libssl.so.3`, without
 * `--allow-ffi`, or when OpenSSL's initialisation fails (openssl.cnf is never read:
 * `OPENSSL_INIT_NO_LOAD_CONFIG`).
 * @returns true when native_tls.ts can connect
 */
export function nativeTlsAvailable(): boolean {
  if (lib === undefined) {
    try {
      const opened = Deno.dlopen(LIBSSL_PATH, LIBSSL_SYMBOLS).symbols;
      const init = opened.OPENSSL_init_ssl(
        SSL.OPENSSL_INIT_NO_LOAD_CONFIG | SSL.OPENSSL_INIT_NO_ATEXIT,
        null,
      );
      lib = init === 1 ? opened : null;
      if (lib) {
        spare = lib.SSL_CTX_new(lib.TLS_client_method());
        spare.catch(() => {});
      }
    } catch {
      lib = null;
    }
  }
  return lib !== null;
}

/**
 * The opened library.
 * @returns its symbols
 * @throws {Error} when {@link nativeTlsAvailable} is false
 */
export function nativeLib(): NativeLib {
  if (!nativeTlsAvailable()) throw new Error(`${LIBSSL_PATH} cannot be used in this process`);
  return lib!;
}

/**
 * The symbols needed only for failures, client certificates and name lookups, bound on first
 * call (the library is already mapped).
 * @returns their symbols
 */
export function nativeColdLib(): NativeColdLib {
  return coldLib ??= Deno.dlopen(LIBSSL_PATH, LIBSSL_COLD_SYMBOLS).symbols;
}

/**
 * The `SSL_CTX` for this CA and client certificate, made once per process (a few at most):
 * peer verification on, the CA's certificates the only anchors, any of them one
 * (`X509_V_FLAG_PARTIAL_CHAIN`, as Go accepts an intermediate in `RootCAs`), the client
 * certificate (chain) and key when given. A context pushed out of the cache is freed (open
 * connections keep their own reference): take it again right before `SSL_new` after any wait.
 * @param opts the trust and identity
 * @returns the context, valid until a fifth one pushes it out of the cache
 * @throws {Deno.errors.InvalidData} when `caPem` holds no certificate, the client certificate
 *   none, or the key does not match it; an `Error` naming OpenSSL's reason otherwise
 */
export function tlsContext(opts: ContextOptions): Promise<Deno.PointerObject> {
  const key = `${opts.caPem}\0${opts.clientCertPem ?? ""}\0${opts.clientKeyPem ?? ""}`;
  const had = contexts.get(key);
  if (had) return had;
  const made = makeContext(nativeLib(), opts);
  made.catch(() => {
    if (contexts.get(key) === made) contexts.delete(key);
  });
  if (contexts.size >= MAX_CONTEXTS) {
    const [oldKey, old] = contexts.entries().next().value!;
    contexts.delete(oldKey);
    // Connections still open keep their reference.
    old.then((ctx) => nativeColdLib().SSL_CTX_free(ctx), () => {});
  }
  contexts.set(key, made);
  return made;
}

async function makeContext(L: NativeLib, opts: ContextOptions): Promise<Deno.PointerObject> {
  // The spare is taken before the first await: a second context asked for meanwhile makes its
  // own (one SSL_CTX, one trust each; a shared one would hold both CAs and be freed twice).
  const pending = spare ?? L.SSL_CTX_new(L.TLS_client_method());
  spare = undefined;
  const ctx = await pending;
  if (ctx === null) throw sslError("SSL_CTX_new");
  try {
    L.SSL_CTX_set_verify(ctx, SSL.SSL_VERIFY_PEER, null);
    const store = L.SSL_CTX_get_cert_store(ctx);
    let anchors = 0;
    for (const x509 of readCertificates(L, opts.caPem)) {
      if (L.X509_STORE_add_cert(store, x509) === 1) anchors++;
      L.X509_free(x509);
    }
    if (anchors === 0) {
      throw new Deno.errors.InvalidData("the certificate authority holds no PEM certificate");
    }
    L.X509_STORE_set_flags(store, SSL.X509_V_FLAG_PARTIAL_CHAIN);
    if (opts.clientCertPem && opts.clientKeyPem) {
      useClientCertificate(L, ctx, opts.clientCertPem, opts.clientKeyPem);
    }
    return ctx;
  } catch (err) {
    nativeColdLib().SSL_CTX_free(ctx);
    throw err;
  }
}

/** A BIO over a copy of `pem` (the BIO reads it in later calls: the copy's store never moves). */
function memBio(L: NativeLib, pem: string): { bio: Deno.PointerObject; bytes: Uint8Array } {
  const encoded = encoder.encode(pem);
  const bytes = new Uint8Array(new ArrayBuffer(encoded.length));
  bytes.set(encoded);
  const bio = L.BIO_new_mem_buf(bytes, bytes.length);
  if (bio === null) throw sslError("BIO_new_mem_buf");
  return { bio, bytes };
}

/** Every certificate of a PEM text, in order (the caller frees them). */
function readCertificates(L: NativeLib, pem: string): Deno.PointerObject[] {
  const { bio, bytes } = memBio(L, pem);
  const out: Deno.PointerObject[] = [];
  try {
    for (;;) {
      const x509 = L.PEM_read_bio_X509(bio, null, null, null);
      if (x509 === null) break;
      out.push(x509);
    }
  } finally {
    L.BIO_free(bio);
    L.ERR_clear_error(); // the end of the text is reported as an error ("no start line")
  }
  void bytes; // alive until the BIO is freed
  return out;
}

function useClientCertificate(
  L: NativeLib,
  ctx: Deno.PointerObject,
  certPem: string,
  keyPem: string,
): void {
  const C = nativeColdLib();
  const chain = readCertificates(L, certPem);
  if (chain.length === 0) {
    throw new Deno.errors.InvalidData("the client certificate holds no PEM certificate");
  }
  const used = C.SSL_CTX_use_certificate(ctx, chain[0]) === 1;
  L.X509_free(chain[0]);
  let added = used;
  for (const x509 of chain.slice(1)) {
    // SSL_CTX_add0_chain_cert: the context takes this reference when it succeeds.
    if (added && C.SSL_CTX_ctrl(ctx, SSL.SSL_CTRL_CHAIN_CERT, 0n, x509) === 1n) continue;
    added = false;
    L.X509_free(x509);
  }
  if (!added) throw sslError("client certificate");
  const { bio, bytes } = memBio(L, keyPem);
  let pkey: Deno.PointerValue;
  try {
    // An empty pass phrase as the user data: an encrypted key fails to decode, as Go's
    // tls.X509KeyPair refuses it, instead of OpenSSL asking for one on the terminal.
    pkey = C.PEM_read_bio_PrivateKey(bio, null, null, NO_PASSPHRASE);
  } finally {
    L.BIO_free(bio);
  }
  void bytes;
  if (pkey === null) throw sslError("client key");
  const ok = C.SSL_CTX_use_PrivateKey(ctx, pkey) === 1 && C.SSL_CTX_check_private_key(ctx) === 1;
  C.EVP_PKEY_free(pkey);
  if (!ok) {
    drainErrors();
    throw new Deno.errors.InvalidData("the client key does not match the client certificate");
  }
}

/**
 * Empties the calling thread's OpenSSL error queue (`ERR_get_error`, at most 16 entries).
 * @returns each entry's text (`ERR_error_string_n`), and whether it is SSL's "unexpected eof
 *   while reading" (the peer ended the TCP stream without `close_notify`)
 */
export function drainErrors(): { text: string; eof: boolean }[] {
  const C = nativeColdLib();
  const out: { text: string; eof: boolean }[] = [];
  const buf = new Uint8Array(256);
  for (let i = 0; i < 16; i++) {
    const code = C.ERR_get_error();
    if (code === 0n) break;
    C.ERR_error_string_n(code, buf, BigInt(buf.length));
    const end = buf.indexOf(0);
    // err.h: ERR_SYSTEM_FLAG, ERR_LIB_OFFSET 23, ERR_REASON_MASK 0x7fffff
    const system = (code & 0x80000000n) !== 0n;
    const eof = !system && Number((code >> 23n) & 0xffn) === SSL.ERR_LIB_SSL &&
      Number(code & 0x7fffffn) === SSL.SSL_R_UNEXPECTED_EOF_WHILE_READING;
    out.push({ text: new TextDecoder().decode(buf.subarray(0, end < 0 ? buf.length : end)), eof });
  }
  return out;
}

/**
 * The error for a failed OpenSSL call, with the error queue's reasons (the queue is emptied).
 * @param what the step, e.g. `"TLS set-up"`
 * @returns `Error("TLS <what> failed: <reasons>")`
 */
export function sslError(what: string): Error {
  const why = drainErrors().map((x) => x.text).join("; ");
  return new Error(`TLS ${what} failed${why ? `: ${why}` : ""}`);
}

let preloaded: Promise<boolean> | undefined;

/**
 * {@link nativeTlsAvailable} in two steps, so that the main thread does not map the libraries:
 * libc's `dlopen` maps `libssl.so.3` and `libcrypto.so.3` on a thread of Deno's blocking pool
 * (≈ 1.5 ms), then the main thread binds the symbols (and starts the first `SSL_CTX`) when it
 * next takes the promise's continuation. For main.ts, as soon as an ADD is known to talk to the
 * API. The library stays loaded for the process.
 * @returns resolves to {@link nativeTlsAvailable}'s answer (false when the library cannot be
 *   loaded: the caller warms Deno's TLS instead); never rejects
 */
export function preloadNativeTls(): Promise<boolean> {
  return preloaded ??= (async () => {
    if (lib === undefined) {
      try {
        const libc = Deno.dlopen(LIBSSL_PRELOAD_PATH, LIBSSL_PRELOAD_SYMBOLS);
        // Read on the other thread while the call is pending: a store of its own, never moved.
        const name = new Uint8Array(new ArrayBuffer(LIBSSL_PATH.length + 1));
        name.set(encoder.encode(LIBSSL_PATH));
        const handle = await libc.symbols.dlopen(name, RTLD_NOW);
        if (handle === null) lib = null;
      } catch {
        lib = null;
      }
    }
    return nativeTlsAvailable();
  })();
}
