/**
 * Numeric constants of the netlink and rtnetlink wire format, named as in the kernel
 * UAPI headers they come from (`linux/netlink.h`, `linux/rtnetlink.h`, `linux/if_link.h`,
 * `linux/if_addr.h`, `linux/if_arp.h`, `linux/if.h`).
 *
 * @module
 */

// linux/netlink.h — struct nlmsghdr and flags
/** `sizeof(struct nlmsghdr)` in bytes (linux/netlink.h). */
export const NLMSG_HDRLEN = 16;
/** `sizeof(struct nlattr)` in bytes (linux/netlink.h). */
export const NLA_HDRLEN = 4;
/** Netlink alignment in bytes (`NLMSG_ALIGNTO`, `NLA_ALIGNTO`, linux/netlink.h). */
export const NL_ALIGNTO = 4;
/** `NLMSG_NOOP` (linux/netlink.h). */
export const NLMSG_NOOP = 1;
/** `NLMSG_ERROR` — error or ACK (linux/netlink.h). */
export const NLMSG_ERROR = 2;
/** `NLMSG_DONE` — end of a multi-part dump (linux/netlink.h). */
export const NLMSG_DONE = 3;
/** `NLMSG_OVERRUN` (linux/netlink.h). */
export const NLMSG_OVERRUN = 4;
/** `NLM_F_REQUEST` (linux/netlink.h). */
export const NLM_F_REQUEST = 0x01;
/** `NLM_F_MULTI` — part of a multi-part message (linux/netlink.h). */
export const NLM_F_MULTI = 0x02;
/** `NLM_F_ACK` (linux/netlink.h). */
export const NLM_F_ACK = 0x04;
/** `NLM_F_DUMP_INTR` — the dump was inconsistent because of a change (linux/netlink.h). */
export const NLM_F_DUMP_INTR = 0x10;
/** `NLM_F_DUMP` = `NLM_F_ROOT | NLM_F_MATCH` (linux/netlink.h). */
export const NLM_F_DUMP = 0x300;
/** `NLM_F_REPLACE` — modifier of NEW requests (linux/netlink.h). */
export const NLM_F_REPLACE = 0x100;
/** `NLM_F_EXCL` (linux/netlink.h). */
export const NLM_F_EXCL = 0x200;
/** `NLM_F_CREATE` (linux/netlink.h). */
export const NLM_F_CREATE = 0x400;
/** `NLM_F_CAPPED` — ACK flag: request payload cut to its header (linux/netlink.h). */
export const NLM_F_CAPPED = 0x100;
/** `NLM_F_ACK_TLVS` — ACK flag: extended ack TLVs follow (linux/netlink.h). */
export const NLM_F_ACK_TLVS = 0x200;
/** `NLA_F_NESTED` (linux/netlink.h). */
export const NLA_F_NESTED = 0x8000;
/** `NLA_F_NET_BYTEORDER` (linux/netlink.h). */
export const NLA_F_NET_BYTEORDER = 0x4000;
/** `NLA_TYPE_MASK` (linux/netlink.h). */
export const NLA_TYPE_MASK = ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER) & 0xffff;
/** `NLMSGERR_ATTR_MSG` — extended ack: error string (linux/netlink.h). */
export const NLMSGERR_ATTR_MSG = 1;
/** `NLMSGERR_ATTR_OFFS` — extended ack: offset of the bad attribute (linux/netlink.h). */
export const NLMSGERR_ATTR_OFFS = 2;
/** `NETLINK_ROUTE` protocol (linux/netlink.h). */
export const NETLINK_ROUTE = 0;
/** `NETLINK_CAP_ACK` socket option (linux/netlink.h). */
export const NETLINK_CAP_ACK = 10;
/** `NETLINK_EXT_ACK` socket option (linux/netlink.h). */
export const NETLINK_EXT_ACK = 11;
/** `SOL_NETLINK` socket level (linux/socket.h). */
export const SOL_NETLINK = 270;

// linux/socket.h, bits/socket.h
/** `AF_UNSPEC`. */
export const AF_UNSPEC = 0;
/** `AF_INET`. */
export const AF_INET = 2;
/** `AF_INET6`. */
export const AF_INET6 = 10;
/** `AF_NETLINK`. */
export const AF_NETLINK = 16;

