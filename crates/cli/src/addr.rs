//! Addresses on the command line, in netio's one grammar ([`netio::HostPort`] for a peer,
//! [`netio::ListenSpec`] to listen): each flag's text parsed, its error a usage error (exit 2)
//! naming the flag.

use std::net::SocketAddr;

use anyhow::Result;
use netio::{HostPort, ListenSpec};

use crate::{usage, usage_in};

/// A peer `HOST:PORT` (or `HOST` when the command has a `default_port`) resolved to its first
/// address. `what` names the flag or argument in the error.
pub fn peer(what: &str, s: &str, default_port: Option<u16>) -> Result<(HostPort, SocketAddr)> {
    let hp = HostPort::parse(s, default_port).map_err(|e| usage_in(what, e))?;
    let addr = hp.resolve().map_err(|e| usage_in(what, e))?;
    Ok((hp, addr))
}

/// A destination's transport: `tcp:HOST:PORT` is a TCP connection to a correlator that is the
/// server (DiFX's NETWORK datastreams), anything else a UDP `HOST:PORT`. Returns whether it is
/// TCP, and the address text.
pub fn transport(s: &str) -> (bool, &str) {
    match s.strip_prefix("tcp:") {
        Some(rest) => (true, rest),
        None => (false, s),
    }
}

/// A listen spec (`PORT`, `ADDR:PORT`, `GROUP@PORT%IFACE`) of flag `what`.
pub fn listen(what: &str, s: &str) -> Result<ListenSpec> {
    s.parse().map_err(|e| usage(format!("{what} {e}")))
}

/// A listen spec that must be unicast (a TCP port, or a service that joins no group).
pub fn listen_unicast(what: &str, s: &str) -> Result<SocketAddr> {
    let spec = listen(what, s)?;
    spec.unicast().ok_or_else(|| {
        usage(format!(
            "{what} {s}: a multicast group; this listens on a unicast address (PORT or ADDR:PORT)"
        ))
    })
}
