//! Control channels of evlbi: one JSON object per line over TCP, bounded and validated, with an
//! optional mutual HMAC-SHA256 challenge–response on a pre-shared key.
//!
//! - [`LineDecoder`] splits a byte stream into lines of at most `max_line` bytes and decodes each
//!   into a [`Message`] type, which validates itself; any error poisons the decoder, because
//!   resynchronising on a hostile stream is not worth the risk.
//! - [`Channel`] is the blocking socket side: send a message, wait for one with a deadline.
//! - [`mac`] computes and checks the HMACs of a challenge–response; the messages that carry them
//!   belong to each protocol, which decides what the MACs cover.
//! - After a handshake, [`Channel::authenticate`] makes every line carry a MAC under a key the
//!   handshake derived: a proxy on the path can then neither change, drop, replay, reorder nor
//!   reflect a message without the channel failing.
//! - [`serve`] accepts connections concurrently, with a deadline for the handshake and a cap on
//!   connections that have not authenticated yet; [`admission`] decides which waiting
//!   connection a flood costs (the oldest of the peer holding the most).

pub mod admission;
pub mod mac;
pub mod serve;

use std::io::{Read, Write};
use std::marker::PhantomData;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

/// A control message: JSON on the wire, checked after parsing.
pub trait Message: Serialize + DeserializeOwned {
    /// Range and consistency checks the JSON schema cannot express. `Err` names the field.
    // Typed with its implementations (probe-session's and transfer-session's messages), which
    // another branch is moving now.
    fn validate(&self) -> Result<(), String>; // string-error: implemented in probe/transfer-session
}

/// What can go wrong on a control channel.
#[derive(Debug, Error)]
pub enum ChannelError {
    /// A line longer than the limit arrived (or was about to be sent).
    #[error("control line longer than {limit} bytes")]
    LineTooLong {
        /// The limit, bytes.
        limit: usize,
    },
    /// The line is not JSON of the expected shape.
    #[error("malformed control message: {0}")]
    Json(#[from] serde_json::Error),
    /// The message parsed but a field is out of range.
    #[error("invalid control message: {0}")]
    Invalid(String),
    /// An earlier error closed the decoder for good.
    #[error("control channel already failed")]
    Poisoned,
    /// The peer closed in the middle of a line.
    #[error("control connection closed after {0} bytes of an unterminated line")]
    Truncated(usize),
    /// The peer closed the connection.
    #[error("control connection closed by the peer")]
    Closed,
    /// Nothing arrived before the deadline.
    #[error("no control message within {0:?}")]
    Timeout(Duration),
    /// A socket call failed.
    #[error("control connection: {0}")]
    Io(#[from] std::io::Error),
    /// A line of an authenticated channel has no MAC or a wrong one: changed on the way,
    /// replayed, reordered, reflected, or from someone without the session key.
    #[error("control message failed authentication (changed on the way or replayed)")]
    BadMac,
}

/// Which end of a control connection this is. The MAC of each line names its direction, so a
/// line can never be reflected back to the side that sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The side that connected.
    Client,
    /// The side that accepted.
    Server,
}

/// Per-line authentication after a handshake: each line is `JSON SP TAG`, TAG the hex
/// HMAC-SHA256 under the session key over the direction, the line's sequence number in that
/// direction and the JSON. The JSON of a message never ends in a space-free hex tail after a
/// space (it ends in `}`), so splitting at the last space is unambiguous.
#[derive(Clone)]
struct LineAuth {
    key: [u8; 32],
    role: Role,
    sent: u64,
    received: u64,
}

impl std::fmt::Debug for LineAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("LineAuth")
            .field("role", &self.role)
            .field("sent", &self.sent)
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

/// What a tag adds to a line: a space and the hex HMAC-SHA256.
const TAG_SUFFIX_LEN: usize = 1 + 2 * 32;
const TO_SERVER: &[u8] = b"evlbi-ctl client->server";
const TO_CLIENT: &[u8] = b"evlbi-ctl server->client";

impl LineAuth {
    fn directions(&self) -> (&'static [u8], &'static [u8]) {
        match self.role {
            Role::Client => (TO_SERVER, TO_CLIENT),
            Role::Server => (TO_CLIENT, TO_SERVER),
        }
    }

