/**
 * OpenSSL 3 (`libssl.so.3`, with `libcrypto.so.3` and libc reached through the same handle:
 * `dlsym` on a library's handle searches its dependencies too) for the per-call plugin's TLS
 * to the API server (lib/k8s/http1/native_tls.ts). Why: Deno's own TLS (rustls over AWS-LC)
 * pays AWS-LC's CPU Jitter Entropy, ≈ 25 ms of CPU, before the first handshake of a process;
 * OpenSSL seeds from `getrandom(2)`. Declarations only; the caller opens the library on first
 * use, so importing this module needs no `--allow-ffi`.
 *
 * Deno binds every symbol of a `dlopen` when it is opened (≈ 0.12 ms a symbol, measured), so
 * what one handshake and its reads and writes need is {@link LIBSSL_SYMBOLS}; what only a
 * failure, a client certificate or a host name needs is {@link LIBSSL_COLD_SYMBOLS}, opened
 * when first needed. Sockets are non-blocking; only `poll`, `getaddrinfo` and `SSL_CTX_new`
 * are `nonblocking` (they wait on a thread of Deno's blocking pool): every OpenSSL call runs on
 * the main thread, and `errno` is read there.
 *
 * @module
 */

/** The shared object opened (OpenSSL 3's libssl; its soname on Debian, Ubuntu, Fedora, Alpine). */
export const LIBSSL_PATH = "libssl.so.3";

/**
 * Constants of OpenSSL 3.0 (openssl/ssl.h, sslerr.h, x509_vfy.h, crypto.h, err.h) and of
 * linux/x86-64 and arm64 (sys/socket.h, netinet/tcp.h, poll.h, errno.h, netdb.h).
 */
export const SSL = {
  /** `OPENSSL_init_ssl` options: skip openssl.cnf (and what `OPENSSL_CONF` names), no atexit. */
  OPENSSL_INIT_NO_LOAD_CONFIG: 0x80n,
  OPENSSL_INIT_NO_ATEXIT: 0x80000n,
  SSL_VERIFY_PEER: 1,
  SSL_CTRL_MODE: 33,
  SSL_CTRL_SET_TLSEXT_HOSTNAME: 55,
  TLSEXT_NAMETYPE_host_name: 0n,
  SSL_CTRL_CHAIN_CERT: 89,
  SSL_CTRL_SET_MIN_PROTO_VERSION: 123,
  TLS1_2_VERSION: 0x0303n,
  /** `SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER`: a retried write may come from another address. */
  SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER: 0x2n,
  X509_V_FLAG_PARTIAL_CHAIN: 0x80000n,
  /** x509v3.h `X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS`: `*` only as a whole left-most label. */
  X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS: 0x4,
  /** x509v3.h `X509_CHECK_FLAG_NEVER_CHECK_SUBJECT`: a host name never matches the subject CN. */
  X509_CHECK_FLAG_NEVER_CHECK_SUBJECT: 0x20,
  SSL_ERROR_SSL: 1,
  SSL_ERROR_WANT_READ: 2,
  SSL_ERROR_WANT_WRITE: 3,
  SSL_ERROR_SYSCALL: 5,
  SSL_ERROR_ZERO_RETURN: 6,
  ERR_LIB_SSL: 20,
  SSL_R_UNEXPECTED_EOF_WHILE_READING: 294,
  AF_INET: 2,
  AF_INET6: 10,
  SOCK_STREAM: 1,
  SOCK_NONBLOCK: 0o4000,
  SOCK_CLOEXEC: 0o2000000,
  SOL_SOCKET: 1,
  SO_ERROR: 4,
  IPPROTO_TCP: 6,
  TCP_NODELAY: 1,
  SHUT_RDWR: 2,
  POLLIN: 0x001,
  POLLOUT: 0x004,
  POLLERR: 0x008,
  POLLHUP: 0x010,
  EINPROGRESS: 115,
  /** `sizeof(struct addrinfo)` on LP64 glibc: flags, family, socktype, protocol, addrlen, pad, addr, canonname, next. */
  ADDRINFO_SIZE: 48,
} as const;

