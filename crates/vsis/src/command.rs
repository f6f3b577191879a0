//! Typed commands and queries: a [`StatementRepr`] checked against what each keyword takes.
//!
//! The keywords are jive5ab's (`doc/source/jive5ab-commands-sets.rst`) with their field
//! order; evlbi adds `net_protocol = native` (its own framing, with ARQ), `threads` (VDIF
//! threads per station, which a jive5ab mode leaves open) and `record_format` (vdif, vbs, mk6).
//!
//! | keyword | command | query |
//! |---|---|---|
//! | `version` | — | software and version |
//! | `mode` | `VDIF_8000-2048-16-2` or `none` | the mode ([`crate::mode`]) |
//! | `threads` | VDIF threads per station (1 to 1024) | the number |
//! | `net_protocol` | `udps\|udp\|udpsnor\|vtp\|pudp\|native [: socbuf [: workbuf [: nblock]]]` (sizes `32M`, `4k`) | the settings |
//! | `net_port` | `[host@]port [: [host@]port …]`: 1 to 64 ports, each once; a lone 0 is 2630 | the ports |
//! | `mtu` | 64 to 9000 | the MTU |
//! | `ipd` | packet spacing, µs (or `…n` ns); 0 = at the data rate | the spacing |
//! | `record` | `on : SCAN`, `off`, `mk6 : 0\|1` (FlexBuff vbs or Mark6) | `on : #scan : SCAN : bytes` or `off`; `record? mk6` |
//! | `record_format` | `vdif\|vbs\|mk6` | the format |
//! | `set_disks` | directories the recordings go to (absolute paths or patterns; the recorder decides which it allows) | count and list |
//! | `net2file` | `open : PATH[,w\|a\|n]`, `close` | `active : bytes` or `inactive : 0` |
//! | `net2net` | `connect : HOST [: PORT [: input protocol]]`, `on`, `off` (`disconnect`, `close`) | state, destination, bytes |
//! | `fill2net` | `connect : HOST [: PORT [: STATION]]`, `on`, `off` (`disconnect`): send synthetic VDIF of the mode | state, destination, frames |
//! | `evlbi` | a format of its own ([`crate::evlbi`]) | the statistics in the default format |
//! | `tstat` | counters with a timestamp | rates since the last `tstat?` |
//! | `status` | — | the status word (and the oldest queued error while bit 0x2 is set); then each set disk's free space, `PATH=GB` |
//! | `dts_id` | — | system type, software date, media, serial (host name), ports, revisions |
//! | `os_rev` | — | the kernel's version line |
//! | `error` | — | the oldest queued error: number, message, time, last time, count |
//! | `rtime` | — | time left over the free space of the set disks at a running recording's measured rate (the mode's when idle or in its first second), …, that rate; then each disk's free space, `PATH=GB` |
//! | `datastream` | `add : NAME : criterion…`, `remove : NAME`, `clear`, `reset` ([`scanfmt::datastream`]) | the names, or one stream's criteria |
//! | `record` (more) | `nthread : [readers] : [writers]` | `record? nthread` |
//! | `scan_set`, `scan_check`, `data_check`, `disk2file` | see [`crate::playback`] | |
//! | `reset` | `abort`: stop a `disk2file` | — |
//! | `runtime` | `NAME [: new\|exists\|transient\|delete]`: the transfer context a connection works in ([`crate::runtime`]) | current, count, the others |

use scanfmt::name::ScanName;

/// The largest `mtu` taken (jive5ab's range ends here too).
pub const MAX_MTU: u32 = 9000;

pub use crate::error::CommandError;
use crate::mode::Mode;
use crate::playback::{Disk2File, OpenMode, ScanCheckArgs, ScanSet};
use crate::reply::ReturnCode;
use crate::statement::StatementRepr;
/// Most recording directories (`set_disks`).
pub const MAX_DISKS: usize = 64;

/// A value that a command sets and a query asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting<T> {
    /// `keyword? ;`
    Query,
    /// `keyword = value ;`
    Set(T),
}

/// The datagram framing of `net_protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// jive5ab's UDP with an 8-byte sequence number (`udps`; `udp` means it too).
    Udps,
    /// The same framing, jive5ab's variant that does not reorder.
    Udpsnor,
    /// The same framing under its VTP name.
    Vtp,
    /// Plain UDP: bare VDIF frames.
    Pudp,
    /// evlbi's native framing (stream, session, rate; NAKs for ARQ).
    Native,
}

impl Protocol {
    /// Its name in replies.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Udps => "udps",
            Protocol::Udpsnor => "udpsnor",
            Protocol::Vtp => "vtp",
            Protocol::Pudp => "pudp",
            Protocol::Native => "native",
        }
    }

    /// Parse a protocol name (`udp` is `udps`, as in jive5ab).
    pub fn parse(s: &str) -> Result<Protocol, CommandError> {
        Ok(match s {
            "udp" | "udps" => Protocol::Udps,
            "udpsnor" => Protocol::Udpsnor,
            "vtp" => Protocol::Vtp,
            "pudp" => Protocol::Pudp,
            "native" => Protocol::Native,
            "tcp" | "rtcp" | "itcp" | "udt" | "unix" => {
                return Err(CommandError::param(format!(
                    "the protocol {s} is not streamed by evlbi (udps, udp, udpsnor, vtp, pudp, native)"
                )))
            }
            _ => {
                return Err(CommandError::param(format!(
                    "the protocol {s} is not recognized as a valid protocol"
                )))
            }
        })
    }
}

