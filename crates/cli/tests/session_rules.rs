//! A stream session's rules, each written once (stream-session's `validate()`), through both
//! front doors: the binary's flags (exit 2, the refusal said in flags) and `evlbi serve`'s VSI-S
//! (return code 6, said in the keywords that set the value). The rules no VSI-S keyword can
//! reach (the daemon sets boards, tees and ranges itself) go through the binary alone; their
//! library cases are unit tests of each `validate()`.

mod common;

use common::assert_usage_error;
use common::vsi::{Serve, Vsi};
use vsis::ReturnCode;

/// `evlbi ARGS` exits 2 saying exactly `said` after "error: ".
#[track_caller]
fn refused(args: &[&str], said: &str) {
    let o = assert_usage_error(args);
    let err = String::from_utf8_lossy(&o.stderr);
    let first = err.lines().next().unwrap_or("");
    assert_eq!(first, format!("error: {said}"), "{args:?}: {err}");
}

fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

const SEND: [&str; 5] = ["stream", "send", "--to", "127.0.0.1:9", "--generate"];
const RECV: [&str; 4] = ["stream", "recv", "--listen", "127.0.0.1:0"];
const RELAY: [&str; 6] = ["stream", "relay", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:9"];

#[test]
fn arq_needs_native_framing_said_in_each_commands_flags() {
    let send = with(
        &SEND,
        &["--stations", "Ef", "--seq-format", "jive5ab", "--arq-latency", "300ms"],
    );
    refused(
        &send,
        "--arq-latency needs --seq-format native (NAKs name native sequence numbers)",
    );
    refused(
        &with(&RECV, &["--arq", "--seq-format", "jive5ab"]),
        "--arq needs --seq-format native (NAKs name native sequence numbers)",
    );
    refused(
        &with(&RELAY, &["--arq-latency", "300ms", "--seq-format", "none"]),
        "--arq-latency needs --seq-format native (NAKs name native sequence numbers)",
    );
}

#[test]
fn ranges_are_the_sessions_and_name_the_flag() {
    let gen = with(&SEND, &["--stations", "Ef", "--threads", "4", "--seq-format", "none"]);
    refused(&with(&gen, &["--senders", "0"]), "--senders 0: out of range (1 to 64)");
    refused(
        &with(&gen, &["--senders", "65"]),
        "--senders 65: out of range (1 to 64)",
    );
    refused(&with(&gen, &["--burst", "0"]), "--burst 0: out of range (1 to 64)");
    refused(
        &with(&gen, &["--catch-up", "20"]),
        "--catch-up 20: out of range (1 to 16)",
    );
    refused(&with(&RELAY, &["--burst", "65"]), "--burst 65: out of range (1 to 64)");
    refused(
        &with(&RELAY, &["--catch-up", "0.5"]),
        "--catch-up 0.5: out of range (1 to 16)",
    );
    refused(
        &with(&RELAY, &["--ack", "0"]),
        "--ack 0: out of range (1 or more; none sends no keep-alive)",
    );
}

#[test]
fn a_simulated_backends_boards_take_their_framing_and_destinations() {
    let gen = with(&SEND, &["--stations", "Ef", "--threads", "4"]);
    refused(
        &with(&gen, &["--senders", "2"]),
        "--senders 2 simulates a backend's boards: set --seq-format jive5ab (each board numbers its own \
         datagrams, like jive5ab's udps) or none (bare VDIF frames); native framing numbers one stream per \
         station from one socket",
    );
    refused(
        &with(
            &gen,
            &[
                "--senders",
                "2",
                "--seq-format",
                "none",
                "--to",
                "127.0.0.1:10",
                "--to",
                "127.0.0.1:11",
            ],
        ),
        "3 destinations (--to) for --senders 2: give one destination for all boards or one per board",
    );
    // The input's rule (a thread per board) names the flags too, after the data were made.
    let e = assert_usage_error(&with(
        &SEND,
        &[
            "--stations",
            "Ef",
            "--threads",
            "2",
            "--senders",
            "3",
            "--seq-format",
            "none",
        ],
    ));
    let e = String::from_utf8_lossy(&e.stderr);
    assert!(
        e.contains("2 VDIF thread(s) cannot be split over --senders 3: each board sends at least one thread (use at most 2 senders, or more threads)"),
        "{e}"
    );
}

#[test]
fn a_recording_over_disks_takes_no_files_of_its_own() {
    let d = tempfile::tempdir().unwrap();
    let disk = d.path().to_str().unwrap();
    let scan = ["--format", "vbs", "--disks", disk, "--scan", "x"];
    refused(
        &with(&with(&RECV, &scan), &["--out", disk]),
        "--format vbs|mk6 records a scan over disks in blocks of its own: leave out --out",
    );
    refused(
        &with(&with(&RECV, &scan), &["--chunk", "1G"]),
        "--format vbs|mk6 records a scan over disks in blocks of its own: leave out --chunk",
    );
    refused(
        &with(&with(&RELAY, &scan), &["--tee", disk]),
        "--format vbs|mk6 records a scan over disks in blocks of its own: leave out --tee",
    );
    refused(
        &with(&with(&RELAY, &scan), &["--chunk", "1G"]),
        "--format vbs|mk6 records a scan over disks in blocks of its own: leave out --chunk",
    );
    refused(
        &with(&RECV, &["--split", "thread"]),
        "--split thread needs an output: --out or --format vbs|mk6",
    );
    refused(
        &with(&RELAY, &["--split", "thread"]),
        "--split thread needs an output: --tee or --format vbs|mk6",
    );
}

/// A live output to SFXC's reader is no recording: the one recording flag given beside it is
/// named (the CLI listed all five whichever was given).
#[test]
fn a_live_output_takes_no_recording_flag_and_names_the_one_given() {
    let d = tempfile::tempdir().unwrap();
    let disk = d.path().to_str().unwrap();
    let live = with(&RECV, &["--out", "sfxc:tcp:127.0.0.1:0"]);
    refused(
        &with(&live, &["--chunk", "1G"]),
        "--out sfxc:|difx: is a live output: leave out --chunk",
    );
    refused(
        &with(&live, &["--direct"]),
        "--out sfxc:|difx: is a live output: leave out --direct",
    );
    refused(
        &with(&live, &["--split", "thread"]),
        "--out sfxc:|difx: is a live output: leave out --split thread",
    );
    refused(
        &with(&live, &["--format", "vbs", "--disks", disk, "--scan", "x"]),
        "--out sfxc:|difx: is a live output: leave out --format vbs|mk6",
    );
}

/// At most 64 data ports: the binary says `--listen`; VSI-S cannot even say a 65th (a statement
/// holds at most 64 fields, so `net_port` names 64 ports at most) and the daemon relays from all
/// 64 — the two doors agree on the session's one bound. (How the daemon would say a refusal,
/// code 6 in VSI-S words, is the daemon's unit test of its table.)
#[test]
fn listen_addresses_are_counted_through_both_doors() {
    let mut args: Vec<&str> = vec!["stream", "recv"];
    for _ in 0..65 {
        args.extend(["--listen", "127.0.0.1:0"]);
    }
    refused(&args, "--listen: 1 to 64 addresses (65 given)");
    args[1] = "relay";
    args.extend(["--to", "127.0.0.1:9"]);
    refused(&args, "--listen: 1 to 64 addresses (65 given)");

    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let mut v = Vsi::connect(serve.vsi);
    v.ok("mode = VDIF_8000-512-16-2 ;");
    v.ok("mtu = 9000 ;");
    // 65 distinct ports free a moment ago (port 0 names no port in a list: refused as such).
    let socks: Vec<_> = (0..65)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let ports: Vec<String> = socks
        .iter()
        .map(|s| format!("127.0.0.1@{}", s.local_addr().unwrap().port()))
        .collect();
    drop(socks);
    let r = v.ask(&format!("net_port = {} ;", ports.join(" : ")));
    assert_eq!(r.code, ReturnCode::NoSuchKeyword, "{r}");
    v.ok(&format!("net_port = {} ;", ports[..64].join(" : ")));
    v.ok("net2net = connect : 127.0.0.1 : 9 ;");
    assert_eq!(v.ok("net2net? ;")[0], "connected");
    v.ok("net2net = off ;");
    serve.stop();
}

/// ARQ on a relay through both doors: `stream relay --arq-latency` and `evlbi serve`'s
/// `arq_latency` keyword (evlbi's, ms; jive5ab has none) fill the one relay config and meet its
/// one rule, NAKs need native framing out: the binary says it in flags (exit 2), the daemon in
/// the keywords that set the values (code 6); with `net_protocol = native` the relay starts.
/// Before, the daemon's `net2net` could not keep a stream for NAKs at all (`arq_latency`: 7,
/// no such keyword).
#[test]
fn arq_latency_reaches_the_relay_through_both_doors() {
    refused(
        &with(&RELAY, &["--arq-latency", "300ms", "--seq-format", "jive5ab"]),
        "--arq-latency needs --seq-format native (NAKs name native sequence numbers)",
    );
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let mut v = Vsi::connect(serve.vsi);
    assert_eq!(v.ok("arq_latency? ;"), ["0"], "no ARQ until set");
    for bad in ["arq_latency = 300ms ;", "arq_latency = 60001 ;", "arq_latency = ;"] {
        assert_eq!(v.ask(bad).code, ReturnCode::BadParameter, "{bad}");
    }
    v.ok("arq_latency = 300 ;");
    assert_eq!(v.ok("arq_latency? ;"), ["300"]);
    v.ok("mode = VDIF_8000-512-16-2 ;");
    v.ok("mtu = 9000 ;");
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    v.ok(&format!("net_port = 127.0.0.1@{port} ;"));
    v.ok("net_protocol = udps ;");
    let r = v.ask("net2net = connect : 127.0.0.1 : 9 ;");
    assert_eq!(r.code, ReturnCode::Conflict, "{r}");
    let said = r.fields.join(":");
    assert!(
        said.contains("arq_latency needs net_protocol native (NAKs name native sequence numbers)"),
        "{said}"
    );
    v.ok("net_protocol = native ;");
    v.ok("net2net = connect : 127.0.0.1 : 9 ;");
    assert_eq!(v.ok("net2net? ;")[0], "connected");
    v.ok("net2net = off ;");
    // 0 turns it off: udps relays again.
    v.ok("arq_latency = 0 ;");
    v.ok("net_protocol = udps ;");
    v.ok("net2net = connect : 127.0.0.1 : 9 ;");
    v.ok("net2net = off ;");
    serve.stop();
}

/// Mark5B goes to SFXC's reader only, a rule of the receiver's one `validate()` (it was the
/// CLI's own check and the daemon's own refusal): `stream recv --frames mark5b` into a
/// directory, a vbs scan, DiFX's feed or nothing exits 2 saying it in flags; `evlbi serve`'s
/// `record` and `net2file` of a Mark5B mode return 6 saying it in keywords, and `net2sfxc`
/// takes the same mode.
#[test]
fn mark5b_goes_to_live_outputs_only_through_both_doors() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let m5b = with(
        &RECV,
        &["--seq-format", "jive5ab", "--frames", "mark5b", "--fps", "400"],
    );
    for out in [
        &["--out", dir][..],
        &["--format", "vbs", "--disks", dir, "--scan", "x"],
        &[],
    ] {
        refused(
            &with(&m5b, out),
            "--frames mark5b needs --out sfxc:|difx: (recordings take VDIF, not Mark5B)",
        );
    }

    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let mut v = Vsi::connect(serve.vsi);
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    v.ok("mode = mark5b : 0xffffffff : 1 ;");
    v.ok("net_protocol = udps ;");
    v.ok(&format!("net_port = 127.0.0.1@{port} ;"));
    for cmd in ["record = on : scan1 ;", "net2file = open : m5b.vdif,w ;"] {
        let r = v.ask(cmd);
        assert_eq!(r.code, ReturnCode::Conflict, "{cmd} -> {r}");
        // (A reply's field holds no ':', the daemon writes '.' for it.)
        assert_eq!(
            r.fields.join(":"),
            "cannot receive. mode mark5b needs net2sfxc (recordings take VDIF, not Mark5B)",
            "{cmd}"
        );
    }
    v.ok("record_format = vdif ;");
    assert_eq!(v.ask("record = on : scan2 ;").code, ReturnCode::Conflict);
    let sock = root.path().join("mk5read");
    v.ok(&format!("net2sfxc = open : {} ;", sock.display()));
    v.ok("net2sfxc = close ;");
    serve.stop();
}