    /// Append ` TAG` to `line` (which has no newline yet).
    fn seal(&mut self, line: &mut Vec<u8>) -> Result<(), ChannelError> {
        let (out, _) = self.directions();
        let tag = mac::prove(&self.key, &[out, &self.sent.to_be_bytes(), line]).map_err(|_| ChannelError::BadMac)?;
        self.sent += 1;
        line.push(b' ');
        line.extend_from_slice(tag.as_bytes());
        Ok(())
    }

    /// Check and strip the tag of a received line.
    fn open<'a>(&mut self, line: &'a [u8]) -> Result<&'a [u8], ChannelError> {
        let (_, inbound) = self.directions();
        let sp = line.iter().rposition(|&b| b == b' ').ok_or(ChannelError::BadMac)?;
        let (body, tag) = (&line[..sp], &line[sp + 1..]);
        let tag = std::str::from_utf8(tag).map_err(|_| ChannelError::BadMac)?;
        mac::verify(&self.key, &[inbound, &self.received.to_be_bytes(), body], tag)
            .map_err(|_| ChannelError::BadMac)?;
        self.received += 1;
        Ok(body)
    }
}

/// Serialise `msg` as one line terminated by `\n`, refusing lines over `max_line` bytes (the
/// peer would refuse them anyway) and messages that do not validate.
pub fn encode_line<M: Message>(msg: &M, max_line: usize) -> Result<Vec<u8>, ChannelError> {
    msg.validate().map_err(ChannelError::Invalid)?;
    let mut v = serde_json::to_vec(msg)?;
    if v.len() > max_line {
        return Err(ChannelError::LineTooLong { limit: max_line });
    }
    v.push(b'\n');
    Ok(v)
}

/// Parse and validate one line (without its newline).
pub fn decode_line<M: Message>(line: &[u8]) -> Result<M, ChannelError> {
    let msg: M = serde_json::from_slice(line)?;
    msg.validate().map_err(ChannelError::Invalid)?;
    Ok(msg)
}

/// Splits a byte stream into bounded lines and decodes each into an `M`.
///
/// Memory is bounded by `max_line` plus the largest piece handed to [`LineDecoder::push`].
#[derive(Debug)]
pub struct LineDecoder<M> {
    buf: Vec<u8>,
    max_line: usize,
    poisoned: bool,
    auth: Option<LineAuth>,
    _msg: PhantomData<fn() -> M>,
}

impl<M: Message> LineDecoder<M> {
    /// A decoder refusing lines longer than `max_line` bytes (excluding the newline).
    pub fn new(max_line: usize) -> Self {
        LineDecoder {
            buf: Vec::new(),
            max_line,
            poisoned: false,
            auth: None,
            _msg: PhantomData,
        }
    }

    /// From now on every line must carry a valid MAC under `key` (see [`Channel::authenticate`]).
    pub fn authenticate(&mut self, key: [u8; 32], role: Role) {
        self.auth = Some(LineAuth {
            key,
            role,
            sent: 0,
            received: 0,
        });
    }

    /// Encode `msg` as a line for the peer, with its MAC when the channel is authenticated.
    pub fn encode(&mut self, msg: &M) -> Result<Vec<u8>, ChannelError> {
        // The tag counts against the peer's line limit.
        let room = if self.auth.is_some() {
            self.max_line.saturating_sub(TAG_SUFFIX_LEN)
        } else {
            self.max_line
        };
        let mut line = encode_line(msg, room)?;
        if let Some(a) = &mut self.auth {
            line.pop();
            a.seal(&mut line)?;
            line.push(b'\n');
        }
        Ok(line)
    }

    /// Append bytes read from the connection.
    pub fn push(&mut self, data: &[u8]) -> Result<(), ChannelError> {
        if self.poisoned {
            return Err(ChannelError::Poisoned);
        }
        self.buf.extend_from_slice(data);
        // Only the unterminated tail can grow without bound; complete lines are checked in poll.
        let tail_start = self.buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if self.buf.len() - tail_start > self.max_line {
            return Err(self.poison(ChannelError::LineTooLong { limit: self.max_line }));
        }
        Ok(())
    }

