//! Where a receiver listens: a unicast address or a multicast group, as written on a command
//! line, and the socket bound (and joined) for it.
//!
//! Stations sometimes receive their backend's stream on a multicast group, so several recorders
//! (or a recorder and a monitor) can take the same datagrams. The forms:
//!
//! | form | meaning |
//! |---|---|
//! | `46227` | every local IPv4 address, port 46227 |
//! | `10.0.0.2:46227` | that local address |
//! | `[::1]:46227` | that local IPv6 address |
//! | `239.1.2.3@46227` | join IPv4 group 239.1.2.3, port 46227, on the interface the kernel's routes pick |
//! | `239.1.2.3@46227%10.0.0.2` | join it on the interface that has address 10.0.0.2 |
//! | `239.1.2.3@46227%eth1` | join it on interface `eth1` (a name, or an index such as `%3`) |
//! | `[ff15::1]@46227%eth1` | join IPv6 group ff15::1 on `eth1` (brackets optional) |
//!
//! `@` says "join this group": an address before it that is not multicast is an error, and so is
//! a multicast address written `ADDR:PORT` (binding to a group without joining it receives
//! nothing). The interface after `%` is the one the group's datagrams arrive on; without it a
//! host with several interfaces may join on the wrong one (the one of its default route).
//!
//! A group's socket is bound with SO_REUSEADDR, so several receivers on one host can share the
//! group and port; it is bound to the group's address (IPv4), so unicast datagrams to the same
//! port are not mixed in, and with IP_MULTICAST_ALL off it gets only the group it joined.

// unsafe: if_nametoindex(3) for a multicast interface named by the user: std has none.
#![allow(unsafe_code)]

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::str::FromStr;

use socket2::{Domain, InterfaceIndexOrAddress, Protocol, Socket, Type};
use thiserror::Error;

use crate::addr::AddrSyntax;
use crate::socket::{bind_udp, size_buffers, BufferGrant, BufferRequest, NetioError};

/// The interface a multicast group is joined on (after `%`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MulticastInterface {
    /// Whichever interface the kernel's routes pick for the group (no `%`).
    Default,
    /// The interface holding this IPv4 address (`%10.0.0.2`; IPv4 groups only).
    Address(Ipv4Addr),
    /// The interface with this index (`%3`).
    Index(u32),
    /// The interface with this name (`%eth1`), looked up when the socket is bound.
    Name(String),
}

/// Where to listen: see the module docs for the forms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ListenSpec {
    /// A local (or wildcard) address and port.
    Unicast(SocketAddr),
    /// A multicast group to join.
    Multicast {
        /// The group (224.0.0.0/4 or ff00::/8).
        group: IpAddr,
        /// UDP port (0: any free port).
        port: u16,
        /// The interface to join it on.
        interface: MulticastInterface,
    },
}