// linux/rtnetlink.h — message types
/** `RTM_NEWLINK` (linux/rtnetlink.h). */
export const RTM_NEWLINK = 16;
/** `RTM_DELLINK` (linux/rtnetlink.h). */
export const RTM_DELLINK = 17;
/** `RTM_GETLINK` (linux/rtnetlink.h). */
export const RTM_GETLINK = 18;
/** `RTM_NEWADDR` (linux/rtnetlink.h). */
export const RTM_NEWADDR = 20;
/** `RTM_DELADDR` (linux/rtnetlink.h). */
export const RTM_DELADDR = 21;
/** `RTM_GETADDR` (linux/rtnetlink.h). */
export const RTM_GETADDR = 22;
/** `RTM_NEWROUTE` (linux/rtnetlink.h). */
export const RTM_NEWROUTE = 24;
/** `RTM_DELROUTE` (linux/rtnetlink.h). */
export const RTM_DELROUTE = 25;
/** `RTM_GETROUTE` (linux/rtnetlink.h). */
export const RTM_GETROUTE = 26;

// linux/rtnetlink.h — struct rtmsg fields
/** `RT_TABLE_UNSPEC` (linux/rtnetlink.h). */
export const RT_TABLE_UNSPEC = 0;
/** `RT_TABLE_MAIN` (linux/rtnetlink.h). */
export const RT_TABLE_MAIN = 254;
/** `RT_TABLE_LOCAL` (linux/rtnetlink.h). */
export const RT_TABLE_LOCAL = 255;
/** `RTPROT_UNSPEC` (linux/rtnetlink.h). */
export const RTPROT_UNSPEC = 0;
/** `RTPROT_KERNEL` (linux/rtnetlink.h). */
export const RTPROT_KERNEL = 2;
/** `RTPROT_BOOT` — what `ip route add` uses (linux/rtnetlink.h). */
export const RTPROT_BOOT = 3;
/** `RTPROT_STATIC` (linux/rtnetlink.h). */
export const RTPROT_STATIC = 4;
/** `RT_SCOPE_UNIVERSE` (linux/rtnetlink.h). */
export const RT_SCOPE_UNIVERSE = 0;
/** `RT_SCOPE_SITE` (linux/rtnetlink.h). */
export const RT_SCOPE_SITE = 200;
/** `RT_SCOPE_LINK` (linux/rtnetlink.h). */
export const RT_SCOPE_LINK = 253;
/** `RT_SCOPE_HOST` (linux/rtnetlink.h). */
export const RT_SCOPE_HOST = 254;
/** `RT_SCOPE_NOWHERE` (linux/rtnetlink.h). */
export const RT_SCOPE_NOWHERE = 255;
/** `RTN_UNSPEC` (linux/rtnetlink.h). */
export const RTN_UNSPEC = 0;
/** `RTN_UNICAST` (linux/rtnetlink.h). */
export const RTN_UNICAST = 1;
/** `RTN_LOCAL` (linux/rtnetlink.h). */
export const RTN_LOCAL = 2;
/** `RTN_BROADCAST` (linux/rtnetlink.h). */
export const RTN_BROADCAST = 3;
/** `RTN_MULTICAST` (linux/rtnetlink.h). */
export const RTN_MULTICAST = 5;

// linux/rtnetlink.h — enum rtattr_type_t
/** `RTA_DST` (linux/rtnetlink.h). */
export const RTA_DST = 1;
/** `RTA_SRC` (linux/rtnetlink.h). */
export const RTA_SRC = 2;
/** `RTA_IIF` (linux/rtnetlink.h). */
export const RTA_IIF = 3;
/** `RTA_OIF` (linux/rtnetlink.h). */
export const RTA_OIF = 4;
/** `RTA_GATEWAY` (linux/rtnetlink.h). */
export const RTA_GATEWAY = 5;
/** `RTA_PRIORITY` — the metric (linux/rtnetlink.h). */
export const RTA_PRIORITY = 6;
/** `RTA_PREFSRC` (linux/rtnetlink.h). */
export const RTA_PREFSRC = 7;
/** `RTA_MULTIPATH` — array of `struct rtnexthop` (linux/rtnetlink.h). */
export const RTA_MULTIPATH = 9;
/** `RTA_TABLE` — 32-bit table id (linux/rtnetlink.h). */
export const RTA_TABLE = 15;

