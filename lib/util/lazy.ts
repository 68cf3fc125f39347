/**
 * Loading a module only when a code path needs it, without `deno run` loading it up front.
 *
 * `deno run` builds the module graph of every module it loads from the string-literal imports
 * it finds, dynamic `import("./x.ts")` included: each module reachable that way is read, hashed
 * and looked up in Deno's caches (and an npm package's registry metadata parsed) when its
 * importer is loaded, even if the branch that imports it never runs. A per-call ADD or DEL paid
 * that for ≈ 45 modules it never ran (the other verbs, the mirror, chroot, KEP, DRA and device
 * paths, zod and yaml): ≈ 8 ms of every call (docs/performance.md). A computed specifier is not
 * followed, so each such branch imports through {@link lazyImport}; what is imported is still
 * fixed by the program (a literal at the call site), never by input.
 *
 * @module
 */

/**
 * Imports a module the first time a code path needs it, outside the module graph of its caller.
 *
 * The type argument names the same module (`typeof import("./x.ts")`, a type-only reference,
 * not loaded at run time); `tests/integration/lazy_import_test.ts` keeps the two equal.
 * `deno compile` embeds every module of `lib/` and `native/` (scripts/compile.sh), so each one
 * resolves in the binary too.
 *
 * @param specifier a relative path (`"./verbs/add.ts"`, with `base`) or an import-map name
 *   (`"zod"`, without `base`)
 * @param base the caller's `import.meta.url`, for a relative specifier
 * @returns the module namespace
 * @throws whatever the import throws (module not found, an error at its evaluation)
 * @example
 * ```ts
 * const { cmdAdd } = await lazyImport<typeof import("./verbs/add.ts")>(
 *   "./verbs/add.ts",
 *   import.meta.url,
 * );
 * ```
 */
export function lazyImport<T>(specifier: string, base?: string): Promise<T> {
  return import(base === undefined ? specifier : new URL(specifier, base).href);
}
