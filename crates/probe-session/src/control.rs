//! Control messages of a probe session (TCP, one JSON object per line over [`ctlchan`]).
//!
//! ```text
//! client                                   server
//!   hello{params, client_nonce}    ──▶
//!                                  ◀──   challenge{server_nonce}            (only with a key)
//!   auth{mac}                      ──▶                                      (only with a key)
//!                                  ◀──   ready{port, server_proof}
//!   ── with a key, from here on every line carries an HMAC under the session key
//!      (ctlchan::Channel::authenticate, see crate::auth) ──
//!   UDP test:                      ◀──   interim{…} every interval_ms (when asked for)
//!   done{sent, sender}             ──▶
//!                                  ◀──   results{receiver, host, notes, socket}
//!   TCP test (hello.tcp set; the port in ready is a TCP port; the client opens `streams`
//!   connections, each starting with a probe::tcp::Preamble, writes for duration_ms):
//!   tcp_done{bytes_written}        ──▶
//!                                  ◀──   tcp_results{receiver, host, notes}
//!   either side may send error{message} and close.
//! ```
//!
//! Every line is untrusted: [`ctlchan::LineDecoder`] refuses lines longer than its bound before
//! buffering them, serde refuses unknown fields, and [`ControlMsg::check`] (what
//! [`ctlchan::Message::validate`] runs) refuses out-of-range values, so a hostile peer can
//! neither exhaust memory nor smuggle parameters. The result types the messages carry
//! ([`ReceiverReport`], [`SenderReport`], [`TcpReceiverReport`], [`HostDelta`],
//! [`ReceiverSocket`]) live in the sans-IO [`probe`] core.
//!
//! ```text
//! {"type":"hello","version":2,"test_id":7,"size":8192,"count":1000000,"spacing_ns":16000,"client_nonce":null}
//! ```

use ctlchan::mac::NONCE_LEN;
use hostcounters::HostDelta;
use probe::recv_stats::{ReceiverReport, RecvConfig};
use probe::results::{ReceiverSocket, TestParams};
use probe::send_stats::SenderReport;
use probe::tcp_results::TcpReceiverReport;
use probe::wire::{HEADER_LEN, MAX_DATAGRAM};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use probe::tcp::MAX_STREAMS;

/// Control protocol version carried in [`Hello::version`]. 2: with a key, every line after
/// `ready` carries a MAC, and the handshake MACs are [`ctlchan::mac`]'s.
pub const PROTOCOL_VERSION: u8 = 2;
/// HMAC-SHA256 output length, bytes (the `auth` MAC and the server proof).
pub const MAC_LEN: usize = 32;
/// Default line bound: large enough for a `results` line with bucket lists, small enough that a
/// peer cannot make us buffer much.
pub const MAX_LINE: usize = 1 << 20;
/// Most packets a trial may announce (1e12 ≈ 4.5 hours at 8192 B and 16 µs spacing × 1000).
pub const MAX_COUNT: u64 = 1_000_000_000_000;
/// Largest inter-packet spacing accepted: 10 s.
pub const MAX_SPACING_NS: u64 = 10_000_000_000;
/// Longest `error` message (and `results` note) accepted, bytes.
pub const MAX_ERROR_LEN: usize = 1024;
/// Most notes a `results` message may carry.
pub const MAX_NOTES: usize = 16;