/// `net_protocol = protocol : socbuf : workbuf : nblock`; each may be left empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetProtocolSet {
    /// The framing.
    pub protocol: Option<Protocol>,
    /// Socket buffer, bytes.
    pub socbuf: Option<u64>,
    /// jive5ab's work block size (kept and reported).
    pub workbuf: Option<u64>,
    /// jive5ab's number of blocks (kept and reported).
    pub nblock: Option<u32>,
}

/// One `net_port` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    /// Local address or multicast group (`host@port`).
    pub host: Option<String>,
    /// UDP port.
    pub port: u16,
}

/// Where `record = on` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFormat {
    /// Continuous VDIF files per station (or thread), lost frames filled.
    Vdif,
    /// FlexBuff vbs: header-less chunks round-robin over the disks.
    Vbs,
    /// Mark6 scatter-gather files.
    Mk6,
}

impl RecordFormat {
    /// Its name in replies.
    pub fn name(self) -> &'static str {
        match self {
            RecordFormat::Vdif => "vdif",
            RecordFormat::Vbs => "vbs",
            RecordFormat::Mk6 => "mk6",
        }
    }
}

/// `record`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// `record? ;`
    Query,
    /// `record? mk6 ;`
    QueryMk6,
    /// `record = on : SCAN ;` (an experiment and station after it are accepted and ignored, as
    /// jive5ab does on a FlexBuff).
    On {
        /// Scan label.
        scan: ScanName,
    },
    /// `record = off ;`
    Off,
    /// `record = mk6 : 1 ;` (Mark6) or `: 0` (FlexBuff vbs).
    Mk6(bool),
    /// `record = nthread : [readers] : [writers] ;` (jive5ab's parallel network readers and
    /// disk writers; the Field System sets 2 or more writers).
    Nthread {
        /// Readers, if given.
        readers: Option<u32>,
        /// Writers, if given.
        writers: Option<u32>,
    },
    /// `record? nthread ;`
    QueryNthread,
}

/// `datastream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataStreamCmd {
    /// `datastream? [NAME] ;`
    Query(Option<String>),
    /// `datastream = add : NAME : criterion [: criterion …] ;`
    Add {
        /// Name pattern.
        name: String,
        /// Match criteria as given.
        criteria: Vec<String>,
    },
    /// `datastream = remove : NAME ;`
    Remove(String),
    /// `datastream = clear ;`: no streams.
    Clear,
    /// `datastream = reset ;`: forget which frames went to which stream (the definitions stay).
    Reset,
}

/// `net2file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net2File {
    /// `net2file? ;`
    Query,
    /// `net2file = open : PATH[,mode] ;` (jive5ab's open modes: `,n` new — the default —,
    /// `,w` truncate, `,a` append).
    Open {
        /// Where to: an absolute path, or a name in the first disk.
        path: String,
        /// How to open it.
        mode: OpenMode,
    },
    /// `net2file = close ;`
    Close,
}

/// `net2sfxc`: what arrives on the data port, frame-aligned and in time order, to SFXC's
/// `mk5://` reader on a socket (jive5ab's `net2sfxc` on a correlator input host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net2Sfxc {
    /// `net2sfxc? ;`
    Query,
    /// `net2sfxc = open : SOCKET [: strict] ;`: a unix socket path, or a TCP port (jive5ab's
    /// reading of a number). jive5ab's `strict` (frames only) is what evlbi always does.
    Open {
        /// The socket: an absolute path (or a name in the first root), or a port.
        target: String,
    },
    /// `net2sfxc = close ;`
    Close,
}

/// `net2net`: relay what arrives on the data ports to another host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net2Net {
    /// `net2net? ;`
    Query,
    /// `net2net = connect : HOST [: PORT [: input protocol]] ;`
    Connect {
        /// Destination host.
        host: String,
        /// Destination port (default: the first `net_port`).
        port: Option<u16>,
        /// Framing of what arrives (default: `net_protocol`'s).
        input: Option<Protocol>,
    },
    /// `net2net = on ;`: start sending.
    On,
    /// `net2net = off ;` (or `disconnect`, `close`): stop and close.
    Off,
}

/// `fill2net`: send synthetic VDIF of the mode to another host (jive5ab sends a fill
/// pattern; a link test before the observation either way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fill2Net {
    /// `fill2net? ;`
    Query,
    /// `fill2net = connect : HOST [: PORT [: STATION]] ;`
    Connect {
        /// Destination host.
        host: String,
        /// Destination port (default: the first `net_port`).
        port: Option<u16>,
        /// Station code in the headers (default `FL`).
        station: Option<String>,
    },
    /// `fill2net = on ;`
    On,
    /// `fill2net = off ;` (or `disconnect`)
    Off,
}