/// Why a listen spec does not parse; each message shows the forms that do.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ListenSpecError {
    /// Nothing given.
    #[error("empty listen address; {FORMS}")]
    Empty,
    /// The port or the `ADDR:PORT` form is malformed (the grammar of [`crate::addr`]).
    #[error("{input:?}: {syntax}; {FORMS}")]
    Syntax {
        /// The whole spec.
        input: String,
        /// What is wrong with it.
        syntax: AddrSyntax,
    },
    /// The address does not parse.
    #[error("{input:?}: {addr:?} is not an IPv4 or IPv6 address; {FORMS}")]
    Address {
        /// The whole spec.
        input: String,
        /// The address part.
        addr: String,
    },
    /// `@` after an address that is not a multicast group.
    #[error(
        "{input:?}: {addr} is not a multicast group (224.0.0.0/4, ff00::/8), and `@` means \"join this group\"; \
         to listen on a local address write {addr_port}"
    )]
    NotMulticast {
        /// The whole spec.
        input: String,
        /// The address.
        addr: IpAddr,
        /// The unicast form to write instead.
        addr_port: String,
    },
    /// A multicast group written as a unicast `ADDR:PORT`.
    #[error("{input:?}: {addr} is a multicast group; write {group_form} to join it (`%IFACE` picks the interface)")]
    MulticastWithoutAt {
        /// The whole spec.
        input: String,
        /// The group.
        addr: IpAddr,
        /// The `GROUP@PORT` form to write instead.
        group_form: String,
    },
    /// `%` on a unicast address.
    #[error("{input:?}: `%IFACE` chooses the interface of a multicast group (GROUP@PORT%IFACE); a unicast address is already on its interface")]
    InterfaceOnUnicast {
        /// The whole spec.
        input: String,
    },
    /// The interface after `%` is not an address, index or name.
    #[error(
        "{input:?}: interface {iface:?} is {why}; give the IPv4 address of the interface (%10.0.0.2, IPv4 \
         groups), its name (%eth1) or its index (%3)"
    )]
    Interface {
        /// The whole spec.
        input: String,
        /// The interface part.
        iface: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// The forms, quoted by every parse error.
const FORMS: &str = "expected PORT, ADDR:PORT, [IPV6]:PORT, GROUP@PORT or GROUP@PORT%IFACE \
     (e.g. 46227, 10.0.0.2:46227, [::1]:46227, 239.1.2.3@46227, 239.1.2.3@46227%eth1)";

/// A port to listen on: 0 (any free port) to 65535.
fn parse_port(input: &str, port: &str) -> Result<u16, ListenSpecError> {
    crate::addr::parse_port(port, 0).map_err(|syntax| syntax_error(input, syntax))
}

fn syntax_error(input: &str, syntax: AddrSyntax) -> ListenSpecError {
    ListenSpecError::Syntax {
        input: input.into(),
        syntax,
    }
}

/// The interface after `%`, for a group of the given family.
fn parse_interface(input: &str, iface: &str, v4: bool) -> Result<MulticastInterface, ListenSpecError> {
    let bad = |why| ListenSpecError::Interface {
        input: input.into(),
        iface: iface.into(),
        why,
    };
    if iface.is_empty() {
        return Err(bad("empty"));
    }
    if let Ok(a) = iface.parse::<Ipv4Addr>() {
        return if v4 {
            Ok(MulticastInterface::Address(a))
        } else {
            Err(bad(
                "an IPv4 address, and an IPv6 group is joined by interface name or index",
            ))
        };
    }
    if iface.parse::<Ipv6Addr>().is_ok() {
        return Err(bad("an IPv6 address (interfaces are chosen by name or index)"));
    }
    if iface.bytes().all(|b| b.is_ascii_digit()) {
        return match iface.parse::<u32>() {
            Ok(i) if i > 0 => Ok(MulticastInterface::Index(i)),
            _ => Err(bad("not an interface index (1 to 4294967295)")),
        };
    }
    // Linux interface names: at most 15 bytes (IFNAMSIZ − 1), no '/', ':' or white space.
    let name_ok = iface.len() <= 15
        && iface
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':' && b != b'%' && b != b'@');
    if name_ok {
        Ok(MulticastInterface::Name(iface.into()))
    } else {
        Err(bad(
            "not an interface name (at most 15 characters, no '/', ':', '@', '%' or spaces)",
        ))
    }
}

/// An address, with or without brackets (`[ff15::1]`, `ff15::1`, `239.1.2.3`).
fn parse_ip(input: &str, addr: &str) -> Result<IpAddr, ListenSpecError> {
    let inner = addr.strip_prefix('[').and_then(|a| a.strip_suffix(']')).unwrap_or(addr);
    inner.parse().map_err(|_| ListenSpecError::Address {
        input: input.into(),
        addr: addr.into(),
    })
}

impl FromStr for ListenSpec {
    type Err = ListenSpecError;