/// Client's opening message: the trial parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// Control protocol version, must equal [`PROTOCOL_VERSION`].
    pub version: u8,
    /// Session id; the receiver accepts only datagrams carrying it.
    pub test_id: u64,
    /// UDP payload size of every datagram, bytes (`32..=65507`).
    pub size: u32,
    /// Number of datagrams the client intends to send (`1..=MAX_COUNT`).
    pub count: u64,
    /// Intended spacing between departures, ns (0 = as fast as possible).
    pub spacing_ns: u64,
    /// Client nonce for mutual authentication, 32 hex digits; required when a key is configured.
    #[serde(default)]
    pub client_nonce: Option<String>,
    /// Ask the server for an [`Interim`] report every this many ms while data flows
    /// (`MIN_INTERVAL_MS..=MAX_INTERVAL_MS`); `None`: no interim reports. Bound by the
    /// handshake MAC (a man in the middle cannot make the server chatter), and with a key every
    /// `interim` line carries its own MAC like any line after `ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// UDP test only: the receive buffer (SO_RCVBUF, bytes) the server should ask the kernel for
    /// (`MIN_RCVBUF..=MAX_RCVBUF`); `None`: the server's own default. For `--rcvbuf-sweep`
    /// (seed 003 Fig 2c: loss against the receiving application's buffer size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<u64>,
    /// A TCP test instead of a UDP one; `size`, `count` and `spacing_ns` are then not used (the
    /// client sends 32, 1 and 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpHello>,
}

/// Smallest receive buffer a client may ask for, bytes.
pub const MIN_RCVBUF: u64 = 1024;
/// Largest receive buffer a client may ask for, bytes (1 GiB).
pub const MAX_RCVBUF: u64 = 1 << 30;
/// Shortest TCP test, ms.
pub const MIN_DURATION_MS: u64 = 100;
/// Longest TCP test, ms (7 days).
pub const MAX_DURATION_MS: u64 = 7 * 24 * 3600 * 1000;
/// Longest congestion-control name (the kernel's TCP_CA_NAME_MAX is 16 with the NUL).
pub const MAX_CC_NAME: usize = 15;
/// Smallest application write in a TCP test, bytes.
pub const MIN_WRITE_SIZE: u32 = 1024;
/// Largest application write in a TCP test, bytes (16 MiB).
pub const MAX_WRITE_SIZE: u32 = 16 << 20;

/// The parameters of a TCP test (memory to memory, client → server).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpHello {
    /// Parallel connections (`1..=MAX_STREAMS`).
    pub streams: u16,
    /// How long the client writes, ms (`MIN_DURATION_MS..=MAX_DURATION_MS`).
    pub duration_ms: u64,
    /// Bytes per application write (`MIN_WRITE_SIZE..=MAX_WRITE_SIZE`).
    pub write_size: u32,
    /// Congestion control the sender uses (informational: the sender sets it on its own
    /// sockets); lower-case letters, digits, `_` and `-`, at most [`MAX_CC_NAME`] bytes.
    #[serde(default)]
    pub cc: Option<String>,
}

impl TcpHello {
    /// Range checks.
    pub fn check(&self) -> Result<(), Invalid> {
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return Err(invalid(
                "tcp.streams",
                format!("{} outside 1..={MAX_STREAMS}", self.streams),
            ));
        }
        if !(MIN_DURATION_MS..=MAX_DURATION_MS).contains(&self.duration_ms) {
            return Err(invalid(
                "tcp.duration_ms",
                format!("{} outside {MIN_DURATION_MS}..={MAX_DURATION_MS}", self.duration_ms),
            ));
        }
        if !(MIN_WRITE_SIZE..=MAX_WRITE_SIZE).contains(&self.write_size) {
            return Err(invalid(
                "tcp.write_size",
                format!("{} outside {MIN_WRITE_SIZE}..={MAX_WRITE_SIZE}", self.write_size),
            ));
        }
        if let Some(cc) = &self.cc {
            check_cc_name(cc).map_err(|reason| invalid("tcp.cc", reason))?;
        }
        Ok(())
    }
}

/// A congestion-control name as the kernel spells them: 1 to [`MAX_CC_NAME`] bytes of lower-case
/// letters, digits, `_` or `-`.
pub fn check_cc_name(cc: &str) -> Result<(), String> {
    let ok = (1..=MAX_CC_NAME).contains(&cc.len())
        && cc
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{:?}: a congestion-control name is 1 to {MAX_CC_NAME} lower-case letters, digits, '_' or '-'",
            cc.chars().take(40).collect::<String>()
        ))
    }
}

/// Shortest interim-report interval a client may ask for, ms.
pub const MIN_INTERVAL_MS: u64 = 100;
/// Longest interim-report interval, ms.
pub const MAX_INTERVAL_MS: u64 = 3_600_000;