/// A statement this recorder understands.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// `version? ;`
    Version,
    /// `mode`; `Set(None)` is `mode = none`.
    Mode(Setting<Option<Mode>>),
    /// `threads`.
    Threads(Setting<u16>),
    /// `net_protocol`.
    NetProtocol(Setting<NetProtocolSet>),
    /// `net_port`.
    NetPort(Setting<Vec<PortSpec>>),
    /// `mtu`.
    Mtu(Setting<u32>),
    /// `ipd`, nanoseconds (-1: automatic, as jive5ab's; 0: at the data rate).
    Ipd(Setting<i64>),
    /// `ack`: a keep-alive back to each sender every N of its datagrams (jive5ab's `ack`, any
    /// int: 0 the default, below 0 every datagram).
    Ack(Setting<i32>),
    /// `arq_latency` (evlbi's; jive5ab has none): how long `net2net` keeps each stream to
    /// answer an evlbi receiver's NAKs, ms (0: no ARQ; needs `net_protocol = native`).
    ArqLatency(Setting<u32>),
    /// `record`.
    Record(Record),
    /// `record_format`.
    RecordFormat(Setting<RecordFormat>),
    /// `set_disks`.
    SetDisks(Setting<Vec<String>>),
    /// `net2file`.
    Net2File(Net2File),
    /// `net2net`.
    Net2Net(Net2Net),
    /// `net2sfxc`.
    Net2Sfxc(Net2Sfxc),
    /// `trackmask`: jive5ab's channel dropping; only 0 (none) is taken.
    Trackmask(Setting<u64>),
    /// `fill2net`.
    Fill2Net(Fill2Net),
    /// `evlbi? ;` (`None`) or `evlbi = fmt… ;`.
    Evlbi(Option<String>),
    /// `tstat? ;` (true) or `tstat = ;` (false).
    Tstat(bool),
    /// `status? ;`
    Status,
    /// `dts_id? ;`
    DtsId,
    /// `os_rev? ;`
    OsRev,
    /// `error? ;`
    Error,
    /// `rtime? ;`
    Rtime,
    /// `datastream`.
    DataStream(DataStreamCmd),
    /// `scan_set`.
    ScanSet(ScanSet),
    /// `scan_check? ;`
    ScanCheck(ScanCheckArgs),
    /// `data_check? ;`
    DataCheck,
    /// `disk2file`.
    Disk2File(Disk2File),
    /// `reset = abort ;` (the Field System's `disk2file=abort`): stop a disk2file.
    Reset(String),
    /// `runtime`: which transfer context the connection works in.
    Runtime(crate::runtime::RuntimeCmd),
}

impl Request {
    /// The request a statement makes, or the reply's code and message when it makes none: its
    /// keyword's entry of [`KEYWORDS`] parses it.
    pub fn parse(s: &StatementRepr) -> Result<Request, CommandError> {
        match KEYWORDS.iter().find(|k| k.name == s.keyword) {
            Some(k) => (k.parse)(s),
            None => Err(CommandError::new(ReturnCode::NoSuchKeyword, "ENOSYS - not implemented")),
        }
    }
}

/// A keyword the recorder answers: its name, how it is written, and what parses it. One table
/// ([`KEYWORDS`]) is both what the daemon answers and what `evlbi serve --help` lists.
pub struct Keyword {
    /// The keyword.
    pub name: &'static str,
    /// How it is written: its queries and commands, as `--help` shows them.
    pub forms: &'static str,
    parse: fn(&StatementRepr) -> Result<Request, CommandError>,
}

/// Field `i` of a statement, empty when not given.
fn arg(s: &StatementRepr, i: usize) -> &str {
    s.fields.get(i).map(String::as_str).unwrap_or("")
}

/// `r` for a query; a command of a query-only keyword is refused (2).
fn query_only(s: &StatementRepr, r: Request) -> Result<Request, CommandError> {
    if s.query {
        Ok(r)
    } else {
        Err(CommandError::new(ReturnCode::NotApplicable, "query only"))
    }
}

/// The longest `arq_latency`, ms: a minute of a stream held for repeats.
pub const MAX_ARQ_LATENCY_MS: u64 = 60_000;