// linux/if_link.h
/** `IFLA_ADDRESS` — hardware address, any length (linux/if_link.h). */
export const IFLA_ADDRESS = 1;
/** `IFLA_BROADCAST` (linux/if_link.h). */
export const IFLA_BROADCAST = 2;
/** `IFLA_IFNAME` — NUL-terminated name (linux/if_link.h). */
export const IFLA_IFNAME = 3;
/** `IFLA_MTU` — u32 bytes (linux/if_link.h). */
export const IFLA_MTU = 4;
/** `IFLA_LINK` — u32 ifindex of the lower device (linux/if_link.h). */
export const IFLA_LINK = 5;
/** `IFLA_MASTER` — u32 ifindex of the master (linux/if_link.h). */
export const IFLA_MASTER = 10;
/** `IFLA_OPERSTATE` — u8 RFC 2863 state (linux/if_link.h). */
export const IFLA_OPERSTATE = 16;
/** `IFLA_LINKINFO` — nested (linux/if_link.h). */
export const IFLA_LINKINFO = 18;
/** `IFLA_EXT_MASK` — u32 `RTEXT_FILTER_*` (linux/if_link.h). */
export const IFLA_EXT_MASK = 29;
/** `IFLA_INFO_KIND` — string inside `IFLA_LINKINFO` (linux/if_link.h). */
export const IFLA_INFO_KIND = 1;
/** `IFLA_INFO_SLAVE_KIND` — string inside `IFLA_LINKINFO` (linux/if_link.h). */
export const IFLA_INFO_SLAVE_KIND = 4;
/** `RTEXT_FILTER_SKIP_STATS` (linux/rtnetlink.h). */
export const RTEXT_FILTER_SKIP_STATS = 1 << 3;

// linux/if_addr.h
/** `IFA_ADDRESS` — peer address (or local, when not point-to-point) (linux/if_addr.h). */
export const IFA_ADDRESS = 1;
/** `IFA_LOCAL` — local address (linux/if_addr.h). */
export const IFA_LOCAL = 2;
/** `IFA_LABEL` (linux/if_addr.h). */
export const IFA_LABEL = 3;
/** `IFA_FLAGS` — u32, supersedes `ifa_flags` (linux/if_addr.h). */
export const IFA_FLAGS = 8;

// linux/if_arp.h
/** `ARPHRD_ETHER` (linux/if_arp.h). */
export const ARPHRD_ETHER = 1;
/** `ARPHRD_INFINIBAND` — 20-byte hardware address (linux/if_arp.h). */
export const ARPHRD_INFINIBAND = 32;
/** `ARPHRD_LOOPBACK` (linux/if_arp.h). */
export const ARPHRD_LOOPBACK = 772;

// linux/if.h — net_device_flags
/** `IFF_UP` (linux/if.h). */
export const IFF_UP = 0x1;
/** `IFF_LOOPBACK` (linux/if.h). */
export const IFF_LOOPBACK = 0x8;
/** `IFF_LOWER_UP` (linux/if.h). */
export const IFF_LOWER_UP = 0x10000;

/**
 * `net_device_flags` bit → the name iproute2 prints (linux/if.h), in iproute2's order.
 */
export const LINK_FLAG_NAMES: ReadonlyArray<readonly [number, string]> = [
  [0x8, "LOOPBACK"],
  [0x2, "BROADCAST"],
  [0x10, "POINTOPOINT"],
  [0x1000, "MULTICAST"],
  [0x80, "NOARP"],
  [0x200, "ALLMULTI"],
  [0x100, "PROMISC"],
  [0x400, "MASTER"],
  [0x800, "SLAVE"],
  [0x40000, "ECHO"],
  [0x1, "UP"],
  [0x10000, "LOWER_UP"],
  [0x20000, "DORMANT"],
];

/** RFC 2863 operational state names by `IF_OPER_*` value (linux/if.h), as iproute2 prints them. */
export const OPER_STATES = [
  "UNKNOWN",
  "NOTPRESENT",
  "DOWN",
  "LOWERLAYERDOWN",
  "TESTING",
  "DORMANT",
  "UP",
] as const;
