//! The one address grammar of evlbi: `HOST:PORT` for a peer (`127.0.0.1:5000`, `[::1]:5000`,
//! `corr.example.org:46227`, or `HOST` alone where a command has a default port), and the
//! `ADDR:PORT` part of a listen spec ([`crate::ListenSpec`] adds `PORT` and multicast groups).
//!
//! The syntax is checked before any name is resolved, so a typo gets a message saying what is
//! wrong with it (a port out of range, a colon too many) rather than the resolver's "Name or
//! service not known" for the whole string. IPv6 with a port is written in brackets
//! (`[ADDR]:PORT`, RFC 3986 §3.2.2); a bare IPv6 address is a host without a port.

use std::fmt;
use std::net::{Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;

use thiserror::Error;

/// What is wrong with the text of an address, before any name is looked up.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AddrSyntax {
    /// Nothing given.
    #[error("empty address")]
    Empty,
    /// No `:PORT` and the command has no default port.
    #[error("missing port")]
    MissingPort,
    /// A bare IPv6 address, whose last group could be read as a port.
    #[error("missing port: an IPv6 address alone (IPv6 with a port goes in brackets: [ADDR]:PORT)")]
    MissingPortAfterIpv6,
    /// `:PORT` with nothing before it.
    #[error("missing host before ':'")]
    MissingHost,
    /// The port has characters other than digits.
    #[error("port {port:?} is not a number")]
    PortNotNumber {
        /// The port as typed.
        port: String,
    },
    /// The port is a number outside `min..=65535`.
    #[error("port {port} out of range ({min}..=65535)")]
    PortOutOfRange {
        /// The port as typed (digits, possibly past u16).
        port: String,
        /// The smallest port taken: 1 for a peer, 0 (any free port) to listen.
        min: u16,
    },
    /// More than one colon outside brackets, and not an IPv6 address.
    #[error("too many colons (IPv6 with a port goes in brackets: [ADDR]:PORT)")]
    TooManyColons,
    /// `[` without its `]`.
    #[error("'[' without ']' (IPv6 is written [ADDR]:PORT)")]
    UnclosedBracket,
    /// What is in brackets is not an IPv6 address.
    #[error("{inside:?} in brackets is not an IPv6 address")]
    NotIpv6InBrackets {
        /// The text between the brackets.
        inside: String,
    },
    /// Something other than `:PORT` after `]`.
    #[error("expected ':PORT' after ']', found {found:?}")]
    AfterBracket {
        /// What follows the bracket.
        found: String,
    },
}

/// The example every `HOST:PORT` error shows.
pub const HOST_PORT_FORMS: &str = "expected HOST:PORT, e.g. 127.0.0.1:5000 or [::1]:5000";

/// Why a `HOST:PORT` cannot be used: its text, or the name behind it.
#[derive(Debug, Error)]
pub enum HostPortError {
    /// The text is not `HOST:PORT`.
    #[error("{HOST_PORT_FORMS}: {input:?}: {syntax}")]
    Syntax {
        /// The whole address as typed.
        input: String,
        /// What is wrong with it.
        syntax: AddrSyntax,
    },
    /// The system resolver failed for the host.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The host name.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// The host resolved to no address (of the family asked for).
    #[error("{host} has no {family}address")]
    NoAddress {
        /// The host name.
        host: String,
        /// "IPv4 " when only IPv4 was wanted, else empty.
        family: &'static str,
    },
}

/// A peer's address as typed: a host (a name, an IPv4 or an IPv6 address) and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// The host, without brackets.
    pub host: String,
    /// The port, 1..=65535.
    pub port: u16,
}

impl HostPort {
    /// `HOST:PORT`, or `HOST` alone taking `default_port` (`None`: the port is required).
    pub fn parse(s: &str, default_port: Option<u16>) -> Result<HostPort, HostPortError> {
        let syntax = |syntax| HostPortError::Syntax {
            input: s.to_string(),
            syntax,
        };
        let (host, port) = split_host_port(s, 1).map_err(syntax)?;
        let port = port.or(default_port).ok_or_else(|| syntax(missing_port(s)))?;
        Ok(HostPort {
            host: host.to_string(),
            port,
        })
    }

