/**
 * libnftables symbol table (netfilter's high-level nftables API, `nftables/libnftables.h`,
 * Debian package `libnftables1`): a context, buffered output/error, and the one call that
 * runs a command buffer — MultiNetworkPolicy rules are sent as one JSON batch. Declarations
 * only; the library is opened on first use by {@link openLibnftables}, so importing this
 * module needs no `--allow-ffi`.
 *
 * Only {@link LIBNFTABLES_SYMBOLS}.`nft_ctx_free_deferred` is `nonblocking`: a context opens
 * its netlink socket in the network namespace of the calling thread, which `setns` switched,
 * so every other call stays on that thread; freeing a context (closing its socket) works
 * from any thread, and after a commit it waits ≈ 15 ms for the kernel's deferred
 * destruction of the replaced objects — time the caller need not spend.
 *
 * @module
 */

/** Default shared object name (Debian/Ubuntu package `libnftables1`). */
export const LIBNFTABLES_PATH = "libnftables.so.1";

/** `NFT_CTX_DEFAULT` (libnftables.h): flags of `nft_ctx_new`. */
export const NFT_CTX_DEFAULT = 0;
/** `NFT_CTX_OUTPUT_HANDLE` (libnftables.h): print rule/set handles. */
export const NFT_CTX_OUTPUT_HANDLE = 1 << 3;
/**
 * `NFT_CTX_OUTPUT_JSON` (libnftables.h): JSON output; libnftables ≤ 1.0.6 also parses the
 * input buffer as JSON when this flag is set (there is no input flag before 1.0.7).
 */
export const NFT_CTX_OUTPUT_JSON = 1 << 4;

/** The libnftables symbols Manifold calls, each with its C prototype. */
export const LIBNFTABLES_SYMBOLS = {
  /** `struct nft_ctx *nft_ctx_new(uint32_t flags);` */
  nft_ctx_new: { parameters: ["u32"], result: "pointer" },
  /** `void nft_ctx_free(struct nft_ctx *ctx);` */
  nft_ctx_free: { parameters: ["pointer"], result: "void" },
  /**
   * `void nft_ctx_free(struct nft_ctx *ctx);` on a worker thread (returns a Promise): the
   * socket close after a commit blocks until the kernel's transaction cleanup has run.
   */
  nft_ctx_free_deferred: {
    name: "nft_ctx_free",
    parameters: ["pointer"],
    result: "void",
    nonblocking: true,
  },
  /** `void nft_ctx_output_set_flags(struct nft_ctx *ctx, unsigned int flags);` */
  nft_ctx_output_set_flags: { parameters: ["pointer", "u32"], result: "void" },
  /** `int nft_ctx_buffer_output(struct nft_ctx *ctx);` (0 on success) */
  nft_ctx_buffer_output: { parameters: ["pointer"], result: "i32" },
  /** `const char *nft_ctx_get_output_buffer(struct nft_ctx *ctx);` (NUL-terminated) */
  nft_ctx_get_output_buffer: { parameters: ["pointer"], result: "pointer" },
  /** `int nft_ctx_buffer_error(struct nft_ctx *ctx);` (0 on success) */
  nft_ctx_buffer_error: { parameters: ["pointer"], result: "i32" },
  /** `const char *nft_ctx_get_error_buffer(struct nft_ctx *ctx);` (NUL-terminated) */
  nft_ctx_get_error_buffer: { parameters: ["pointer"], result: "pointer" },
  /**
   * `int nft_run_cmd_from_buffer(struct nft_ctx *nft, const char *buf);` — `buf`
   * NUL-terminated; 0 on success. All commands of one buffer form one netlink batch
   * (one transaction: all or nothing).
   */
  nft_run_cmd_from_buffer: { parameters: ["pointer", "buffer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The opened libnftables with {@link LIBNFTABLES_SYMBOLS}. */
export type Libnftables = Deno.DynamicLibrary<typeof LIBNFTABLES_SYMBOLS>;

const loaded = new Map<string, Libnftables>();

/**
 * Opens libnftables from `path` on first call and caches it per path.
 *
 * @param path shared object to load (default {@link LIBNFTABLES_PATH})
 * @returns the loaded library
 * @throws {Error} when the library or a symbol is missing (`apt-get install libnftables1`)
 */
export function openLibnftables(path: string = LIBNFTABLES_PATH): Libnftables {
  let lib = loaded.get(path);
  if (!lib) {
    lib = Deno.dlopen(path, LIBNFTABLES_SYMBOLS);
    loaded.set(path, lib);
  }
  return lib;
}