    fn from_str(input: &str) -> Result<ListenSpec, ListenSpecError> {
        let s = input.trim();
        if s.is_empty() {
            return Err(ListenSpecError::Empty);
        }
        if let Some((addr, rest)) = s.split_once('@') {
            let (port, iface) = match rest.split_once('%') {
                Some((p, i)) => (p, Some(i)),
                None => (rest, None),
            };
            let group = parse_ip(input, addr)?;
            let port = parse_port(input, port)?;
            if !group.is_multicast() {
                return Err(ListenSpecError::NotMulticast {
                    input: input.into(),
                    addr: group,
                    addr_port: SocketAddr::new(group, port).to_string(),
                });
            }
            let interface = match iface {
                Some(i) => parse_interface(input, i, group.is_ipv4())?,
                None => MulticastInterface::Default,
            };
            return Ok(ListenSpec::Multicast { group, port, interface });
        }
        if s.contains('%') && !s.starts_with('[') {
            return Err(ListenSpecError::InterfaceOnUnicast { input: input.into() });
        }
        if s.bytes().all(|b| b.is_ascii_digit()) {
            let port = parse_port(input, s)?;
            return Ok(ListenSpec::Unicast(SocketAddr::from(([0, 0, 0, 0], port))));
        }
        // ADDR:PORT or [V6]:PORT, in the grammar every address of evlbi is written in.
        let (addr, port) = crate::addr::split_host_port(s, 0).map_err(|e| syntax_error(input, e))?;
        let port = port.ok_or_else(|| syntax_error(input, crate::addr::missing_port(s)))?;
        if addr.contains('%') {
            return Err(ListenSpecError::InterfaceOnUnicast { input: input.into() });
        }
        let ip = parse_ip(input, addr)?;
        if ip.is_multicast() {
            let group_form = match ip {
                IpAddr::V4(a) => format!("{a}@{port}"),
                IpAddr::V6(a) => format!("[{a}]@{port}"),
            };
            return Err(ListenSpecError::MulticastWithoutAt {
                input: input.into(),
                addr: ip,
                group_form,
            });
        }
        Ok(ListenSpec::Unicast(SocketAddr::new(ip, port)))
    }
}

impl fmt::Display for MulticastInterface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MulticastInterface::Default => Ok(()),
            MulticastInterface::Address(a) => write!(f, "%{a}"),
            MulticastInterface::Index(i) => write!(f, "%{i}"),
            MulticastInterface::Name(n) => write!(f, "%{n}"),
        }
    }
}

/// The form [`ListenSpec::from_str`] reads back to the same spec.
impl fmt::Display for ListenSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenSpec::Unicast(a) => write!(f, "{a}"),
            ListenSpec::Multicast {
                group: IpAddr::V4(g),
                port,
                interface,
            } => write!(f, "{g}@{port}{interface}"),
            ListenSpec::Multicast {
                group: IpAddr::V6(g),
                port,
                interface,
            } => write!(f, "[{g}]@{port}{interface}"),
        }
    }
}

impl ListenSpec {
    /// The port listened on (0: a free port is picked at bind).
    pub fn port(&self) -> u16 {
        match self {
            ListenSpec::Unicast(a) => a.port(),
            ListenSpec::Multicast { port, .. } => *port,
        }
    }

    /// Whether a group is joined.
    pub fn is_multicast(&self) -> bool {
        matches!(self, ListenSpec::Multicast { .. })
    }