/// Every keyword the recorder answers, in the order `--help` lists them.
pub const KEYWORDS: &[Keyword] = &[
    Keyword {
        name: "version",
        forms: "version?",
        parse: |s| query_only(s, Request::Version),
    },
    Keyword {
        name: "status",
        forms: "status?",
        parse: |s| query_only(s, Request::Status),
    },
    Keyword {
        name: "dts_id",
        forms: "dts_id?",
        parse: |s| query_only(s, Request::DtsId),
    },
    Keyword {
        name: "os_rev",
        forms: "os_rev?",
        parse: |s| query_only(s, Request::OsRev),
    },
    Keyword {
        name: "mode",
        forms: "mode=VDIF_<payload>-<Mb/s>-<channels>-<bits>|MARK5B-<Mb/s>-<channels>-<bits>|mark5b:<mask>[:<decimation>]|none mode?",
        parse: |s| {
            setting(s, |f| {
                needed(arg(s, 0))?;
                let fields: Vec<&str> = f.iter().map(String::as_str).collect();
                Mode::parse_fields(&fields).map_err(|e| CommandError::param(e.to_string()))
            })
            .map(Request::Mode)
        },
    },
    Keyword {
        name: "threads",
        forms: "threads=N threads?",
        parse: |s| setting(s, |_| number(needed(arg(s, 0))?, 1, 1024, "threads")).map(Request::Threads),
    },
    Keyword {
        name: "net_protocol",
        forms: "net_protocol=PROTOCOL[:SOCBUF[:WORKBUF[:NBLOCK]]] net_protocol?",
        parse: |s| setting(s, net_protocol).map(Request::NetProtocol),
    },
    Keyword {
        name: "net_port",
        forms: "net_port=[HOST@]PORT[:[HOST@]PORT…](1-64,each_once) net_port?",
        parse: |s| setting(s, net_ports).map(Request::NetPort),
    },
    Keyword {
        name: "mtu",
        forms: "mtu=N mtu?",
        parse: |s| setting(s, |_| number(needed(arg(s, 0))?, 64, MAX_MTU.into(), "MTU")).map(Request::Mtu),
    },
    Keyword {
        name: "ipd",
        forms: "ipd=US|NSn ipd?",
        parse: |s| setting(s, |_| ipd(needed(arg(s, 0))?)).map(Request::Ipd),
    },
    Keyword {
        name: "ack",
        forms: "ack=N ack?",
        parse: |s| setting(s, |_| ack(needed(arg(s, 0))?)).map(Request::Ack),
    },
    Keyword {
        name: "arq_latency",
        forms: "arq_latency=MS arq_latency?",
        parse: |s| {
            setting(s, |_| {
                number(needed(arg(s, 0))?, 0, MAX_ARQ_LATENCY_MS, "ARQ latency (ms)")
            })
            .map(Request::ArqLatency)
        },
    },
    Keyword {
        name: "datastream",
        forms: "datastream=add:NAME:MATCH|remove:NAME|clear|reset datastream?",
        parse: |s| datastream(s).map(Request::DataStream),
    },
    Keyword {
        name: "record_format",
        forms: "record_format=vbs|mk6|vdif record_format?",
        parse: |s| setting(s, |_| record_format(needed(arg(s, 0))?)).map(Request::RecordFormat),
    },
    Keyword {
        name: "set_disks",
        forms: "set_disks=DISK[:…] set_disks?",
        parse: |s| setting(s, disks).map(Request::SetDisks),
    },
    Keyword {
        name: "record",
        forms: "record=on:SCAN|off record=mk6:0|1 record=nthread::N record? record?mk6 record?nthread",
        parse: |s| record(s).map(Request::Record),
    },
    Keyword {
        name: "net2file",
        forms: "net2file=open:NAME[,MODE]|close net2file?",
        parse: |s| net2file(s).map(Request::Net2File),
    },
    Keyword {
        name: "net2net",
        forms: "net2net=connect:HOST[:PORT[:IN]]|on|off net2net?",
        parse: |s| net2net(s).map(Request::Net2Net),
    },
    Keyword {
        name: "net2sfxc",
        forms: "net2sfxc=open:SOCKET[:1]|close net2sfxc?",
        parse: |s| net2sfxc(s).map(Request::Net2Sfxc),
    },
    Keyword {
        name: "trackmask",
        forms: "trackmask=0 trackmask?",
        parse: |s| setting(s, |_| trackmask(needed(arg(s, 0))?)).map(Request::Trackmask),
    },
    Keyword {
        name: "fill2net",
        forms: "fill2net=connect:HOST[:PORT[:STATION]]|on|off fill2net?",
        parse: |s| fill2net(s).map(Request::Fill2Net),
    },
    Keyword {
        name: "runtime",
        forms: "runtime=NAME[:new|exists|transient|delete] runtime?",
        parse: |s| crate::runtime::parse(s).map(Request::Runtime),
    },
    Keyword {
        name: "scan_set",
        forms: "scan_set=[SCAN][:START[:END]] scan_set?",
        parse: |s| crate::playback::scan_set(s.query, &s.fields).map(Request::ScanSet),
    },
    Keyword {
        name: "scan_check",
        forms: "scan_check?",
        parse: |s| crate::playback::scan_check(s.query, &s.fields).map(Request::ScanCheck),
    },
    Keyword {
        name: "data_check",
        forms: "data_check?",
        parse: |s| query_only(s, Request::DataCheck),
    },
    Keyword {
        name: "disk2file",
        forms: "disk2file=DEST[:START[:END[:MODE]]] disk2file?",
        parse: |s| crate::playback::disk2file(s.query, &s.fields).map(Request::Disk2File),
    },
    Keyword {
        name: "reset",
        forms: "reset=abort",
        parse: |s| match (s.query, arg(s, 0)) {
            (false, "abort") => Ok(Request::Reset("abort".into())),
            (false, other) => Err(CommandError::param(format!(
                "reset = {other}: evlbi resets only with abort"
            ))),
            (true, _) => Err(CommandError::new(ReturnCode::NoSuchKeyword, "ENOSYS - not implemented")),
        },
    },
    Keyword {
        name: "evlbi",
        forms: "evlbi? evlbi=FORMAT",
        parse: |s| Ok(Request::Evlbi((!s.query).then(|| s.fields.join(" : ")))),
    },
    Keyword {
        name: "tstat",
        forms: "tstat? tstat=",
        parse: |s| Ok(Request::Tstat(s.query)),
    },
    Keyword {
        name: "rtime",
        forms: "rtime?",
        parse: |s| query_only(s, Request::Rtime),
    },
    Keyword {
        name: "error",
        forms: "error?",
        parse: |s| query_only(s, Request::Error),
    },
];

/// A query, or a command parsed by `set`.
fn setting<T>(
    s: &StatementRepr,
    set: impl FnOnce(&[String]) -> Result<T, CommandError>,
) -> Result<Setting<T>, CommandError> {
    if s.query {
        Ok(Setting::Query)
    } else {
        set(&s.fields).map(Setting::Set)
    }
}

/// A field that must be given.
fn needed(s: &str) -> Result<&str, CommandError> {
    if s.is_empty() {
        Err(CommandError::param("Missing argument to command"))
    } else {
        Ok(s)
    }
}

/// An integer in `lo..=hi` (decimal, or hex after `0x`, as jive5ab's `strtoul(…, 0)`).
fn number<T: TryFrom<u64>>(s: &str, lo: u64, hi: u64, what: &str) -> Result<T, CommandError> {
    let bad = || CommandError::param(format!("invalid value for the {what} given: '{s}' (range {lo}-{hi})"));
    let v = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse::<u64>(),
    }
    .map_err(|_| bad())?;
    if !(lo..=hi).contains(&v) {
        return Err(bad());
    }
    T::try_from(v).map_err(|_| bad())
}