    /// The first address the host resolves to (a name through the system resolver).
    pub fn resolve(&self) -> Result<SocketAddr, HostPortError> {
        self.addresses()?.next().ok_or_else(|| HostPortError::NoAddress {
            host: self.host.clone(),
            family: "",
        })
    }

    /// The first IPv4 address the host resolves to.
    pub fn resolve_ipv4(&self) -> Result<SocketAddr, HostPortError> {
        self.addresses()?
            .find(SocketAddr::is_ipv4)
            .ok_or_else(|| HostPortError::NoAddress {
                host: self.host.clone(),
                family: "IPv4 ",
            })
    }

    fn addresses(&self) -> Result<std::vec::IntoIter<SocketAddr>, HostPortError> {
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|source| HostPortError::Resolve {
                host: self.host.clone(),
                source,
            })
    }
}

/// `HOST:PORT` with the port required.
impl FromStr for HostPort {
    type Err = HostPortError;

    fn from_str(s: &str) -> Result<HostPort, HostPortError> {
        HostPort::parse(s, None)
    }
}

/// The form [`HostPort::from_str`] reads back: IPv6 in brackets.
impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// `HOST[:PORT]` → the host (without brackets) and the port if one was written, at least
/// `min_port` (0 to listen on any free port, 1 for a peer).
pub fn split_host_port(s: &str, min_port: u16) -> Result<(&str, Option<u16>), AddrSyntax> {
    if s.is_empty() {
        return Err(AddrSyntax::Empty);
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or(AddrSyntax::UnclosedBracket)?;
        // Through SocketAddr: it also takes a scope (fe80::1%2).
        if format!("[{inside}]:1").parse::<SocketAddr>().is_err() {
            return Err(AddrSyntax::NotIpv6InBrackets { inside: inside.into() });
        }
        let port = match after {
            "" => None,
            p => match p.strip_prefix(':') {
                Some(p) => Some(parse_port(p, min_port)?),
                None => return Err(AddrSyntax::AfterBracket { found: p.into() }),
            },
        };
        return Ok((inside, port));
    }
    match s.matches(':').count() {
        0 => Ok((s, None)),
        1 => {
            let (host, p) = s.split_once(':').unwrap_or((s, ""));
            if host.is_empty() {
                return Err(AddrSyntax::MissingHost);
            }
            Ok((host, Some(parse_port(p, min_port)?)))
        }
        _ if s.parse::<Ipv6Addr>().is_ok() => Ok((s, None)),
        _ => Err(AddrSyntax::TooManyColons),
    }
}

/// Why `s` has no port: a bare IPv6 address is told how to write one.
pub fn missing_port(s: &str) -> AddrSyntax {
    if !s.starts_with('[') && s.contains(':') {
        AddrSyntax::MissingPortAfterIpv6
    } else {
        AddrSyntax::MissingPort
    }
}