/// Server → client while data flows: cumulative receiver counters so far (the client takes
/// differences between reports for per-interval figures).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interim {
    /// Time since the server sent `ready`, ms (server clock).
    pub elapsed_ms: u64,
    /// Distinct sequence numbers received so far.
    pub unique: u64,
    /// User bytes of those.
    pub unique_bytes: u64,
    /// Highest sequence number received so far.
    pub highest_seq: Option<u64>,
    /// Packets below the highest sequence number not received yet (`highest + 1 − unique`): lost,
    /// or still to come out of order.
    pub missing: u64,
    /// Packets that arrived after a higher sequence number (RFC 4737 reordered) so far.
    pub reordered: u64,
    /// Duplicate copies so far.
    pub duplicates: u64,
    /// Stray datagrams so far.
    pub strays: u64,
}

/// Server's authentication challenge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Challenge {
    /// Server nonce, 32 hex digits.
    pub server_nonce: String,
}

/// Client's answer to a [`Challenge`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    /// HMAC-SHA256 over the nonces and the hello parameters, 64 hex digits.
    pub mac: String,
}

/// Server accepted the trial.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    /// The data port (non-zero): UDP for a UDP test, TCP for a TCP test ([`Hello::tcp`]).
    pub udp_port: u16,
    /// Server's proof of key possession (64 hex digits) when a key is configured.
    #[serde(default)]
    pub server_proof: Option<String>,
}

/// Client finished sending.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Done {
    /// Datagrams actually sent; lets the receiver count losses at the tail of the trial.
    pub sent: u64,
    /// Sender-side statistics, when the client measured them.
    #[serde(default)]
    pub sender: Option<SenderReport>,
}

/// Server's measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Results {
    /// Receiver statistics of the trial.
    pub receiver: ReceiverReport,
    /// The receiving host's counters over the trial, when it could read them.
    #[serde(default)]
    pub host: Option<HostDelta>,
    /// Notes from the receiver (e.g. its socket buffer was capped by the kernel).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The receiving socket: buffer asked for and granted, datagrams the kernel dropped at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<ReceiverSocket>,
}

/// Client → server: a TCP test's writes are over and every data connection is closed for
/// writing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpDone {
    /// Bytes each stream wrote, by stream number (at most [`MAX_STREAMS`]).
    pub bytes_written: Vec<u64>,
}

/// Server → client: what the receiving end of a TCP test saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpResults {
    /// Bytes received per stream, and when.
    pub receiver: TcpReceiverReport,
    /// The receiving host's counters over the test.
    #[serde(default)]
    pub host: Option<HostDelta>,
    /// Notes from the receiver.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Either side refuses to go on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorMsg {
    /// Human-readable reason (at most [`MAX_ERROR_LEN`] bytes).
    pub message: String,
}

/// One control line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlMsg {
    /// Client → server: trial parameters.
    Hello(Hello),
    /// Server → client: authentication challenge.
    Challenge(Challenge),
    /// Client → server: challenge answer.
    Auth(Auth),
    /// Server → client: accepted, send UDP here.
    Ready(Ready),
    /// Client → server: sending finished.
    Done(Box<Done>),
    /// Server → client: receiver counters so far, every `interval_ms` when asked for.
    Interim(Interim),
    /// Server → client: receiver statistics.
    Results(Box<Results>),
    /// Client → server: a TCP test's writes are over.
    TcpDone(TcpDone),
    /// Server → client: what the receiver of a TCP test saw.
    TcpResults(Box<TcpResults>),
    /// Either way: refusal.
    Error(ErrorMsg),
}

/// A message field out of range: which one and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid control message field `{field}`: {reason}")]
pub struct Invalid {
    /// Field name.
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Invalid {
    Invalid {
        field,
        reason: reason.into(),
    }
}

fn check_hex(field: &'static str, s: &str, bytes: usize) -> Result<(), Invalid> {
    if s.len() != 2 * bytes || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(invalid(field, format!("expected {} hex digits", 2 * bytes)));
    }
    Ok(())
}