/// A size: a number with an optional `k` (1024) or `M` (1048576), as jive5ab takes them.
fn size(s: &str, what: &str) -> Result<u64, CommandError> {
    let (digits, unit) = match s.strip_suffix('k') {
        Some(d) => (d, 1024),
        None => match s.strip_suffix('M') {
            Some(d) => (d, 1 << 20),
            None => (s, 1),
        },
    };
    let v: u64 = number(digits, 0, i32::MAX as u64, what)?;
    v.checked_mul(unit)
        .filter(|v| *v <= i32::MAX as u64)
        .ok_or_else(|| CommandError::param(format!("<{what}> out of range: '{s}'")))
}

fn net_protocol(f: &[String]) -> Result<NetProtocolSet, CommandError> {
    if f.iter().all(String::is_empty) {
        return Err(CommandError::param("Empty command (no arguments given, really)"));
    }
    let opt = |i: usize| f.get(i).filter(|s| !s.is_empty());
    Ok(NetProtocolSet {
        protocol: opt(0).map(|s| Protocol::parse(s)).transpose()?,
        socbuf: opt(1).map(|s| size(s, "socbuf size")).transpose()?,
        workbuf: opt(2).map(|s| size(s, "workbuf size")).transpose()?,
        nblock: opt(3).map(|s| number(s, 1, u64::from(u32::MAX), "nbuf")).transpose()?,
    })
}

fn net_ports(f: &[String]) -> Result<Vec<PortSpec>, CommandError> {
    let mut out = Vec::new();
    for a in f.iter().filter(|a| !a.is_empty()) {
        if a.contains('=') {
            return Err(CommandError::param(format!(
                "{a}: stream suffixes are not used by evlbi (its files are named per station and thread)"
            )));
        }
        let (host, port) = match a.split_once('@') {
            Some((h, p)) if !h.is_empty() && !p.contains('@') => (Some(h.to_string()), p),
            Some(_) => {
                return Err(CommandError::param(
                    "Please specify host@port or just port, not something else",
                ))
            }
            None => (None, a.as_str()),
        };
        out.push(PortSpec {
            host,
            port: number(port, 0, 65_535, "port")?,
        });
    }
    if out.is_empty() {
        return Err(CommandError::param("Missing argument to command"));
    }
    // jive5ab: a lone port 0 goes back to the default port; in a list it names no port to listen
    // on (a free port nobody sends to), so it is refused here.
    if out.len() > 1 && out.iter().any(|p| p.port == 0) {
        return Err(CommandError::param(
            "port 0 in a list of ports (give each port; a lone 0 sets the default port)",
        ));
    }
    Ok(out)
}

/// jive5ab: a number of µs (a `u` suffix allowed) or of ns with `n`; -1 is "automatic".
fn ipd(s: &str) -> Result<i64, CommandError> {
    let bad = || CommandError::param(format!("ipd '{s}' NaN/out of range (range: [-1.0, 2147483us])"));
    let (digits, scale) = match s.strip_suffix('n') {
        Some(d) => (d, 1.0),
        None => (s.strip_suffix('u').unwrap_or(s), 1e3),
    };
    let v: f64 = digits.parse().map_err(|_| bad())?;
    let ns = v * scale;
    if !ns.is_finite() || v < -1.0 || ns > f64::from(i32::MAX) {
        return Err(bad());
    }
    Ok(if v < 0.0 { -1 } else { ns.round() as i64 })
}

/// jive5ab's `ack` (ackperiod.cc): an int, decimal or `0x` hex, as its `strtol(…, 0)` reads it.
fn ack(s: &str) -> Result<i32, CommandError> {
    let bad = || {
        CommandError::param(format!(
            "ack '{s}' not a number/out of range (range: {}-{})",
            i32::MIN,
            i32::MAX
        ))
    };
    let (negative, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(hex, 16),
        None => digits.parse::<i64>(),
    }
    .map_err(|_| bad())?;
    i32::try_from(if negative { -v } else { v }).map_err(|_| bad())
}

fn record_format(s: &str) -> Result<RecordFormat, CommandError> {
    match s {
        "vdif" => Ok(RecordFormat::Vdif),
        "vbs" | "flexbuff" => Ok(RecordFormat::Vbs),
        "mk6" => Ok(RecordFormat::Mk6),
        _ => Err(CommandError::param(format!("record format '{s}': vdif, vbs or mk6"))),
    }
}

fn record(s: &StatementRepr) -> Result<Record, CommandError> {
    if s.query {
        return match arg(s, 0) {
            "" => Ok(Record::Query),
            "mk6" => Ok(Record::QueryMk6),
            "nthread" => Ok(Record::QueryNthread),
            other => Err(CommandError::param(format!(
                "record? {other}: give nothing, mk6 or nthread"
            ))),
        };
    }
    match arg(s, 0) {
        "on" => {
            let scan = arg(s, 1);
            if scan.is_empty() {
                return Err(CommandError::new(ReturnCode::Conflict, "must provide a scan name"));
            }
            let scan = ScanName::parse(scan).map_err(|e| CommandError::param(e.to_string()))?;
            Ok(Record::On { scan })
        }
        "nthread" => {
            let count = |v: &str, what: &str| match v {
                "" => Ok(None),
                v => number::<u32>(v, 1, 1024, what).map(Some),
            };
            Ok(Record::Nthread {
                readers: count(arg(s, 1), "nParallelReader")?,
                writers: count(arg(s, 2), "nParallelWriter")?,
            })
        }
        "off" => Ok(Record::Off),
        "mk6" => match arg(s, 1) {
            "0" => Ok(Record::Mk6(false)),
            "1" => Ok(Record::Mk6(true)),
            other => Err(CommandError::param(format!(
                "record = mk6 : {other}: 0 (FlexBuff) or 1 (Mark6)"
            ))),
        },
        "" => Err(CommandError::param("command w/o actual commands and/or arguments...")),
        other => Err(CommandError::param(format!("record = {other}: on, off or mk6"))),
    }
}

