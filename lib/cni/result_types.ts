/**
 * The CNI result wire shapes (CNI SPEC 1.1 "Result", "GC"): what a delegate prints on a
 * successful ADD, as every version's result is decoded to (lib/cni/result.ts).
 *
 * @module
 */

/** One interface of a result (CNI SPEC 1.1 "Result" `interfaces`). */
export interface CniInterface {
  /** Interface name, e.g. `"eth0"`. */
  name: string;
  /** Hardware address `"xx:xx:xx:xx:xx:xx"` (or longer for InfiniBand). */
  mac?: string;
  /** MTU in bytes (CNI 1.1). */
  mtu?: number;
  /** Sandbox (netns path) the interface lives in; absent for host interfaces. */
  sandbox?: string;
  /** vhost-user / vDPA socket path (CNI 1.1). */
  socketPath?: string;
  /** PCI address of the device, e.g. `"0000:03:00.1"` (CNI 1.1). */
  pciID?: string;
}

/** One IP configuration of a result (CNI SPEC 1.1 "Result" `ips`). */
export interface CniIpConfig {
  /** `"a.b.c.d/nn"` or `"v6addr/nn"`. */
  address: string;
  /** Default gateway for this subnet, a bare IP. */
  gateway?: string;
  /** Index into `interfaces`. */
  interface?: number;
}

/** One route of a result (CNI SPEC 1.1 "Result" `routes`). */
export interface CniRoute {
  /** Destination `"a.b.c.d/nn"` or IPv6 with prefix. */
  dst: string;
  /** Next hop, a bare IP; absent = the subnet's gateway. */
  gw?: string;
  /** Route MTU in bytes (CNI 1.1). */
  mtu?: number;
  /** TCP advertised MSS in bytes (CNI 1.1). */
  advmss?: number;
  /** Route priority / metric (CNI 1.1). */
  priority?: number;
  /** Routing table id (CNI 1.1). */
  table?: number;
  /** Route scope, `linux/rtnetlink.h` `RT_SCOPE_*` (CNI 1.1). */
  scope?: number;
}

/** DNS settings (CNI SPEC "Well-known structures" `dns`). */
export interface CniDns {
  /** DNS server addresses, bare IPs. */
  nameservers?: string[];
  /** Local domain for short names. */
  domain?: string;
  /** Search domains, in priority order. */
  search?: string[];
  /** Resolver options (`resolv.conf` `options`). */
  options?: string[];
}

/**
 * A result in the normalized 1.x shape (CNI SPEC 1.1 "ADD Success"). `cniVersion`
 * is the version the producer sent; see `lib/cni/result.ts` for conversion.
 */
export interface CniResult {
  /** The version the producer sent (a result without one is 0.1.0). */
  cniVersion: string;
  /** Interfaces the plugin created or knows of. */
  interfaces?: CniInterface[];
  /** IP configurations, each possibly naming an interface by index. */
  ips?: CniIpConfig[];
  /** Routes to install. */
  routes?: CniRoute[];
  /** DNS settings for the sandbox. */
  dns?: CniDns;
}

/** One entry of GC's `cni.dev/valid-attachments` (CNI SPEC 1.1 "GC"). */
export interface GcAttachment {
  /** The runtime's container ID. */
  containerID: string;
  /** The attachment's interface name. */
  ifname: string;
}