    /// Next complete message, `Ok(None)` when no full line is buffered yet.
    pub fn poll(&mut self) -> Result<Option<M>, ChannelError> {
        if self.poisoned {
            return Err(ChannelError::Poisoned);
        }
        let Some(nl) = self.buf.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        if nl > self.max_line {
            return Err(self.poison(ChannelError::LineTooLong { limit: self.max_line }));
        }
        let line: Vec<u8> = self.buf.drain(..=nl).collect();
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        // Tolerate CRLF from hand-typed sessions (telnet/nc) without accepting anything else.
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let body = match &mut self.auth {
            Some(a) => match a.open(body) {
                Ok(b) => b,
                Err(e) => return Err(self.poison(e)),
            },
            None => body,
        };
        decode_line(body).map(Some).map_err(|e| self.poison(e))
    }

    /// The peer closed the connection: an unterminated tail is an error.
    pub fn finish(&self) -> Result<(), ChannelError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(ChannelError::Truncated(n)),
        }
    }

    fn poison(&mut self, e: ChannelError) -> ChannelError {
        self.poisoned = true;
        self.buf.clear();
        e
    }
}

/// A blocking control connection carrying `M` both ways.
#[derive(Debug)]
pub struct Channel<M> {
    stream: TcpStream,
    decoder: LineDecoder<M>,
}

impl<M: Message> Channel<M> {
    /// Wrap a connected stream; lines over `max_line` bytes are refused both ways.
    pub fn new(stream: TcpStream, max_line: usize) -> Self {
        // Control messages are small and latency matters more than segment count.
        let _ = stream.set_nodelay(true);
        Channel {
            stream,
            decoder: LineDecoder::new(max_line),
        }
    }

    /// The underlying stream (for addresses and shutdown).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// From now on every line both ways carries an HMAC-SHA256 under `key` (a session key the
    /// handshake derived, see [`mac::derive`]) over its direction and sequence number; a line
    /// without a valid one fails the channel with [`ChannelError::BadMac`]. Call it on both
    /// sides at the same point of the protocol (after the last unauthenticated message).
    pub fn authenticate(&mut self, key: [u8; 32], role: Role) {
        self.decoder.authenticate(key, role);
    }

    /// Send one message.
    pub fn send(&mut self, msg: &M) -> Result<(), ChannelError> {
        let line = self.decoder.encode(msg)?;
        self.stream.write_all(&line)?;
        Ok(())
    }