/** The symbols of one connection's set-up, handshake, reads and writes, with their C prototypes. */
export const LIBSSL_SYMBOLS = {
  /** `int OPENSSL_init_ssl(uint64_t opts, const OPENSSL_INIT_SETTINGS *settings);` */
  OPENSSL_init_ssl: { parameters: ["u64", "pointer"], result: "i32" },
  /** `const SSL_METHOD *TLS_client_method(void);` */
  TLS_client_method: { parameters: [], result: "pointer" },
  /**
   * `SSL_CTX *SSL_CTX_new(const SSL_METHOD *method);` — on a thread of Deno's blocking pool:
   * the process's first also loads OpenSSL's default provider (≈ 2.5 ms).
   */
  SSL_CTX_new: { parameters: ["pointer"], result: "pointer", nonblocking: true },
  /** `X509_STORE *SSL_CTX_get_cert_store(const SSL_CTX *ctx);` (empty until certificates are added) */
  SSL_CTX_get_cert_store: { parameters: ["pointer"], result: "pointer" },
  /** `void SSL_CTX_set_verify(SSL_CTX *ctx, int mode, SSL_verify_cb verify_callback);` */
  SSL_CTX_set_verify: { parameters: ["pointer", "i32", "pointer"], result: "void" },
  /** `SSL *SSL_new(SSL_CTX *ctx);` */
  SSL_new: { parameters: ["pointer"], result: "pointer" },
  /** `int SSL_set_fd(SSL *ssl, int fd);` */
  SSL_set_fd: { parameters: ["pointer", "i32"], result: "i32" },
  /** `long SSL_ctrl(SSL *ssl, int cmd, long larg, void *parg);` (SNI, mode, minimum version) */
  SSL_ctrl: { parameters: ["pointer", "i32", "i64", "buffer"], result: "i64" },
  /** `int SSL_set1_host(SSL *s, const char *hostname);` (3.0: an IP literal is matched as an IP) */
  SSL_set1_host: { parameters: ["pointer", "buffer"], result: "i32" },
  /** `void SSL_set_hostflags(SSL *s, unsigned int flags);` (how {@link LIBSSL_SYMBOLS.SSL_set1_host} matches) */
  SSL_set_hostflags: { parameters: ["pointer", "u32"], result: "void" },
  /** `int SSL_connect(SSL *ssl);` */
  SSL_connect: { parameters: ["pointer"], result: "i32" },
  /** `int SSL_read(SSL *ssl, void *buf, int num);` */
  SSL_read: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  /** `int SSL_write(SSL *ssl, const void *buf, int num);` */
  SSL_write: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  /** `int SSL_get_error(const SSL *ssl, int ret);` */
  SSL_get_error: { parameters: ["pointer", "i32"], result: "i32" },
  /** `void SSL_free(SSL *ssl);` */
  SSL_free: { parameters: ["pointer"], result: "void" },
  /** `BIO *BIO_new_mem_buf(const void *buf, int len);` (libcrypto) */
  BIO_new_mem_buf: { parameters: ["buffer", "i32"], result: "pointer" },
  /** `int BIO_free(BIO *a);` (libcrypto) */
  BIO_free: { parameters: ["pointer"], result: "i32" },
  /** `X509 *PEM_read_bio_X509(BIO *bp, X509 **x, pem_password_cb *cb, void *u);` (libcrypto) */
  PEM_read_bio_X509: {
    parameters: ["pointer", "pointer", "pointer", "pointer"],
    result: "pointer",
  },
  /** `int X509_STORE_add_cert(X509_STORE *xs, X509 *x);` (libcrypto; takes its own reference) */
  X509_STORE_add_cert: { parameters: ["pointer", "pointer"], result: "i32" },
  /** `int X509_STORE_set_flags(X509_STORE *xs, unsigned long flags);` (libcrypto) */
  X509_STORE_set_flags: { parameters: ["pointer", "u64"], result: "i32" },
  /** `void X509_free(X509 *a);` (libcrypto) */
  X509_free: { parameters: ["pointer"], result: "void" },
  /** `void ERR_clear_error(void);` (libcrypto; the calling thread's error queue) */
  ERR_clear_error: { parameters: [], result: "void" },
  /** `int socket(int domain, int type, int protocol);` (libc) */
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  /** `int connect(int sockfd, const struct sockaddr *addr, socklen_t addrlen);` (libc) */
  connect: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  /** `int setsockopt(int sockfd, int level, int optname, const void *optval, socklen_t optlen);` */
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  /**
   * `int poll(struct pollfd *fds, nfds_t nfds, int timeout);` (libc) — waits on a thread of
   * Deno's blocking pool; `struct pollfd` is `{int fd; short events; short revents;}`.
   */
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32", nonblocking: true },
  /** `int shutdown(int sockfd, int how);` (libc; wakes a `poll` on the socket) */
  shutdown: { parameters: ["i32", "i32"], result: "i32" },
  /** `int close(int fd);` (libc) */
  close: { parameters: ["i32"], result: "i32" },
  /** `int *__errno_location(void);` (glibc's `errno` of the calling thread) */
  __errno_location: { parameters: [], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

/** Symbols needed only for a failure's message, a client certificate or a host name's lookup. */
export const LIBSSL_COLD_SYMBOLS = {
  /** `unsigned long ERR_get_error(void);` (libcrypto) */
  ERR_get_error: { parameters: [], result: "u64" },
  /** `void ERR_error_string_n(unsigned long e, char *buf, size_t len);` (libcrypto) */
  ERR_error_string_n: { parameters: ["u64", "buffer", "usize"], result: "void" },
  /** `long SSL_get_verify_result(const SSL *ssl);` */
  SSL_get_verify_result: { parameters: ["pointer"], result: "i64" },
  /** `const char *X509_verify_cert_error_string(long n);` (libcrypto) */
  X509_verify_cert_error_string: { parameters: ["i64"], result: "pointer" },
  /** `long SSL_CTX_ctrl(SSL_CTX *ctx, int cmd, long larg, void *parg);` (chain certificates) */
  SSL_CTX_ctrl: { parameters: ["pointer", "i32", "i64", "pointer"], result: "i64" },
  /** `int SSL_CTX_use_certificate(SSL_CTX *ctx, X509 *x);` */
  SSL_CTX_use_certificate: { parameters: ["pointer", "pointer"], result: "i32" },
  /**
   * `EVP_PKEY *PEM_read_bio_PrivateKey(BIO *bp, EVP_PKEY **x, pem_password_cb *cb, void *u);`
   * (no `cb`: `u` is the pass phrase, a C string; with `u` NULL too, OpenSSL would ask on the
   * controlling terminal)
   */
  PEM_read_bio_PrivateKey: {
    parameters: ["pointer", "pointer", "pointer", "buffer"],
    result: "pointer",
  },
  /** `int SSL_CTX_use_PrivateKey(SSL_CTX *ctx, EVP_PKEY *pkey);` */
  SSL_CTX_use_PrivateKey: { parameters: ["pointer", "pointer"], result: "i32" },
  /** `int SSL_CTX_check_private_key(const SSL_CTX *ctx);` */
  SSL_CTX_check_private_key: { parameters: ["pointer"], result: "i32" },
  /** `void EVP_PKEY_free(EVP_PKEY *key);` (libcrypto) */
  EVP_PKEY_free: { parameters: ["pointer"], result: "void" },
  /** `void SSL_CTX_free(SSL_CTX *ctx);` (reference counted: live connections keep it) */
  SSL_CTX_free: { parameters: ["pointer"], result: "void" },
  /** `int getsockopt(int sockfd, int level, int optname, void *optval, socklen_t *optlen);` */
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  /**
   * `int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
   * struct addrinfo **res);` (libc: `/etc/hosts`, then DNS, as `Deno.connect` resolves) —
   * waits on a thread of Deno's blocking pool.
   */
  getaddrinfo: {
    parameters: ["buffer", "buffer", "buffer", "buffer"],
    result: "i32",
    nonblocking: true,
  },
  /** `void freeaddrinfo(struct addrinfo *res);` (libc) */
  freeaddrinfo: { parameters: ["pointer"], result: "void" },
} as const satisfies Deno.ForeignLibraryInterface;

/** Where {@link LIBSSL_PRELOAD_SYMBOLS} are (glibc's shared object name, `man 7 libc`). */
export const LIBSSL_PRELOAD_PATH = "libc.so.6";

/** `dlopen(3)` flag: resolve every symbol now (dlfcn.h). */
export const RTLD_NOW = 2;

/**
 * libc's `dlopen`, to map OpenSSL on a thread of Deno's blocking pool before the main thread
 * binds its symbols (mapping and relocating `libssl.so.3` and `libcrypto.so.3` is ≈ 1.5 ms).
 */
export const LIBSSL_PRELOAD_SYMBOLS = {
  /** `void *dlopen(const char *filename, int flags);` (dlfcn.h; NULL when it cannot be loaded) */
  dlopen: { parameters: ["buffer", "i32"], result: "pointer", nonblocking: true },
} as const satisfies Deno.ForeignLibraryInterface;