    /// The address of a unicast spec (`None` for a group), for listeners that take no group
    /// (TCP control ports).
    pub fn unicast(&self) -> Option<SocketAddr> {
        match self {
            ListenSpec::Unicast(a) => Some(*a),
            ListenSpec::Multicast { .. } => None,
        }
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NetioError {
    let what = what.into();
    move |source| NetioError::Io { what, source }
}

/// The index of interface `name` (if_nametoindex(3)).
fn interface_index(name: &str) -> Result<u32, NetioError> {
    let what = format!("find interface {name}");
    let c = std::ffi::CString::new(name)
        .map_err(|_| io(what.clone())(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    // SAFETY: `c` is a NUL-terminated string that lives across the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(io(what)(std::io::Error::last_os_error()));
    }
    Ok(index)
}

/// A UDP socket for `spec` with the requested buffers, and what the kernel granted: bound to
/// the address for a unicast spec; for a group, bound with SO_REUSEADDR (several receivers may
/// share it) and joined (IP_ADD_MEMBERSHIP / IPV6_ADD_MEMBERSHIP) on its interface.
pub fn bind_listen(spec: &ListenSpec, buffers: BufferRequest) -> Result<(UdpSocket, BufferGrant), NetioError> {
    let (group, port, interface) = match spec {
        ListenSpec::Unicast(a) => return bind_udp(*a, buffers),
        ListenSpec::Multicast { group, port, interface } => (*group, *port, interface),
    };
    let sock = Socket::new(
        Domain::for_address(SocketAddr::new(group, port)),
        Type::DGRAM,
        Some(Protocol::UDP),
    )
    .map_err(io("create UDP socket"))?;
    sock.set_reuse_address(true).map_err(io("set SO_REUSEADDR"))?;
    // Buffers before bind: a receive buffer must be large before the first burst arrives.
    let grant = size_buffers(&sock, buffers)?;
    let index = match interface {
        MulticastInterface::Name(n) => Some(interface_index(n)?),
        MulticastInterface::Index(i) => Some(*i),
        MulticastInterface::Default | MulticastInterface::Address(_) => None,
    };
    match group {
        IpAddr::V4(g) => {
            // Bound to the group: unicast datagrams to the same port stay out.
            let local = SocketAddr::new(IpAddr::V4(g), port);
            sock.bind(&local.into()).map_err(io(format!("bind UDP {local}")))?;
            // Only the groups this socket joined, not every group any socket of the host joined.
            sock.set_multicast_all_v4(false).map_err(io("clear IP_MULTICAST_ALL"))?;
            let on = match (interface, index) {
                (MulticastInterface::Address(a), _) => InterfaceIndexOrAddress::Address(*a),
                (_, Some(i)) => InterfaceIndexOrAddress::Index(i),
                _ => InterfaceIndexOrAddress::Address(Ipv4Addr::UNSPECIFIED),
            };
            sock.join_multicast_v4_n(&g, &on)
                .map_err(io(format!("join multicast group {g} on {spec}")))?;
        }
        IpAddr::V6(g) => {
            // Bound to the wildcard: a link-scoped group address would need its scope id.
            let local = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
            sock.set_only_v6(true).map_err(io("set IPV6_V6ONLY"))?;
            sock.bind(&local.into()).map_err(io(format!("bind UDP {local}")))?;
            sock.set_multicast_all_v6(false)
                .map_err(io("clear IPV6_MULTICAST_ALL"))?;
            sock.join_multicast_v6(&g, index.unwrap_or(0))
                .map_err(io(format!("join multicast group {g} on {spec}")))?;
        }
    }
    Ok((sock.into(), grant))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> ListenSpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> String {
        match s.parse::<ListenSpec>() {
            Ok(spec) => panic!("{s} parsed as {spec:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unicast_listen_specs_parse_in_each_form() {
        assert_eq!(ok("46227"), ListenSpec::Unicast("0.0.0.0:46227".parse().expect("addr")));
        assert_eq!(
            ok("10.0.0.2:46227"),
            ListenSpec::Unicast("10.0.0.2:46227".parse().expect("addr"))
        );
        assert_eq!(ok("[::1]:0"), ListenSpec::Unicast("[::1]:0".parse().expect("addr")));
        assert_eq!(ok(" 46227 ").port(), 46227);
        assert!(!ok("46227").is_multicast());
    }

    #[test]
    fn multicast_listen_specs_parse_with_their_interface() {
        let g = |s: &str| s.parse::<IpAddr>().expect("group");
        assert_eq!(
            ok("239.1.2.3@46227"),
            ListenSpec::Multicast {
                group: g("239.1.2.3"),
                port: 46227,
                interface: MulticastInterface::Default
            }
        );
        let with = |s: &str| match ok(s) {
            ListenSpec::Multicast { interface, .. } => interface,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            with("239.1.2.3@46227%10.0.0.2"),
            MulticastInterface::Address("10.0.0.2".parse().expect("ip"))
        );
        assert_eq!(with("239.1.2.3@46227%eth1"), MulticastInterface::Name("eth1".into()));
        assert_eq!(with("239.1.2.3@46227%3"), MulticastInterface::Index(3));
        assert_eq!(with("[ff15::1]@46227%eth1"), MulticastInterface::Name("eth1".into()));
        assert_eq!(with("ff15::1@46227"), MulticastInterface::Default);
        assert!(ok("224.0.0.251@5353").is_multicast());
    }

    #[test]
    fn display_reads_back_to_the_same_spec() {
        for s in [
            "46227",
            "10.0.0.2:46227",
            "[::1]:9",
            "239.1.2.3@46227",
            "239.1.2.3@46227%10.0.0.2",
            "239.1.2.3@46227%eth1",
            "239.1.2.3@1%7",
            "ff15::1@46227%eth1",
        ] {
            let spec = ok(s);
            assert_eq!(ok(&spec.to_string()), spec, "{s} → {spec}");
        }
        assert_eq!(ok("239.1.2.3@46227%eth1").to_string(), "239.1.2.3@46227%eth1");
        assert_eq!(ok("ff15::1@46227").to_string(), "[ff15::1]@46227");
    }

    #[test]
    fn errors_teach_the_form_that_works() {
        let e = err("10.0.0.2@46227");
        assert!(
            e.contains("not a multicast group") && e.contains("10.0.0.2:46227"),
            "{e}"
        );
        let e = err("239.1.2.3:46227");
        assert!(e.contains("239.1.2.3@46227"), "{e}");
        let e = err("[ff15::1]:46227");
        assert!(e.contains("[ff15::1]@46227"), "{e}");
        let e = err("239.1.2.3@");
        assert!(e.contains("port") && e.contains("GROUP@PORT"), "{e}");
        assert!(err("239.1.2.3@70000").contains("port 70000 out of range (0..=65535)"));
        assert!(err("70000").contains("port 70000 out of range (0..=65535)"));
        assert!(err("1.2.3.4:5:6").contains("too many colons"));
        assert!(err("10.0.0.2").contains("missing port"));
        assert!(err("239.1.2.3@+5").contains("port"));
        assert!(err("").contains("empty"));
        assert!(err("host:46227").contains("not an IPv4 or IPv6 address"));
        assert!(err("::1:46227").contains("brackets"));
        assert!(err("10.0.0.2%eth0:46227").contains("multicast group"));
        assert!(err("239.1.2.3@46227%").contains("empty"));
        assert!(err("[ff15::1]@46227%10.0.0.2").contains("IPv6 group"));
        assert!(err("239.1.2.3@46227%0").contains("index"));
        assert!(err("239.1.2.3@46227%a/b").contains("interface name"));
        assert!(err("239.1.2.3@46227%averyveryverylongname").contains("15 characters"));
    }

    proptest::proptest! {
        #[test]
        fn any_string_parses_or_errs_without_panicking(s in ".{0,40}") {
            if let Ok(spec) = s.parse::<ListenSpec>() {
                proptest::prop_assert_eq!(spec.to_string().parse::<ListenSpec>().ok(), Some(spec));
            }
        }

        #[test]
        fn strings_of_spec_characters_never_panic(s in "[0-9a-f.:@%\\[\\] ]{0,32}") {
            let _ = s.parse::<ListenSpec>().map(|spec| spec.to_string());
        }
    }
}