    /// The next message, waiting at most `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> Result<M, ChannelError> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 16 * 1024];
        loop {
            if let Some(m) = self.decoder.poll()? {
                return Ok(m);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ChannelError::Timeout(timeout));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.decoder.finish()?;
                    return Err(ChannelError::Closed);
                }
                Ok(n) => self.decoder.push(&buf[..n])?,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// A message if one is already buffered or readable right now, without waiting.
    pub fn try_recv(&mut self) -> Result<Option<M>, ChannelError> {
        if let Some(m) = self.decoder.poll()? {
            return Ok(Some(m));
        }
        self.stream.set_nonblocking(true)?;
        let mut buf = [0u8; 16 * 1024];
        let r = self.stream.read(&mut buf);
        self.stream.set_nonblocking(false)?;
        match r {
            Ok(0) => {
                self.decoder.finish()?;
                Err(ChannelError::Closed)
            }
            Ok(n) => {
                self.decoder.push(&buf[..n])?;
                self.decoder.poll()
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl<M: Message> Channel<M> {
    /// Split into a receiving and a sending half, for a thread each (one waits for reports while
    /// the other writes). An authenticated channel stays authenticated: each half carries on the
    /// sequence numbers of its direction.
    pub fn split(self) -> std::io::Result<(ChannelReader<M>, ChannelWriter<M>)> {
        let stream = self.stream.try_clone()?;
        let encoder = LineDecoder {
            buf: Vec::new(),
            max_line: self.decoder.max_line,
            poisoned: false,
            auth: self.decoder.auth.clone(),
            _msg: PhantomData,
        };
        Ok((ChannelReader(self), ChannelWriter { stream, encoder }))
    }
}

/// The receiving half of a [`Channel::split`] channel.
#[derive(Debug)]
pub struct ChannelReader<M>(Channel<M>);

impl<M: Message> ChannelReader<M> {
    /// The next message, waiting at most `timeout` (see [`Channel::recv`]).
    pub fn recv(&mut self, timeout: Duration) -> Result<M, ChannelError> {
        self.0.recv(timeout)
    }

    /// The underlying stream (shared with the writer: a shutdown ends both).
    pub fn stream(&self) -> &TcpStream {
        &self.0.stream
    }
}

/// The sending half of a [`Channel::split`] channel.
#[derive(Debug)]
pub struct ChannelWriter<M> {
    stream: TcpStream,
    encoder: LineDecoder<M>,
}

impl<M: Message> ChannelWriter<M> {
    /// Send one message (with its MAC when the channel is authenticated).
    pub fn send(&mut self, msg: &M) -> Result<(), ChannelError> {
        let line = self.encoder.encode(msg)?;
        self.stream.write_all(&line)?;
        Ok(())
    }

    /// The underlying stream (for a write timeout or a shutdown that also wakes the reader).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Ping {
        n: u32,
    }

    impl Message for Ping {
        fn validate(&self) -> Result<(), String> {
            if self.n > 100 {
                return Err(format!("n = {} above 100", self.n));
            }
            Ok(())
        }
    }

    #[test]
    fn lines_in_pieces_and_crlf() {
        let mut d = LineDecoder::<Ping>::new(64);
        d.push(b"{\"n\":").unwrap();
        assert!(d.poll().unwrap().is_none());
        d.push(b"1}\r\n{\"n\":2}\n").unwrap();
        assert_eq!(d.poll().unwrap(), Some(Ping { n: 1 }));
        assert_eq!(d.poll().unwrap(), Some(Ping { n: 2 }));
        assert!(d.poll().unwrap().is_none());
        d.finish().unwrap();
    }

    #[test]
    fn long_line_refused_before_it_is_buffered_and_poisons() {
        let mut d = LineDecoder::<Ping>::new(16);
        assert!(matches!(
            d.push(&[b' '; 17]),
            Err(ChannelError::LineTooLong { limit: 16 })
        ));
        assert!(matches!(d.push(b"{\"n\":1}\n"), Err(ChannelError::Poisoned)));
    }

    #[test]
    fn invalid_and_unknown_fields_refused() {
        let mut d = LineDecoder::<Ping>::new(64);
        d.push(b"{\"n\":101}\n").unwrap();
        assert!(matches!(d.poll(), Err(ChannelError::Invalid(m)) if m.contains("101")));
        let mut d = LineDecoder::<Ping>::new(64);
        d.push(b"{\"n\":1,\"x\":2}\n").unwrap();
        assert!(matches!(d.poll(), Err(ChannelError::Json(_))));
        assert!(matches!(
            encode_line(&Ping { n: 200 }, 64),
            Err(ChannelError::Invalid(_))
        ));
    }

    #[test]
    fn truncated_tail_reported() {
        let mut d = LineDecoder::<Ping>::new(64);
        d.push(b"{\"n\"").unwrap();
        assert!(matches!(d.finish(), Err(ChannelError::Truncated(4))));
    }

    #[test]
    fn channel_over_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut c = Channel::<Ping>::new(s, 64);
            let m = c.recv(Duration::from_secs(5)).unwrap();
            c.send(&Ping { n: m.n + 1 }).unwrap();
        });
        let mut c = Channel::<Ping>::new(TcpStream::connect(addr).unwrap(), 64);
        c.send(&Ping { n: 41 }).unwrap();
        assert_eq!(c.recv(Duration::from_secs(5)).unwrap(), Ping { n: 42 });
        t.join().unwrap();
        assert!(matches!(c.recv(Duration::from_secs(5)), Err(ChannelError::Closed)));
    }