/// A port: digits only (u16's parser would take a leading `+`, which no one means), at least
/// `min`.
pub fn parse_port(p: &str, min: u16) -> Result<u16, AddrSyntax> {
    if p.is_empty() {
        return Err(AddrSyntax::MissingPort);
    }
    if !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddrSyntax::PortNotNumber { port: p.into() });
    }
    match p.parse::<u16>() {
        Ok(v) if v >= min => Ok(v),
        _ => Err(AddrSyntax::PortOutOfRange { port: p.into(), min }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str, default_port: Option<u16>) -> (String, u16) {
        let hp = HostPort::parse(s, default_port).unwrap_or_else(|e| panic!("{s}: {e}"));
        (hp.host, hp.port)
    }

    fn err(s: &str, default_port: Option<u16>) -> String {
        match HostPort::parse(s, default_port) {
            Ok(hp) => panic!("{s} parsed as {hp:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn host_and_port() {
        assert_eq!(ok("127.0.0.1:5310", None), ("127.0.0.1".into(), 5310));
        assert_eq!(ok("corr.example.org", Some(5301)), ("corr.example.org".into(), 5301));
        assert_eq!(ok("[::1]:80", None), ("::1".into(), 80));
        assert_eq!(ok("[::1]", Some(7)), ("::1".into(), 7));
        assert_eq!(ok("::1", Some(7)), ("::1".into(), 7));
        assert_eq!(ok("fe80::1:2", Some(7)), ("fe80::1:2".into(), 7));
        assert_eq!(ok("h:65535", None), ("h".into(), 65535));
        assert_eq!(ok("[fe80::1%2]:9", None), ("fe80::1%2".into(), 9));
    }

    #[test]
    fn every_error_says_the_form_and_what_is_wrong() {
        for (s, default_port, needle) in [
            ("127.0.0.1:70000:5310", Some(1), "too many colons"),
            ("127.0.0.1:70000", None, "port 70000 out of range (1..=65535)"),
            ("127.0.0.1:0", None, "out of range"),
            ("127.0.0.1:", None, "missing port"),
            ("127.0.0.1", None, "missing port"),
            (":80", None, "missing host"),
            ("h:http", None, "not a number"),
            ("h:-1", None, "not a number"),
            ("h:+1", None, "not a number"),
            ("h:99999999999999999999", None, "out of range"),
            ("[::1", None, "without ']'"),
            ("[nope]:1", None, "not an IPv6"),
            ("[::1]x", None, "after ']'"),
            (
                "::1:5000",
                None,
                "missing port: an IPv6 address alone (IPv6 with a port goes in brackets",
            ),
            ("", None, "empty"),
        ] {
            let e = err(s, default_port);
            assert!(e.starts_with(HOST_PORT_FORMS), "{s}: {e}");
            assert!(e.contains(needle), "{s}: {e}");
            assert!(e.contains(&format!("{s:?}")), "{s}: {e}");
        }
    }

    #[test]
    fn listening_takes_port_zero() {
        assert_eq!(split_host_port("h:0", 0), Ok(("h", Some(0))));
        assert_eq!(
            split_host_port("h:70000", 0),
            Err(AddrSyntax::PortOutOfRange {
                port: "70000".into(),
                min: 0
            })
        );
    }

    #[test]
    fn resolves_numeric_hosts_and_says_which_name_failed() {
        let hp: HostPort = "127.0.0.1:9".parse().expect("parses");
        assert_eq!(hp.resolve().expect("numeric"), "127.0.0.1:9".parse().expect("addr"));
        assert_eq!(
            hp.resolve_ipv4().expect("numeric"),
            "127.0.0.1:9".parse().expect("addr")
        );
        let v6: HostPort = "[::1]:9".parse().expect("parses");
        assert!(v6
            .resolve_ipv4()
            .unwrap_err()
            .to_string()
            .contains("::1 has no IPv4 address"));
        // A name that no resolver knows (RFC 6761 reserves .invalid).
        let e = HostPort::parse("nowhere.invalid", Some(5))
            .expect("parses")
            .resolve()
            .unwrap_err();
        assert!(e.to_string().contains("cannot resolve nowhere.invalid"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn display_reads_back(host in "[a-z][a-z0-9.-]{0,20}|[0-9]{1,3}(\\.[0-9]{1,3}){3}", port in 1u16..) {
            let hp = HostPort { host, port };
            proptest::prop_assert_eq!(hp.to_string().parse::<HostPort>().ok(), Some(hp));
        }

        #[test]
        fn ipv6_reads_back(a in proptest::prelude::any::<[u16; 8]>(), port in 1u16..) {
            let ip = Ipv6Addr::from(a);
            let hp = HostPort { host: ip.to_string(), port };
            proptest::prop_assert_eq!(hp.to_string().parse::<HostPort>().ok(), Some(hp.clone()));
            proptest::prop_assert_eq!(HostPort::parse(&hp.host, Some(port)).ok(), Some(hp));
        }

        #[test]
        fn any_string_parses_or_errs_without_panicking(s in ".{0,40}") {
            if let Ok(hp) = s.parse::<HostPort>() {
                proptest::prop_assert_eq!(hp.to_string().parse::<HostPort>().ok(), Some(hp));
            }
        }
    }
}