fn disks(f: &[String]) -> Result<Vec<String>, CommandError> {
    let d: Vec<String> = f.iter().filter(|s| !s.is_empty()).cloned().collect();
    if d.is_empty() || d.len() > MAX_DISKS {
        return Err(CommandError::param(format!("give 1 to {MAX_DISKS} directories")));
    }
    for p in &d {
        // Which directories may be disks is the recorder's to say (its allowed roots); here
        // only what no path may hold.
        if p.split('/').any(|c| c == "..") || p.contains("//") {
            return Err(CommandError::param(format!(
                "disk '{p}': a '..' or an empty component in a path"
            )));
        }
    }
    Ok(d)
}

fn net2file(s: &StatementRepr) -> Result<Net2File, CommandError> {
    if s.query {
        return Ok(Net2File::Query);
    }
    match arg(s, 0) {
        "open" => {
            // jive5ab takes an open mode after a comma (`file,w`).
            let (path, mode) = arg(s, 1).split_once(',').unwrap_or((arg(s, 1), "n"));
            let mode = match mode {
                "n" => OpenMode::New,
                "w" => OpenMode::Write,
                "a" => OpenMode::Append,
                m => return Err(CommandError::param(format!("open mode '{m}': n, w or a"))),
            };
            let path = needed(path)?;
            if path.split('/').any(|c| c == "..") || path.ends_with('/') {
                return Err(CommandError::param(format!(
                    "file '{path}': no '..' and a file name at the end"
                )));
            }
            Ok(Net2File::Open {
                path: path.to_string(),
                mode,
            })
        }
        "close" => Ok(Net2File::Close),
        "" => Err(CommandError::param("command w/o actual commands and/or arguments...")),
        other => Err(CommandError::param(format!("net2file = {other}: open or close"))),
    }
}

fn net2sfxc(s: &StatementRepr) -> Result<Net2Sfxc, CommandError> {
    if s.query {
        return Ok(Net2Sfxc::Query);
    }
    match arg(s, 0) {
        "open" => {
            let target = needed(arg(s, 1))?;
            if target.split('/').any(|c| c == "..") || target.ends_with('/') || target.len() > 100 {
                return Err(CommandError::param(format!(
                    "socket '{target}': no '..', a name at the end, at most 100 bytes"
                )));
            }
            match arg(s, 2) {
                "" | "1" => {}
                other => {
                    return Err(CommandError::param(format!(
                        "<strict>, when set, MUST be 1 (not '{other}')"
                    )))
                }
            }
            Ok(Net2Sfxc::Open {
                target: target.to_string(),
            })
        }
        "close" => Ok(Net2Sfxc::Close),
        "" => Err(CommandError::param("command w/o actual commands and/or arguments...")),
        other => Err(CommandError::new(
            ReturnCode::NotApplicable,
            format!("{other} does not apply to net2sfxc"),
        )),
    }
}

/// jive5ab's track mask (hex or decimal): evlbi drops no channels, so only 0.
fn trackmask(v: &str) -> Result<u64, CommandError> {
    let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    }
    .map_err(|_| CommandError::param(format!("trackmask '{v}': a number")))?;
    if n != 0 {
        return Err(CommandError::param(format!(
            "trackmask {v}: evlbi does not drop channels (only 0, the whole band)"
        )));
    }
    Ok(n)
}

fn datastream(s: &StatementRepr) -> Result<DataStreamCmd, CommandError> {
    if s.query {
        return Ok(DataStreamCmd::Query(
            (!arg(s, 0).is_empty()).then(|| arg(s, 0).to_string()),
        ));
    }
    match arg(s, 0) {
        "add" | "remove" if arg(s, 1).is_empty() => Err(CommandError::param("Missing data stream name")),
        "add" => Ok(DataStreamCmd::Add {
            name: arg(s, 1).to_string(),
            criteria: s.fields.iter().skip(2).filter(|c| !c.is_empty()).cloned().collect(),
        }),
        "remove" => Ok(DataStreamCmd::Remove(arg(s, 1).to_string())),
        "clear" => Ok(DataStreamCmd::Clear),
        "reset" => Ok(DataStreamCmd::Reset),
        "" => Err(CommandError::param("subcommand (add, delete, clear) is required")),
        other => Err(CommandError::new(
            ReturnCode::NotApplicable,
            format!("{other} does not apply to datastream"),
        )),
    }
}

fn net2net(s: &StatementRepr) -> Result<Net2Net, CommandError> {
    if s.query {
        return Ok(Net2Net::Query);
    }
    match arg(s, 0) {
        "connect" => {
            let host = host(arg(s, 1))?;
            let port = match arg(s, 2) {
                "" => None,
                p => Some(number(p, 1, 65_535, "port")?),
            };
            let input = match arg(s, 3) {
                "" => None,
                p => Some(Protocol::parse(p)?),
            };
            Ok(Net2Net::Connect {
                host: host.to_string(),
                port,
                input,
            })
        }
        "on" => Ok(Net2Net::On),
        "off" | "disconnect" | "close" => Ok(Net2Net::Off),
        "" => Err(CommandError::param("command w/o actual commands and/or arguments...")),
        other => Err(CommandError::param(format!("net2net = {other}: connect, on or off"))),
    }
}

/// A destination host: a name or an IPv4 address, nothing else.
fn host(h: &str) -> Result<&str, CommandError> {
    let h = needed(h)?;
    if h.len() <= 253 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)) {
        Ok(h)
    } else {
        Err(CommandError::param(format!(
            "host '{h}' is not a host name or IPv4 address"
        )))
    }
}

