import assert from "node:assert/strict";
import { nativeTlsWanted, warmTls, warmTlsForApi } from "../../lib/k8s/tls_warm.ts";
import { nativeTlsAvailable } from "../../lib/k8s/http1/native_context.ts";

Deno.test("warmTls initialises crypto once per process", async () => {
  const first = warmTls();
  assert.equal(warmTls(), first, "one warm-up per process");
  const ms = await first;
  assert.equal(typeof ms, "number", "WebCrypto made the key");
});

Deno.test("warmTls needs no permission (the plugin may run without --allow-net)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const main = `${dir}/main.ts`;
    const url = new URL("../../lib/k8s/tls_warm.ts", import.meta.url).href;
    await Deno.writeTextFile(
      main,
      `const { warmTls } = await import(${
        JSON.stringify(url)
      }); console.log(typeof await warmTls());`,
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-prompt", "--no-config", "--no-lock", main],
      env: { NO_COLOR: "1" },
      stderr: "piped",
    }).output();
    const text = new TextDecoder();
    assert.equal(out.code, 0, text.decode(out.stderr));
    assert.equal(text.decode(out.stdout).trim(), "number");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("warmTlsForApi warms only for an ADD that will talk to the API through Deno's TLS", () => {
  const deno = { MANIFOLD_NATIVE_TLS: "0" }; // the plugin's client keeps Deno's TLS
  const cases: [unknown, Record<string, string>, boolean][] = [
    [{ kubeconfig: "/etc/cni/net.d/manifold.d/manifold.kubeconfig" }, deno, true],
    [{}, { ...deno, KUBERNETES_SERVICE_HOST: "10.96.0.1" }, true],
    [{}, deno, false], // no API configured
    [{ kubeconfig: "/k", nadDir: "/nads" }, deno, false], // standalone NADs: no API
    [{ kubeconfig: "/k" }, { ...deno, MANIFOLD_TLS_WARMUP: "0" }, false],
    [{ kubeconfig: "" }, deno, false],
    ["not an object", { ...deno, KUBERNETES_SERVICE_HOST: "10.96.0.1" }, false],
    [undefined, deno, false],
  ];
  for (const [config, env, want] of cases) {
    assert.equal(warmTlsForApi(config, env), want, JSON.stringify({ config, env }));
  }
});

let opensslOpens = false;
try {
  opensslOpens = nativeTlsAvailable();
} catch { /* no --allow-ffi */ }
if (!opensslOpens) console.log("tls_warm_test: OpenSSL case skipped, libssl.so.3 cannot be opened");

Deno.test({
  name: "warmTlsForApi does not warm Deno's crypto when the client's TLS is OpenSSL's",
  ignore: !opensslOpens, // without it: tests/k8s/native_tls_review_test.ts "without OpenSSL"
}, () => {
  // With libssl.so.3 (the setup script installs it) the client connects through OpenSSL
  // (lib/k8s/http1/native_tls.ts), which needs no AWS-LC initialisation.
  assert.equal(nativeTlsWanted({}), true);
  assert.equal(warmTlsForApi({ kubeconfig: "/k" }, {}), false);
  assert.equal(warmTlsForApi({}, { KUBERNETES_SERVICE_HOST: "10.96.0.1" }), false);
  assert.equal(nativeTlsWanted({ MANIFOLD_NATIVE_TLS: "0" }), false);
});