/// `net2net` of a Mark5B mode is refused saying why (a relay sends whole frames, which no mtu
/// carries; net2sfxc or `stream relay --frames mark5b` instead), and `fill2net`, which generates
/// VDIF, refuses the mode as one it cannot generate.
#[test]
fn net2net_and_fill2net_of_a_mark5b_mode_are_refused_in_keywords() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let mut v = Vsi::connect(serve.vsi);
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    v.ok("mode = mark5b : 0xffffffff : 1 ;");
    v.ok("net_protocol = udps ;");
    v.ok(&format!("net_port = 127.0.0.1@{port} ;"));
    // A relay sends each frame whole in one datagram: Mark5B's 10016-byte frames fit no mtu
    // (at most 9000, the range jive5ab takes), where jive5ab cuts the stream instead.
    v.ok("mtu = 9000 ;");
    let r = v.ask(&format!("net2net = connect : 127.0.0.1 : {port} : udps ;"));
    assert_eq!(r.code, ReturnCode::Conflict, "{r}");
    assert!(
        r.fields.join(":").starts_with(
            "net2net sends each frame whole. 10052-byte datagrams (IP header included), more than any mtu (at most 9000) carries"
        ),
        "{r}"
    );
    let r = v.ask("fill2net = connect : 127.0.0.1 ;");
    assert_eq!(r.code, ReturnCode::Conflict, "{r}");
    assert!(
        r.fields
            .join(":")
            .starts_with("fill2net generates real 1- or 2-bit VDIF, not mode mark5b"),
        "{r}"
    );
    // Nothing was started: the same mode still goes to SFXC's reader.
    let sock = root.path().join("mk5read");
    v.ok(&format!("net2sfxc = open : {} ;", sock.display()));
    v.ok("net2sfxc = close ;");
    serve.stop();
}