fn fill2net(s: &StatementRepr) -> Result<Fill2Net, CommandError> {
    if s.query {
        return Ok(Fill2Net::Query);
    }
    match arg(s, 0) {
        "connect" => {
            let host = host(arg(s, 1))?.to_string();
            let port = match arg(s, 2) {
                "" => None,
                p => Some(number(p, 1, 65_535, "port")?),
            };
            let station = match arg(s, 3) {
                "" => None,
                st if (1..=2).contains(&st.len()) && st.bytes().all(|b| b.is_ascii_alphanumeric()) => {
                    Some(st.to_string())
                }
                st => return Err(CommandError::param(format!("station '{st}': a two-letter code"))),
            };
            Ok(Fill2Net::Connect { host, port, station })
        }
        "on" => Ok(Fill2Net::On),
        "off" | "disconnect" | "close" => Ok(Fill2Net::Off),
        "" => Err(CommandError::param("command w/o actual commands and/or arguments...")),
        other => Err(CommandError::param(format!("fill2net = {other}: connect, on or off"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statement::split_request;

    fn parse(line: &str) -> Result<Request, CommandError> {
        let mut all = split_request(line.as_bytes());
        assert_eq!(all.len(), 1, "{line}");
        Request::parse(&all.remove(0).expect("a statement"))
    }

    fn code(line: &str) -> ReturnCode {
        parse(line).expect_err(line).code
    }

    /// jive5ab's `ack` takes any int, as its `strtol(…, 0)` reads one (ackperiod.cc).
    #[test]
    fn ack_takes_an_int_as_jive5ab_reads_it() {
        assert_eq!(parse("ack = 10 ;"), Ok(Request::Ack(Setting::Set(10))));
        assert_eq!(parse("ack = 0x20 ;"), Ok(Request::Ack(Setting::Set(32))));
        assert_eq!(parse("ack = -1 ;"), Ok(Request::Ack(Setting::Set(-1))));
        assert_eq!(parse("ack? ;"), Ok(Request::Ack(Setting::Query)));
        assert_eq!(parse("arq_latency = 300 ;"), Ok(Request::ArqLatency(Setting::Set(300))));
        assert_eq!(parse("arq_latency = 0 ;"), Ok(Request::ArqLatency(Setting::Set(0))));
        assert_eq!(parse("arq_latency? ;"), Ok(Request::ArqLatency(Setting::Query)));
        assert!(parse("arq_latency = 60001 ;").is_err());
        assert!(parse("arq_latency = 300ms ;").is_err());
        assert!(parse("arq_latency = ;").is_err());
        for bad in ["ack = 2147483648 ;", "ack = ten ;", "ack = ;"] {
            assert_eq!(parse(bad).unwrap_err().code, ReturnCode::BadParameter, "{bad}");
        }
    }

    /// The table is what is answered: each keyword once, each parsed by its own entry (a query
    /// or a command of it is never "no such keyword"), and nothing else is answered.
    #[test]
    fn every_keyword_of_the_table_is_answered_and_only_those() {
        let mut names: Vec<&str> = KEYWORDS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KEYWORDS.len(), "a keyword listed twice");
        for k in KEYWORDS {
            assert!(k.forms.starts_with(k.name), "{}: {}", k.name, k.forms);
            let answered = |line: String| match parse(&line) {
                Ok(_) => true,
                Err(e) => e.code != ReturnCode::NoSuchKeyword,
            };
            assert!(
                answered(format!("{}? ;", k.name)) || answered(format!("{} = x ;", k.name)),
                "{} is listed but not answered",
                k.name
            );
        }
        assert_eq!(code("no_such_keyword? ;"), ReturnCode::NoSuchKeyword);
    }

    #[test]
    fn the_field_system_set_up_parses() {
        assert!(matches!(
            parse("mode = VDIF_8000-2048-16-2 ;"),
            Ok(Request::Mode(Setting::Set(Some(_))))
        ));
        assert_eq!(parse("mode = none ;"), Ok(Request::Mode(Setting::Set(None))));
        assert_eq!(
            parse("net_protocol = udps : 32M : 256M : 4 ;"),
            Ok(Request::NetProtocol(Setting::Set(NetProtocolSet {
                protocol: Some(Protocol::Udps),
                socbuf: Some(32 << 20),
                workbuf: Some(256 << 20),
                nblock: Some(4),
            })))
        );
        assert_eq!(
            parse("net_protocol = : 4k ;"),
            Ok(Request::NetProtocol(Setting::Set(NetProtocolSet {
                socbuf: Some(4096),
                ..NetProtocolSet::default()
            })))
        );
        assert_eq!(
            parse("net_port = 46227 : 10.0.0.1@46228 ;"),
            Ok(Request::NetPort(Setting::Set(vec![
                PortSpec {
                    host: None,
                    port: 46227
                },
                PortSpec {
                    host: Some("10.0.0.1".into()),
                    port: 46228
                },
            ])))
        );
        assert_eq!(parse("mtu = 9000 ;"), Ok(Request::Mtu(Setting::Set(9000))));
        assert_eq!(parse("ipd = 10 ;"), Ok(Request::Ipd(Setting::Set(10_000))));
        assert_eq!(parse("ipd = 250n ;"), Ok(Request::Ipd(Setting::Set(250))));
        assert_eq!(parse("ipd = -1 ;"), Ok(Request::Ipd(Setting::Set(-1))));
        assert_eq!(
            parse("record = on : r41066_ef_no0001 ;"),
            Ok(Request::Record(Record::On {
                scan: ScanName::parse("r41066_ef_no0001").unwrap()
            }))
        );
        assert_eq!(parse("record = off ;"), Ok(Request::Record(Record::Off)));
        assert_eq!(parse("record = mk6 : 1 ;"), Ok(Request::Record(Record::Mk6(true))));
        assert_eq!(parse("record? mk6 ;"), Ok(Request::Record(Record::QueryMk6)));
        assert_eq!(
            parse("net2file = open : /data/scan1.vdif,w ;"),
            Ok(Request::Net2File(Net2File::Open {
                path: "/data/scan1.vdif".into(),
                mode: OpenMode::Write,
            }))
        );
        assert_eq!(
            parse("net2net = connect : corr.example.org : 46300 : pudp ;"),
            Ok(Request::Net2Net(Net2Net::Connect {
                host: "corr.example.org".into(),
                port: Some(46300),
                input: Some(Protocol::Pudp),
            }))
        );
        assert_eq!(parse("net2net = disconnect ;"), Ok(Request::Net2Net(Net2Net::Off)));
        assert_eq!(
            parse("fill2net = connect : 10.0.0.2 : 46227 : Ef ;"),
            Ok(Request::Fill2Net(Fill2Net::Connect {
                host: "10.0.0.2".into(),
                port: Some(46227),
                station: Some("Ef".into()),
            }))
        );
        assert_eq!(parse("fill2net = on ;"), Ok(Request::Fill2Net(Fill2Net::On)));
        assert_eq!(parse("evlbi = %t : %l ;"), Ok(Request::Evlbi(Some("%t : %l".into()))));
        assert_eq!(parse("evlbi? ;"), Ok(Request::Evlbi(None)));
        assert_eq!(parse("tstat = ;"), Ok(Request::Tstat(false)));
        assert_eq!(
            parse("record = nthread : : 2 ;"),
            Ok(Request::Record(Record::Nthread {
                readers: None,
                writers: Some(2)
            }))
        );
        assert_eq!(parse("dts_id? ;"), Ok(Request::DtsId));
        assert_eq!(parse("os_rev? ;"), Ok(Request::OsRev));
        assert_eq!(parse("error? ;"), Ok(Request::Error));
        assert_eq!(
            parse("datastream = clear ;"),
            Ok(Request::DataStream(DataStreamCmd::Clear))
        );
        assert_eq!(
            parse("datastream = reset ;"),
            Ok(Request::DataStream(DataStreamCmd::Reset))
        );
        assert_eq!(
            parse("datastream = add : ds{thread} : * ;"),
            Ok(Request::DataStream(DataStreamCmd::Add {
                name: "ds{thread}".into(),
                criteria: vec!["*".into()]
            }))
        );
        assert_eq!(parse("data_check? ;"), Ok(Request::DataCheck));
        assert!(matches!(parse("scan_check? ;"), Ok(Request::ScanCheck(_))));
        assert!(matches!(parse("scan_set = : -1000000 ;"), Ok(Request::ScanSet(_))));
        assert!(matches!(
            parse("disk2file = /data/x.m5a : : : w ;"),
            Ok(Request::Disk2File(_))
        ));
        assert_eq!(
            parse("set_disks = /mnt/disk0 : /mnt/disk1 ;"),
            Ok(Request::SetDisks(Setting::Set(vec![
                "/mnt/disk0".into(),
                "/mnt/disk1".into()
            ])))
        );
        assert_eq!(
            parse("set_disks = disk0 : disk1/sub ;"),
            Ok(Request::SetDisks(Setting::Set(vec![
                "disk0".into(),
                "disk1/sub".into()
            ])))
        );
    }

    #[test]
    fn bad_requests_get_jive5abs_codes() {
        assert_eq!(code("foo? ;"), ReturnCode::NoSuchKeyword);
        assert_eq!(code("version = 1 ;"), ReturnCode::NotApplicable);
        assert_eq!(code("status = ;"), ReturnCode::NotApplicable);
        assert_eq!(code("record = on ;"), ReturnCode::Conflict);
        for bad in [
            "mtu = 63 ;",
            "mtu = 9001 ;",
            "mtu = ;",
            "mtu = x ;",
            "net_port = 99999999 ;",
            "net_port = a@b@1 ;",
            "net_port = 1=x : 2=y ;",
            "net_port = ;",
            "net_port = 46227 : 0 ;",
            "net_port = 46227 : x ;",
            "net_port = 46227 : -1 ;",
            "net_protocol = tcp ;",
            "net_protocol = bogus ;",
            "net_protocol = udps : 4G ;",
            "net_protocol = ;",
            "ipd = -2 ;",
            "ipd = lots ;",
            "mode = garbage ;",
            "mode = Mark5B-4096-16-2 ;",
            "mode = mark5b : 0x7 : 1 ;",
            "threads = 0 ;",
            "record = on : ../etc ;",
            "record = on : a/b ;",
            "record = sideways ;",
            "record = mk6 : 2 ;",
            "record_format = tape ;",
            "set_disks = a/../b ;",
            "set_disks = /mnt//disk0 ;",
            "record = on : a.b ;",
            "record = nthread : : 0 ;",
            "net2file = open : /x,z ;",
            "net2file = open : ../x ;",
            "net2file = open ;",
            "net2net = connect ;",
            "net2net = connect : h : 0 ;",
            "net2net = jump ;",
            "fill2net = connect : h : 1 : Effelsberg ;",
            "fill2net = sideways ;",
        ] {
            let all = split_request(bad.as_bytes());
            let Some(Ok(s)) = all.first() else { continue };
            assert_eq!(
                Request::parse(s).map_err(|e| e.code),
                Err(ReturnCode::BadParameter),
                "{bad}"
            );
        }
    }
}
