//! Network addresses as users type them: `HOST:PORT`, `HOST` with a default port, `PORT` or
//! `ADDRESS:PORT` to listen on. The syntax is checked here, so that a typo gets a message saying
//! what is wrong with it (a port out of range, a colon too many) rather than the resolver's
//! "Name or service not known" for the whole string.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// `HOST[:PORT]` → host and port; `default_port` when none is given (`None`: a port is
/// required). Port 0 only when `zero_port` (listening: "pick a free one"). IPv6 with a port is
/// `[ADDR]:PORT`; a bare IPv6 address is a host without a port.
pub fn split_host_port(s: &str, default_port: Option<u16>, zero_port: bool) -> Result<(String, u16), String> {
    let no_port =
        || default_port.ok_or_else(|| format!("{s:?}: missing port (expected HOST:PORT, e.g. 127.0.0.1:46227)"));
    if s.is_empty() {
        return Err("empty address (expected HOST:PORT)".into());
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{s:?}: '[' without ']' (IPv6 is written [ADDR]:PORT)"))?;
        // Through SocketAddr: it also takes a scope (fe80::1%2).
        if format!("[{inside}]:1").parse::<SocketAddr>().is_err() {
            return Err(format!("{s:?}: {inside:?} in brackets is not an IPv6 address"));
        }
        let port = match after {
            "" => no_port()?,
            p => match p.strip_prefix(':') {
                Some(p) => port(s, p, zero_port)?,
                None => return Err(format!("{s:?}: expected ':PORT' after ']', found {p:?}")),
            },
        };
        return Ok((inside.to_string(), port));
    }
    match s.matches(':').count() {
        0 => Ok((s.to_string(), no_port()?)),
        1 => {
            let (host, p) = s.split_once(':').unwrap_or((s, ""));
            if host.is_empty() {
                return Err(format!("{s:?}: missing host before ':'"));
            }
            Ok((host.to_string(), port(s, p, zero_port)?))
        }
        _ if s.parse::<Ipv6Addr>().is_ok() => Ok((s.to_string(), no_port()?)),
        _ => Err(format!(
            "{s:?}: too many colons for HOST:PORT (IPv6 with a port is written [ADDR]:PORT)"
        )),
    }
}

fn port(s: &str, p: &str, zero_port: bool) -> Result<u16, String> {
    if p.is_empty() {
        return Err(format!("{s:?}: missing port after ':'"));
    }
    if !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s:?}: port {p:?} is not a number"));
    }
    let lo = if zero_port { 0 } else { 1 };
    match p.parse::<u16>() {
        Ok(v) if v >= lo => Ok(v),
        _ => Err(format!("{s:?}: port {p} out of range ({lo}..=65535)")),
    }
}

/// Resolve a host and port to its first address (a name through the system resolver).
pub fn resolve(host: &str, port: u16) -> std::io::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "the name has no address"))
}

/// A listen address: `PORT` (all IPv4 addresses) or `ADDRESS:PORT` with a numeric address
/// (`[::]:PORT` for IPv6); port 0 picks a free one.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return port(s, s, true).map(|p| SocketAddr::from(([0, 0, 0, 0], p)));
    }
    if !s.contains(':') {
        return Err(format!("{s:?}: expected PORT or ADDRESS:PORT"));
    }
    let (host, p) = split_host_port(s, None, true)?;
    let ip: IpAddr = host
        .parse()
        .map_err(|_| format!("{s:?}: {host:?} is not an IP address (listen on e.g. 0.0.0.0:PORT or [::]:PORT)"))?;
    Ok(SocketAddr::new(ip, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port() {
        let ok = |s, d| split_host_port(s, d, false).unwrap();
        assert_eq!(ok("127.0.0.1:5310", None), ("127.0.0.1".into(), 5310));
        assert_eq!(ok("corr.example.org", Some(5301)), ("corr.example.org".into(), 5301));
        assert_eq!(ok("[::1]:80", None), ("::1".into(), 80));
        assert_eq!(ok("[::1]", Some(7)), ("::1".into(), 7));
        assert_eq!(ok("::1", Some(7)), ("::1".into(), 7));
        assert_eq!(ok("fe80::1:2", Some(7)), ("fe80::1:2".into(), 7));
        assert_eq!(ok("h:65535", None), ("h".into(), 65535));
        let err = |s, d| split_host_port(s, d, false).unwrap_err();
        assert!(err("127.0.0.1:70000:5310", Some(1)).contains("too many colons"));
        assert!(err("127.0.0.1:70000", None).contains("out of range (1..=65535)"));
        assert!(err("127.0.0.1:0", None).contains("out of range"));
        assert!(err("127.0.0.1:", None).contains("missing port"));
        assert!(err("127.0.0.1", None).contains("missing port"));
        assert!(err(":80", None).contains("missing host"));
        assert!(err("h:http", None).contains("not a number"));
        assert!(err("h:-1", None).contains("not a number"));
        assert!(err("h:99999999999999999999", None).contains("out of range"));
        assert!(err("[::1", None).contains("without ']'"));
        assert!(err("[nope]:1", None).contains("not an IPv6"));
        assert!(err("[::1]x", None).contains("after ']'"));
        assert!(err("", None).contains("empty"));
        assert_eq!(split_host_port("h:0", None, true).unwrap(), ("h".into(), 0));
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_listen("5310").unwrap(), "0.0.0.0:5310".parse().unwrap());
        assert_eq!(parse_listen("0").unwrap(), "0.0.0.0:0".parse().unwrap());
        assert_eq!(parse_listen("127.0.0.1:0").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert_eq!(parse_listen("[::]:9").unwrap(), "[::]:9".parse().unwrap());
        assert!(parse_listen("70000").unwrap_err().contains("out of range (0..=65535)"));
        assert!(parse_listen("localhost:80").unwrap_err().contains("not an IP address"));
        assert!(parse_listen("1.2.3.4:5:6").unwrap_err().contains("too many colons"));
        assert!(parse_listen("nonsense")
            .unwrap_err()
            .contains("expected PORT or ADDRESS:PORT"));
    }
}
