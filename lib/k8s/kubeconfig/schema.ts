/**
 * The zod schema of a kubeconfig document (`clientcmd/api/v1` `Config`, the keys Manifold
 * reads; loose objects, unknown keys kept): the reference that the fast check of
 * `document.ts`, `KUBECONFIG_SHAPE`, must agree with (the fuzz target `kubeconfigshape`). The per-call path loads this module (and zod) only
 * for a document the fast check does not accept (issue 30); zod's issues then word the error.
 *
 * @module
 */

/**
 * Checks a kubeconfig document with its zod schema — what a file that does not pass
 * `KUBECONFIG_SHAPE` goes through: zod is loaded only then (issue 30), and its issues
 * word the error.
 * @param z zod's namespace.
 * @param doc the decoded document.
 * @returns zod's output (loose objects: unknown keys kept), or its prettified issues.
 */
export function checkKubeconfigWithZod(
  z: typeof import("zod").z,
  doc: unknown,
): { success: true; data: unknown } | { success: false; details: string } {
  const parsed = (builtSchema ??= kubeconfigSchemaOf(z)).safeParse(doc);
  return parsed.success
    ? { success: true, data: parsed.data }
    : { success: false, details: z.prettifyError(parsed.error) };
}

let builtSchema: ReturnType<typeof kubeconfigSchemaOf> | undefined;

/** The kubeconfig schema (zod). */
function kubeconfigSchemaOf(z: typeof import("zod").z) {
  const clusterSchema = z.looseObject({
    server: z.string().optional(),
    "certificate-authority": z.string().optional(),
    "certificate-authority-data": z.string().optional(),
    "insecure-skip-tls-verify": z.boolean().optional(),
    "tls-server-name": z.string().optional(),
  });

  const userSchema = z.looseObject({
    "client-certificate": z.string().optional(),
    "client-certificate-data": z.string().optional(),
    "client-key": z.string().optional(),
    "client-key-data": z.string().optional(),
    token: z.string().optional(),
    tokenFile: z.string().optional(),
    username: z.string().optional(),
    exec: z.looseObject({
      command: z.string().min(1),
      args: z.array(z.string()).nullish(),
      env: z.array(z.looseObject({ name: z.string().min(1), value: z.string() })).nullish(),
      apiVersion: z.string(),
      installHint: z.string().optional(),
      provideClusterInfo: z.boolean().optional(),
      interactiveMode: z.string().optional(),
    }).nullish(),
    "auth-provider": z.looseObject({ name: z.string().optional() }).nullish(),
  });

  const contextSchema = z.looseObject({
    cluster: z.string(),
    user: z.string().optional(),
    namespace: z.string().optional(),
  });

  const kubeconfigSchema = z.looseObject({
    "current-context": z.string().optional(),
    clusters: z.array(z.looseObject({ name: z.string(), cluster: clusterSchema.nullish() }))
      .nullish(),
    users: z.array(z.looseObject({ name: z.string(), user: userSchema.nullish() })).nullish(),
    contexts: z.array(z.looseObject({ name: z.string(), context: contextSchema.nullish() }))
      .nullish(),
  });
  return kubeconfigSchema;
}