impl Hello {
    /// Range checks on the trial parameters.
    pub fn check(&self) -> Result<(), Invalid> {
        if self.version != PROTOCOL_VERSION {
            return Err(invalid("version", format!("unsupported version {}", self.version)));
        }
        let size = self.size as usize;
        if !(HEADER_LEN..=MAX_DATAGRAM).contains(&size) {
            return Err(invalid("size", format!("{size} outside {HEADER_LEN}..={MAX_DATAGRAM}")));
        }
        if !(1..=MAX_COUNT).contains(&self.count) {
            return Err(invalid("count", format!("{} outside 1..={MAX_COUNT}", self.count)));
        }
        if self.spacing_ns > MAX_SPACING_NS {
            return Err(invalid(
                "spacing_ns",
                format!("{} above {MAX_SPACING_NS}", self.spacing_ns),
            ));
        }
        if let Some(ms) = self.interval_ms {
            if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&ms) {
                return Err(invalid(
                    "interval_ms",
                    format!("{ms} outside {MIN_INTERVAL_MS}..={MAX_INTERVAL_MS}"),
                ));
            }
        }
        if let Some(n) = &self.client_nonce {
            check_hex("client_nonce", n, NONCE_LEN)?;
        }
        if let Some(b) = self.rcvbuf {
            if !(MIN_RCVBUF..=MAX_RCVBUF).contains(&b) {
                return Err(invalid("rcvbuf", format!("{b} outside {MIN_RCVBUF}..={MAX_RCVBUF}")));
            }
        }
        if let Some(t) = &self.tcp {
            t.check()?;
            if self.rcvbuf.is_some() {
                return Err(invalid("rcvbuf", "a TCP test takes no UDP receive buffer"));
            }
        }
        Ok(())
    }
}

impl ControlMsg {
    /// Range checks beyond what the JSON schema enforces.
    pub fn check(&self) -> Result<(), Invalid> {
        match self {
            ControlMsg::Hello(h) => h.check(),
            ControlMsg::Challenge(c) => check_hex("server_nonce", &c.server_nonce, NONCE_LEN),
            ControlMsg::Auth(a) => check_hex("mac", &a.mac, MAC_LEN),
            ControlMsg::Ready(r) => {
                if r.udp_port == 0 {
                    return Err(invalid("udp_port", "port 0"));
                }
                match &r.server_proof {
                    Some(p) => check_hex("server_proof", p, MAC_LEN),
                    None => Ok(()),
                }
            }
            ControlMsg::Done(d) if d.sent > MAX_COUNT => Err(invalid("sent", format!("{} above {MAX_COUNT}", d.sent))),
            ControlMsg::Results(r) if r.notes.len() > MAX_NOTES || r.notes.iter().any(|n| n.len() > MAX_ERROR_LEN) => {
                Err(invalid(
                    "notes",
                    format!("more than {MAX_NOTES} notes or one longer than {MAX_ERROR_LEN} bytes"),
                ))
            }
            ControlMsg::Interim(i) if i.highest_seq.is_some_and(|h| h >= MAX_COUNT) || i.unique > MAX_COUNT => {
                Err(invalid("highest_seq", format!("at or above {MAX_COUNT}")))
            }
            ControlMsg::Done(_) | ControlMsg::Results(_) | ControlMsg::Interim(_) => Ok(()),
            ControlMsg::TcpDone(d) if d.bytes_written.len() > usize::from(MAX_STREAMS) => Err(invalid(
                "bytes_written",
                format!("{} streams, more than {MAX_STREAMS}", d.bytes_written.len()),
            )),
            ControlMsg::TcpDone(_) => Ok(()),
            ControlMsg::TcpResults(r) => {
                if r.notes.len() > MAX_NOTES || r.notes.iter().any(|n| n.len() > MAX_ERROR_LEN) {
                    return Err(invalid(
                        "notes",
                        format!("more than {MAX_NOTES} notes or one longer than {MAX_ERROR_LEN} bytes"),
                    ));
                }
                r.receiver.validate().map_err(|(field, reason)| invalid(field, reason))
            }
            ControlMsg::Error(e) if e.message.len() > MAX_ERROR_LEN => {
                Err(invalid("message", format!("longer than {MAX_ERROR_LEN} bytes")))
            }
            ControlMsg::Error(_) => Ok(()),
        }
    }

