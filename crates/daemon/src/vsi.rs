//! The VSI-S control port: TCP, one thread per connection on the project's accept loop
//! ([`ctlchan::serve`]), requests framed by [`vsis::framing`].
//!
//! Who may talk: connections from the loopback addresses and from the addresses of
//! [`VsiLimits::allow`] only (VSI-S has no authentication, and the Field System none to give);
//! any other peer is closed at accept. A connection counts as pending until it sends a
//! well-formed statement (garbage and overlong lines are answered, but do not make a session),
//! each for [`VsiLimits::first_request`]: until its first byte it waits on the accept loop as a
//! descriptor only (thousands may; [`ctlchan::serve`] closes the oldest of the peer holding the
//! most, so a flood of idle connections never keeps the Field System out), after it at most
//! [`VsiLimits::pending`] wait at once.
//! After its first statement a connection is a session and may stay as long as it likes (the
//! FS keeps one open all day); at most [`VsiLimits::sessions`] at once.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ctlchan::serve::{Limits, ServeStats, Ticket};
use vsis::framing::{reply_terminator, Event, Framer, MAX_LINE};
use vsis::statement::split_request;
use vsis::{ReplyRepr, ReturnCode};

use crate::runtimes::Session;
use crate::Daemon;

/// Bounds of the control port.
#[derive(Debug, Clone)]
pub struct VsiLimits {
    /// Peers allowed besides the loopback addresses.
    pub allow: Vec<IpAddr>,
    /// Connections waiting for their first request, at most.
    pub pending: usize,
    /// Time a connection has to send its first request.
    pub first_request: Duration,
    /// Sessions at once, at most.
    pub sessions: usize,
}

impl Default for VsiLimits {
    /// Loopback only, 64 pending for 60 s each, 32 sessions.
    fn default() -> VsiLimits {
        VsiLimits {
            allow: Vec::new(),
            pending: 64,
            first_request: Duration::from_secs(60),
            sessions: 32,
        }
    }
}

/// Time to write a reply before the connection is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a session's read wakes up to look at the stop flag.
const POLL: Duration = Duration::from_millis(200);

/// Serve the control port until `stop`.
pub fn serve(
    listener: &TcpListener,
    daemon: &Daemon,
    limits: &VsiLimits,
    stop: &AtomicBool,
) -> std::io::Result<ServeStats> {
    let l = Limits {
        max_pending: limits.pending,
        handshake_timeout: limits.first_request,
        max_active: limits.sessions,
        ..Limits::default()
    };
    // Peers not allowed are shut out at accept: they never hold a place a flood could take.
    let admit = |peer: SocketAddr| {
        let ok = allowed(peer.ip(), &limits.allow);
        if !ok {
            daemon.note_refused();
        }
        ok
    };
    let handler = |s: TcpStream, _: SocketAddr, t: &Ticket<'_>, _: &std::sync::mpsc::Sender<()>| {
        daemon.note(0, 1);
        connection(s, t, daemon, stop);
    };
    ctlchan::serve::serve_admitting(listener, stop, &l, None, &admit, &handler, &mut |_| {})
}

/// A loopback peer, or one of `allow` (an IPv4 peer on an IPv6 socket counts as its IPv4).
pub fn allowed(ip: IpAddr, allow: &[IpAddr]) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    ip.is_loopback() || allow.contains(&ip)
}

/// One connection: requests in, replies out, until it closes, misbehaves or `stop`; it works
/// in the runtime it selected last, and the transient runtimes it made go with it.
fn connection(s: TcpStream, ticket: &Ticket<'_>, daemon: &Daemon, stop: &AtomicBool) {
    let mut session = daemon.session();
    converse(s, ticket, daemon, &mut session, stop);
    daemon.end_session(session);
}

/// [`connection`]'s requests and replies.
fn converse(mut s: TcpStream, ticket: &Ticket<'_>, daemon: &Daemon, session: &mut Session, stop: &AtomicBool) {
    let mut framer = Framer::new();
    let mut buf = vec![0u8; MAX_LINE];
    let mut admitted = false;
    if s.set_write_timeout(Some(WRITE_TIMEOUT)).is_err() {
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        let wait = if admitted { POLL } else { ticket.remaining().min(POLL) };
        if wait.is_zero() || s.set_read_timeout(Some(wait)).is_err() {
            return;
        }
        let n = match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(_) => return,
        };
        framer.push(&buf[..n]);
        while let Some(event) = framer.poll() {
            // A session starts with the first real statement: garbage and overlong lines are
            // answered but leave the connection pending, bounded in number and time.
            if !admitted && holds_a_statement(&event) {
                if let Err(e) = ticket.authenticated() {
                    let r = ReplyRepr::for_keyword("syntax", false, ReturnCode::Busy, [e.to_string()]);
                    let _ = s.write_all(format!("{r}\n").as_bytes());
                    return;
                }
                admitted = true;
            }
            let out = answer(daemon, session, event);
            if !out.is_empty() && s.write_all(&out).is_err() {
                return;
            }
        }
    }
}

/// Whether a request holds at least one well-formed statement.
fn holds_a_statement(event: &Event) -> bool {
    match event {
        Event::Request { text, .. } => split_request(text).iter().any(Result::is_ok),
        Event::Overlong => false,
    }
}

/// The reply line to one request.
fn answer(daemon: &Daemon, session: &mut Session, event: Event) -> Vec<u8> {
    let mut out = Vec::new();
    match event {
        Event::Overlong => {
            daemon.note(1, 0);
            let r = ReplyRepr::for_keyword(
                "syntax",
                false,
                ReturnCode::NoSuchKeyword,
                [format!("line longer than {MAX_LINE} bytes, dropped")],
            );
            r.emit(&mut out);
            out.push(b'\n');
        }
        Event::Request { text, crlf } => {
            let statements = split_request(&text);
            // Nothing but separators: no reply, as jive5ab.
            if statements.is_empty() {
                return out;
            }
            for statement in statements {
                let reply = match statement {
                    Ok(s) => daemon.execute_in(session, &s),
                    // jive5ab: `!syntax = 7 : Not a command or query;`
                    Err(e) => ReplyRepr::for_keyword("syntax", false, ReturnCode::NoSuchKeyword, [e.to_string()]),
                };
                reply.emit(&mut out);
            }
            out.extend_from_slice(reply_terminator(crlf));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_and_allowed_peers_may_command() {
        let fs: IpAddr = "10.1.1.5".parse().unwrap();
        assert!(allowed("127.0.0.1".parse().unwrap(), &[]));
        assert!(allowed("127.8.9.1".parse().unwrap(), &[]));
        assert!(allowed("::1".parse().unwrap(), &[]));
        assert!(allowed("::ffff:127.0.0.1".parse().unwrap(), &[]));
        assert!(!allowed(fs, &[]));
        assert!(allowed(fs, &[fs]));
        assert!(allowed("::ffff:10.1.1.5".parse().unwrap(), &[fs]));
        assert!(!allowed("10.1.1.6".parse().unwrap(), &[fs]));
    }
}
