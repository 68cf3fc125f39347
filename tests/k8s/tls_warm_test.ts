import assert from "node:assert/strict";
import { warmTls, warmTlsForApi } from "../../lib/k8s/tls_warm.ts";

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

Deno.test("warmTlsForApi warms only for an ADD that will talk to the API", () => {
  const cases: [unknown, Record<string, string>, boolean][] = [
    [{ kubeconfig: "/etc/cni/net.d/manifold.d/manifold.kubeconfig" }, {}, true],
    [{}, { KUBERNETES_SERVICE_HOST: "10.96.0.1" }, true],
    [{}, {}, false], // no API configured
    [{ kubeconfig: "/k", nadDir: "/nads" }, {}, false], // standalone NADs: no API
    [{ kubeconfig: "/k" }, { MANIFOLD_TLS_WARMUP: "0" }, false],
    [{ kubeconfig: "" }, {}, false],
    ["not an object", { KUBERNETES_SERVICE_HOST: "10.96.0.1" }, false],
    [undefined, {}, false],
  ];
  for (const [config, env, want] of cases) {
    assert.equal(warmTlsForApi(config, env), want, JSON.stringify({ config, env }));
  }
});