    /// The message's `type` tag, for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            ControlMsg::Hello(_) => "hello",
            ControlMsg::Challenge(_) => "challenge",
            ControlMsg::Auth(_) => "auth",
            ControlMsg::Ready(_) => "ready",
            ControlMsg::Done(_) => "done",
            ControlMsg::Interim(_) => "interim",
            ControlMsg::Results(_) => "results",
            ControlMsg::TcpDone(_) => "tcp_done",
            ControlMsg::TcpResults(_) => "tcp_results",
            ControlMsg::Error(_) => "error",
        }
    }
}

/// Cut `text` to at most [`MAX_ERROR_LEN`] bytes on a character boundary (error texts can be
/// long).
pub fn clip(text: &str) -> String {
    let mut end = text.len().min(MAX_ERROR_LEN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

impl ctlchan::Message for ControlMsg {
    fn validate(&self) -> Result<(), String> {
        self.check().map_err(|e| e.to_string())
    }
}

impl Hello {
    /// The trial parameters the result records.
    pub fn params(&self) -> TestParams {
        TestParams {
            test_id: self.test_id,
            size: self.size,
            count: self.count,
            spacing_ns: self.spacing_ns,
        }
    }

    /// The receiver's configuration for this trial (its test id, size, count and spacing).
    pub fn recv_config(&self) -> RecvConfig {
        RecvConfig::from_params(&self.params())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctlchan::{ChannelError, LineDecoder};

    fn from_line(line: &[u8]) -> Result<ControlMsg, ChannelError> {
        ctlchan::decode_line(line)
    }

    fn to_line(m: &ControlMsg) -> Result<Vec<u8>, ChannelError> {
        ctlchan::encode_line(m, MAX_LINE)
    }

    /// The field a validation error names.
    fn field(e: &ChannelError) -> Option<&str> {
        let ChannelError::Invalid(m) = e else { return None };
        m.split('`').nth(1)
    }

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            test_id: 7,
            size: 8192,
            count: 1_000_000,
            spacing_ns: 16_000,
            client_nonce: None,
            interval_ms: None,
            rcvbuf: None,
            tcp: None,
        }
    }

    #[test]
    fn hello_json_is_pinned() {
        let line = to_line(&ControlMsg::Hello(hello())).expect("encode");
        assert_eq!(
            std::str::from_utf8(&line).expect("utf8"),
            "{\"type\":\"hello\",\"version\":2,\"test_id\":7,\"size\":8192,\"count\":1000000,\
             \"spacing_ns\":16000,\"client_nonce\":null}\n"
        );
    }

    #[test]
    fn roundtrip_through_decoder_in_pieces() {
        let msgs = vec![
            ControlMsg::Hello(hello()),
            ControlMsg::Ready(Ready {
                udp_port: 5001,
                server_proof: None,
            }),
            ControlMsg::Done(Box::new(Done { sent: 10, sender: None })),
            ControlMsg::Error(ErrorMsg { message: "busy".into() }),
        ];
        let mut bytes = Vec::new();
        for m in &msgs {
            bytes.extend(to_line(m).expect("encode"));
        }
        let mut d = LineDecoder::<ControlMsg>::new(MAX_LINE);
        let mut out = Vec::new();
        for chunk in bytes.chunks(7) {
            d.push(chunk).expect("push");
            while let Some(m) = d.poll().expect("poll") {
                out.push(m);
            }
        }
        assert_eq!(out, msgs);
        assert!(d.finish().is_ok());
    }

    #[test]
    fn unknown_fields_and_types_rejected() {
        let extra = br#"{"type":"ready","udp_port":5001,"evil":1}"#;
        assert!(matches!(from_line(extra), Err(ChannelError::Json(_))));
        let unknown = br#"{"type":"shutdown"}"#;
        assert!(matches!(from_line(unknown), Err(ChannelError::Json(_))));
        let missing = br#"{"type":"hello","version":1}"#;
        assert!(matches!(from_line(missing), Err(ChannelError::Json(_))));
    }

    #[test]
    fn out_of_range_fields_rejected() {
        let cases: [(&[u8], &str); 6] = [
            (
                br#"{"type":"hello","version":1,"test_id":1,"size":100,"count":1,"spacing_ns":0}"#,
                "version",
            ),
            (
                br#"{"type":"hello","version":2,"test_id":1,"size":31,"count":1,"spacing_ns":0}"#,
                "size",
            ),
            (
                br#"{"type":"hello","version":2,"test_id":1,"size":65508,"count":1,"spacing_ns":0}"#,
                "size",
            ),
            (
                br#"{"type":"hello","version":2,"test_id":1,"size":100,"count":0,"spacing_ns":0}"#,
                "count",
            ),
            (br#"{"type":"ready","udp_port":0}"#, "udp_port"),
            (br#"{"type":"auth","mac":"zz"}"#, "mac"),
        ];
        for (line, field) in cases {
            match from_line(line) {
                Err(e) => assert_eq!(self::field(&e), Some(field), "{e}"),
                other => panic!("{}: {other:?}", String::from_utf8_lossy(line)),
            }
        }
    }

    #[test]
    fn long_lines_rejected_before_buffering_and_poison() {
        let mut d = LineDecoder::<ControlMsg>::new(16);
        assert!(matches!(
            d.push(&[b'x'; 17]),
            Err(ChannelError::LineTooLong { limit: 16 })
        ));
        assert!(matches!(d.poll(), Err(ChannelError::Poisoned)));

        // A complete but long line inside one chunk is caught by poll.
        let mut d = LineDecoder::<ControlMsg>::new(16);
        let mut chunk = vec![b'x'; 20];
        chunk.extend_from_slice(b"\n{");
        d.push(&chunk).expect("tail is short");
        assert!(matches!(d.poll(), Err(ChannelError::LineTooLong { .. })));
    }

    #[test]
    fn interval_and_interim_are_checked() {
        let mut h = hello();
        h.interval_ms = Some(50);
        assert_eq!(
            to_line(&ControlMsg::Hello(h.clone())).err().as_ref().and_then(field),
            Some("interval_ms")
        );
        h.interval_ms = Some(1000);
        let line = to_line(&ControlMsg::Hello(h.clone())).expect("encode");
        assert!(std::str::from_utf8(&line)
            .expect("utf8")
            .contains("\"interval_ms\":1000"));
        let forged = br#"{"type":"interim","elapsed_ms":1,"unique":1,"unique_bytes":1,"highest_seq":1000000000000,"missing":0,"reordered":0,"duplicates":0,"strays":0}"#;
        assert_eq!(from_line(forged).err().as_ref().and_then(field), Some("highest_seq"));
        let ok = br#"{"type":"interim","elapsed_ms":1000,"unique":10,"unique_bytes":14720,"highest_seq":9,"missing":0,"reordered":0,"duplicates":0,"strays":0}"#;
        assert!(matches!(from_line(ok), Ok(ControlMsg::Interim(_))));
    }

    fn tcp_hello() -> Hello {
        Hello {
            size: 32,
            count: 1,
            spacing_ns: 0,
            tcp: Some(TcpHello {
                streams: 4,
                duration_ms: 60_000,
                write_size: 131_072,
                cc: Some("cubic".into()),
            }),
            ..hello()
        }
    }

    #[test]
    fn tcp_hello_roundtrips_and_is_range_checked() {
        let line = to_line(&ControlMsg::Hello(tcp_hello())).expect("encode");
        let text = std::str::from_utf8(&line).expect("utf8");
        assert!(
            text.ends_with("\"tcp\":{\"streams\":4,\"duration_ms\":60000,\"write_size\":131072,\"cc\":\"cubic\"}}\n"),
            "{text}"
        );
        let mut d = LineDecoder::<ControlMsg>::new(MAX_LINE);
        d.push(&line).expect("push");
        assert_eq!(d.poll().expect("poll"), Some(ControlMsg::Hello(tcp_hello())));
        type Tamper = fn(&mut Hello);
        let bad: [(Tamper, &str); 8] = [
            (|h| h.tcp.as_mut().expect("tcp").streams = 0, "tcp.streams"),
            (|h| h.tcp.as_mut().expect("tcp").streams = 65, "tcp.streams"),
            (|h| h.tcp.as_mut().expect("tcp").duration_ms = 99, "tcp.duration_ms"),
            (
                |h| h.tcp.as_mut().expect("tcp").duration_ms = MAX_DURATION_MS + 1,
                "tcp.duration_ms",
            ),
            (|h| h.tcp.as_mut().expect("tcp").write_size = 100, "tcp.write_size"),
            (
                |h| h.tcp.as_mut().expect("tcp").cc = Some("Cubic; rm -rf".into()),
                "tcp.cc",
            ),
            (|h| h.tcp.as_mut().expect("tcp").cc = Some("a".repeat(16)), "tcp.cc"),
            (|h| h.rcvbuf = Some(65_536), "rcvbuf"),
        ];
        for (f, field) in bad {
            let mut h = tcp_hello();
            f(&mut h);
            match ControlMsg::Hello(h).check() {
                Err(Invalid { field: got, .. }) => assert_eq!(got, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        let mut h = hello();
        h.rcvbuf = Some(MIN_RCVBUF - 1);
        assert!(h.check().is_err());
        h.rcvbuf = Some(MAX_RCVBUF + 1);
        assert!(h.check().is_err());
        h.rcvbuf = Some(230_000);
        assert!(h.check().is_ok());
        assert!(check_cc_name("bbr").is_ok() && check_cc_name("").is_err());
    }

    #[test]
    fn tcp_done_and_results_are_bounded() {
        let ok = br#"{"type":"tcp_done","bytes_written":[1,2,3]}"#;
        assert!(matches!(from_line(ok), Ok(ControlMsg::TcpDone(_))));
        let many = format!(
            "{{\"type\":\"tcp_done\",\"bytes_written\":[{}]}}",
            vec!["1"; 65].join(",")
        );
        assert_eq!(
            from_line(many.as_bytes()).err().as_ref().and_then(field),
            Some("bytes_written")
        );
        let results = br#"{"type":"tcp_results","receiver":{"streams":[{"stream":0,"bytes":10,"error":null}],"bytes":10,"duration_s":1.0,"rate_bps":80.0,"stray_connections":0,"partial":false,"error":null},"host":null,"notes":[]}"#;
        match from_line(results) {
            Ok(ControlMsg::TcpResults(r)) => assert_eq!(r.receiver.bytes, 10),
            other => panic!("{other:?}"),
        }
        let negative = br#"{"type":"tcp_results","receiver":{"streams":[],"bytes":10,"duration_s":-1.0,"rate_bps":null,"stray_connections":0,"partial":false,"error":null},"host":null,"notes":[]}"#;
        assert!(matches!(from_line(negative), Err(ChannelError::Invalid(_))));
    }

    #[test]
    fn truncated_tail_reported() {
        let mut d = LineDecoder::<ControlMsg>::new(100);
        d.push(b"{\"type\":").expect("push");
        assert_eq!(d.poll().expect("poll"), None);
        assert!(matches!(d.finish(), Err(ChannelError::Truncated(8))));
    }

    #[test]
    fn oversized_error_message_rejected() {
        let m = ControlMsg::Error(ErrorMsg {
            message: "x".repeat(MAX_ERROR_LEN + 1),
        });
        assert_eq!(to_line(&m).err().as_ref().and_then(field), Some("message"));
    }
}