    fn keyed(role: Role) -> LineDecoder<Ping> {
        let mut d = LineDecoder::<Ping>::new(256);
        d.authenticate([7; 32], role);
        d
    }

    #[test]
    fn authenticated_lines_pass_in_order_and_nothing_else_does() {
        let mut client = keyed(Role::Client);
        let mut server = keyed(Role::Server);
        let l1 = client.encode(&Ping { n: 1 }).unwrap();
        let l2 = client.encode(&Ping { n: 2 }).unwrap();
        assert!(l1.len() > 65 && l1.ends_with(b"\n"));
        server.push(&l1).unwrap();
        server.push(&l2).unwrap();
        assert_eq!(server.poll().unwrap(), Some(Ping { n: 1 }));
        assert_eq!(server.poll().unwrap(), Some(Ping { n: 2 }));
        // The other way has its own sequence.
        let back = server.encode(&Ping { n: 3 }).unwrap();
        client.push(&back).unwrap();
        assert_eq!(client.poll().unwrap(), Some(Ping { n: 3 }));

        let fresh = || (keyed(Role::Client), keyed(Role::Server));
        // Changed on the way (same length, one digit).
        let (mut c, mut s) = fresh();
        let mut l = c.encode(&Ping { n: 1 }).unwrap();
        l[5] = b'9';
        s.push(&l).unwrap();
        assert!(matches!(s.poll(), Err(ChannelError::BadMac)));
        assert!(matches!(s.poll(), Err(ChannelError::Poisoned)));
        // Replayed.
        let (mut c, mut s) = fresh();
        let l = c.encode(&Ping { n: 1 }).unwrap();
        s.push(&l).unwrap();
        s.push(&l).unwrap();
        assert!(s.poll().unwrap().is_some());
        assert!(matches!(s.poll(), Err(ChannelError::BadMac)));
        // Reordered (second line first).
        let (mut c, mut s) = fresh();
        let _first = c.encode(&Ping { n: 1 }).unwrap();
        s.push(&c.encode(&Ping { n: 2 }).unwrap()).unwrap();
        assert!(matches!(s.poll(), Err(ChannelError::BadMac)));
        // Reflected: the server's own line sent back to it.
        let (_, mut s) = fresh();
        let own = s.encode(&Ping { n: 1 }).unwrap();
        s.push(&own).unwrap();
        assert!(matches!(s.poll(), Err(ChannelError::BadMac)));
        // Without a tag, and under another key.
        let (_, mut s) = fresh();
        s.push(b"{\"n\":1}\n").unwrap();
        assert!(matches!(s.poll(), Err(ChannelError::BadMac)));
        let mut other = LineDecoder::<Ping>::new(256);
        other.authenticate([8; 32], Role::Client);
        let (_, mut s) = fresh();
        s.push(&other.encode(&Ping { n: 1 }).unwrap()).unwrap();
        assert!(matches!(s.poll(), Err(ChannelError::BadMac)));
    }

    #[test]
    fn split_halves_keep_the_authenticated_sequence() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut c = Channel::<Ping>::new(s, 256);
            c.authenticate([5; 32], Role::Server);
            c.send(&Ping { n: 1 }).unwrap();
            let m = c.recv(Duration::from_secs(5)).unwrap();
            c.send(&Ping { n: m.n + 1 }).unwrap();
        });
        let mut c = Channel::<Ping>::new(TcpStream::connect(addr).unwrap(), 256);
        c.authenticate([5; 32], Role::Client);
        assert_eq!(c.recv(Duration::from_secs(5)).unwrap(), Ping { n: 1 });
        let (mut r, mut w) = c.split().unwrap();
        let reader = std::thread::spawn(move || r.recv(Duration::from_secs(5)).unwrap());
        w.send(&Ping { n: 10 }).unwrap();
        assert_eq!(reader.join().unwrap(), Ping { n: 11 });
        t.join().unwrap();
    }

    proptest::proptest! {
        #[test]
        fn decoder_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 0..8)) {
            let mut d = LineDecoder::<Ping>::new(32);
            for c in &chunks {
                if d.push(c).is_err() { break; }
                while let Ok(Some(_)) = d.poll() {}
            }
        }
    }
}
