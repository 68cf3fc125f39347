/**
 * Objects the node scenarios apply: NADs on their own bridges (host-local IPAM in the node's
 * ipam dir, or static IPAM + tuning for `ips`/`mac`), and Deployments of the netcheck image.
 *
 * @module
 */

import type { KubeObject } from "../kube_rest.ts";
import type { NodeCluster } from "../node_cluster.ts";
import { NETCHECK_IMAGE } from "./images.ts";

/** A bridge NAD with host-local IPAM on `subnet`; the bridge is named from the NAD. */
export function bridgeNad(
  node: NodeCluster,
  name: string,
  bridge: string,
  subnet: string,
): Record<string, unknown> {
  return {
    cniVersion: "1.0.0",
    name,
    plugins: [{
      type: "bridge",
      bridge,
      ipam: { type: "host-local", subnet, dataDir: node.layout.ipamDir },
    }],
  };
}

/** A bridge NAD whose address and MAC come from the selection (`ips`, `mac` capabilities). */
export function staticNad(name: string, bridge: string): Record<string, unknown> {
  return {
    cniVersion: "1.0.0",
    name,
    plugins: [
      { type: "bridge", bridge, ipam: { type: "static" }, capabilities: { ips: true } },
      { type: "tuning", capabilities: { mac: true } },
    ],
  };
}

/** A Deployment of `replicas` netcheck pods (`echo-server 7000`), label `app=name`, selecting `networks`. */
export function deployment(
  namespace: string,
  name: string,
  replicas: number,
  networks: string,
): KubeObject {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: {
          labels: { app: name },
          annotations: { "k8s.v1.cni.cncf.io/networks": networks },
        },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [{
            name: "netcheck",
            image: NETCHECK_IMAGE.ref,
            imagePullPolicy: "Never",
            args: ["echo-server", "7000"],
          }],
        },
      },
    },
  };
}
