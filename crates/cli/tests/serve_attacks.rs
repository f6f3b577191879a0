//! Attacks on `evlbi serve` over real sockets: floods of idle connections on its control and
//! metrics ports, every VSI-S keyword while a scan records, peers outside `--vsi-allow` (in a
//! network namespace of the test's own), and megabyte lines from thirty clients.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

use common::vsi::{frames_of, recording, sent, settled, Serve, Vsi};
use common::{backend_sim, free_udp_port};
use testkit::flood::Flood;

/// Connect, think for `think`, send `request`; the first line of the answer, or why none came.
fn speak_after(addr: SocketAddr, think: Duration, request: &[u8]) -> Result<String, String> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    std::thread::sleep(think);
    (&s).write_all(request).map_err(|e| format!("write: {e}"))?;
    let mut line = String::new();
    match BufReader::new(&s).read_line(&mut line) {
        Ok(n) if n > 0 => Ok(line),
        Ok(_) => Err("closed without an answer".into()),
        Err(e) => Err(format!("read: {e}")),
    }
}

/// 20 clients one after another, each speaking 100 ms after its connect, while 3000 idle
/// connections a second arrive from the same address; the answers' first lines.
fn served_under_flood(target: SocketAddr, request: &[u8]) -> (Vec<Result<String, String>>, String) {
    let lo: IpAddr = "127.0.0.1".parse().unwrap();
    let flood = Flood::start(target, lo, 3000, Duration::from_secs(3), Duration::from_secs(30));
    // Let the idle places fill first.
    std::thread::sleep(Duration::from_millis(500));
    let outcomes = (0..20)
        .map(|_| speak_after(target, Duration::from_millis(100), request))
        .collect();
    let report = flood.finish();
    (outcomes, format!("flood {report:?} ({:.0}/s)", report.rate()))
}

/// The done-criterion of issue 28's control-port item: a client speaking 100 ms after
/// connecting is served under a 3000 conn/s flood (before: 64 waiting places, the oldest closed
/// first; 1600 conn/s closed every client speaking after 50 ms, 0 of 20 served).
#[test]
fn the_control_port_serves_a_client_thinking_100_ms_under_3000_idle_connections_a_second() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let (outcomes, flood) = served_under_flood(serve.vsi, b"version?;\n");
    let served = outcomes
        .iter()
        .filter(|o| o.as_ref().is_ok_and(|l| l.starts_with("!version? 0 : evlbi")))
        .count();
    let log = serve.stop();
    eprintln!("control port: served {served} of 20; {flood}; {log:?}");
    assert_eq!(served, 20, "{outcomes:?}\n{flood}\n{log:?}");
    // The flood did fill the idle places: connections were closed for newer ones.
    let closed: u64 = log
        .iter()
        .find_map(|l| l.split("control connection(s), ").nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary in {log:?}"));
    assert!(closed > 1000, "{closed} closed while idle: {log:?}");
}

/// The same flood on the metrics port: every scrape 100 ms after its connect is answered.
#[test]
fn the_metrics_port_serves_a_scraper_thinking_100_ms_under_3000_idle_connections_a_second() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let (outcomes, flood) = served_under_flood(serve.metrics, b"GET /metrics HTTP/1.0\r\n\r\n");
    let served = outcomes
        .iter()
        .filter(|o| o.as_ref().is_ok_and(|l| l.starts_with("HTTP/1.1 200 OK")))
        .count();
    eprintln!("metrics port: served {served} of 20; {flood}");
    assert_eq!(served, 20, "{outcomes:?}\n{flood}");
}

/// Every keyword of the daemon, queried and set (valid values, invalid ones, conflicting
/// ones), from a second client while a scan records — all but `record = off`, whose job is to
/// stop it: the scan records every frame sent, and `record?` still names it.
#[test]
fn every_keyword_while_a_scan_records_leaves_the_scan_whole() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok("net_protocol = udps : 64M ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("record = on : busy_scan ;");
    let sender = backend_sim(port, "4s", &[]);
    let other_disk = tempfile::tempdir().unwrap();
    let statements: Vec<String> = [
        "version?",
        "status?",
        "mode?",
        "threads?",
        "net_protocol?",
        "net_port?",
        "mtu?",
        "ipd?",
        "record?",
        "record_format?",
        "set_disks?",
        "net2file?",
        "net2net?",
        "fill2net?",
        "evlbi?",
        "tstat?",
        "tstat",
        "evlbi = %t",
        "mode = VDIF_8000-1024-16-2",
        "mode = garbage",
        "threads = 4",
        "threads = 0",
        "net_protocol = udps : 1M",
        "net_protocol = tcp",
        "net_port = 1",
        "net_port = 99999",
        "mtu = 64",
        "mtu = 9000",
        "ipd = 10",
        "ipd = -5",
        "record = on : another_scan",
        "record = on",
        "record = mk6 : 1",
        "record = bogus",
        "record_format = mk6",
        "record_format = vbs",
        "record_format = nonsense",
        "set_disks = /nonexistent",
        "net2file = open : x.vdif",
        "net2file = close",
        "net2net = connect : 127.0.0.1 : 9",
        "net2net = on",
        "net2net = off",
        "fill2net = connect : 127.0.0.1 : 9",
        "fill2net = on",
        "fill2net = off",
        "nosuchkeyword = 1",
        "nosuchkeyword?",
        "record? mk6",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("set_disks = {}", other_disk.path().display())])
    .collect();
    let mut meddler = Vsi::connect(serve.vsi);
    let mut answers = Vec::new();
    // Every statement, ten times over while the scan runs, one by one and all on one line.
    for _ in 0..10 {
        for s in &statements {
            answers.push((s.clone(), meddler.raw(&format!("{s} ;\n"))));
        }
        // All on one line: answered in one reply line or several (the daemon answers what it
        // has read up to a `;` at once, as jive5ab does).
        let all = statements.join(" ; ");
        let mut replies = meddler.raw(&format!("{all} ;\n"));
        while replies.matches('!').count() < statements.len() {
            let mut more = String::new();
            assert!(meddler.r.read_line(&mut more).unwrap() > 0, "closed: {replies}");
            replies.push_str(&more);
        }
        assert_eq!(replies.matches('!').count(), statements.len(), "{replies}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(fs.ok("record? ;")[..3], ["on", "1", "busy_scan"]);
    let (frames_sent, injected) = sent(sender);
    let (total, loss) = settled(&mut fs);
    fs.ok("record = off ;");
    let (valid, filled) = frames_of(&recording(root.path(), "busy_scan"));
    eprintln!(
        "busy scan: {frames_sent} frames sent; evlbi? total {total} loss {loss}; recording {valid} valid + {filled} filled; \
         {} statements meddled",
        answers.len() * 2
    );
    // Every statement was answered, none with a crash of the connection.
    assert!(answers.iter().all(|(_, a)| a.starts_with('!')), "{answers:?}");
    assert_eq!(injected, 0);
    assert_eq!((total, loss), (frames_sent, 0), "the scan lost frames to the meddler");
    assert_eq!((valid, filled), (frames_sent, 0));
    // Nothing else was recorded.
    let dirs: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(dirs, ["busy_scan"], "{dirs:?}");
    let _ = serve.stop();
}

/// `--vsi-allow` over real addresses (a network namespace of the test's own: the daemon on
/// 10.88.0.1, the FS on 10.88.0.2, allowed, a stranger on 10.88.0.3): the FS is answered, the
/// stranger is closed without an answer, and a flood of 3000 idle connections a second from the
/// stranger never closes the FS's connection while it thinks for 2 s.
#[test]
fn only_allowed_peers_are_answered_and_a_strangers_flood_never_closes_the_fs() {
    use testkit::netns::Netns;
    if let Some(why) = Netns::skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let [daemon, fs_ip, stranger]: [IpAddr; 3] = ["10.88.0.1", "10.88.0.2", "10.88.0.3"].map(|a| a.parse().unwrap());
    let ns = Netns::create("vsiallow", &[daemon, fs_ip, stranger]).unwrap();
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start_with(
        ns.command(env!("CARGO_BIN_EXE_evlbi")),
        root.path(),
        "10.88.0.1:0",
        &["--vsi-allow", "10.88.0.2"],
    );
    let vsi = serve.vsi;
    let path = ns.path();
    // Clients run on threads inside the namespace.
    let from = move |ip: IpAddr, think: Duration| {
        let path = path.clone();
        std::thread::spawn(move || {
            testkit::netns::enter(&path).unwrap();
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.bind(&SocketAddr::new(ip, 0).into()).unwrap();
            s.connect_timeout(&vsi.into(), Duration::from_secs(10)).unwrap();
            let s: TcpStream = s.into();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            std::thread::sleep(think);
            let _ = (&s).write_all(b"version?;\n");
            let mut line = String::new();
            let _ = BufReader::new(&s).read_line(&mut line);
            line
        })
    };
    let fs_reply = from(fs_ip, Duration::ZERO).join().unwrap();
    assert!(fs_reply.starts_with("!version? 0 : evlbi"), "{fs_reply:?}");
    let stranger_reply = from(stranger, Duration::ZERO).join().unwrap();
    assert_eq!(stranger_reply, "", "the stranger was answered");
    let flood = Flood::start_in(
        Some(ns.path()),
        vsi,
        stranger,
        3000,
        Duration::from_secs(3),
        Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_millis(500));
    let thinking: Vec<_> = (0..3).map(|_| from(fs_ip, Duration::from_secs(2))).collect();
    let replies: Vec<String> = thinking.into_iter().map(|t| t.join().unwrap()).collect();
    let report = flood.finish();
    let log = serve.stop();
    eprintln!(
        "FS under the stranger's flood: {replies:?}; flood {report:?} ({:.0}/s); {log:?}",
        report.rate()
    );
    assert!(report.connected > 3000, "the flood ran: {report:?}");
    for r in &replies {
        assert!(r.starts_with("!version? 0 : evlbi"), "{replies:?}");
    }
}

/// The daemon's peak resident memory, kB (VmHWM of /proc/PID/status).
fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// While a scan records, 30 clients each send eight 1 MB lines (no newline inside), then lines
/// of 4 KB holding hundreds of statements, as fast as the daemon takes them: every client gets
/// one answer per line, the FS's session is answered throughout, the scan records every frame,
/// and the daemon's memory does not grow with the lines (a line costs at most 4 KB held).
#[test]
fn megabyte_lines_from_thirty_clients_cost_the_scan_nothing_and_no_memory() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let pid = serve.proc.0.id();
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok("net_protocol = udps : 64M ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("record = on : long_lines ;");
    let sender = backend_sim(port, "5s", &[]);
    std::thread::sleep(Duration::from_millis(500));
    let before = peak_rss_kb(pid);
    let vsi = serve.vsi;
    let clients: Vec<_> = (0..30)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Vsi::connect(vsi);
                // A statement first, so the client is a session and no idle-connection rule
                // plays a part: the lines themselves are the attack.
                assert!(c.raw("version?;\n").starts_with("!version? 0"));
                let mut mb = vec![b'a' + (i % 26) as u8; 1 << 20];
                mb.push(b'\n');
                let mut overlong = 0;
                for _ in 0..8 {
                    let reply = c.raw(std::str::from_utf8(&mb).unwrap());
                    overlong += usize::from(reply.contains("line longer than"));
                }
                let many = format!("{}\n", "status?;".repeat(500));
                let mut answered = 0;
                // The daemon answers what it has read up to a `;` at once (as jive5ab does), so
                // one request line may come back as several reply lines: count statements.
                for _ in 0..20 {
                    c.w.write_all(many.as_bytes()).unwrap();
                    let mut got = 0;
                    while got < 500 {
                        let mut line = String::new();
                        assert!(c.r.read_line(&mut line).unwrap() > 0, "closed after {got} replies");
                        got += line.matches("!status? 0").count();
                    }
                    answered += got;
                }
                (overlong, answered)
            })
        })
        .collect();
    // The FS's session meanwhile.
    let mut fs_answers = 0;
    while clients.iter().any(|c| !c.is_finished()) {
        assert_eq!(fs.ok("record? ;")[0], "on");
        fs_answers += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let outcomes: Vec<(usize, usize)> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let after = peak_rss_kb(pid);
    let (frames_sent, _) = sent(sender);
    let (total, loss) = settled(&mut fs);
    fs.ok("record = off ;");
    let (valid, filled) = frames_of(&recording(root.path(), "long_lines"));
    eprintln!(
        "long lines: {} MB sent by 30 clients; FS answered {fs_answers} times; peak RSS {before} kB -> {after} kB; \
         scan {frames_sent} sent, {valid} valid + {filled} filled",
        30 * 8
    );
    assert!(outcomes.iter().all(|&o| o == (8, 20 * 500)), "{outcomes:?}");
    assert!(fs_answers > 0);
    assert_eq!((total, loss), (frames_sent, 0));
    assert_eq!((valid, filled), (frames_sent, 0));
    // 240 MB of lines went through: the daemon held none of them.
    assert!(
        after < before + 32 * 1024,
        "peak RSS grew from {before} kB to {after} kB"
    );
    let _ = serve.stop();
}

/// Every file below `dir`, recursively (links not followed).
fn files_below(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    for _ in 0..10_000 {
        let Some(d) = todo.pop() else { break };
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                todo.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

/// A disk swapped for a link to elsewhere between `set_disks` and `record = on` (someone with
/// write access to the disks' parent directory). Before, the writers opened the disks by path at
/// `record = on` and followed the link: the scan's chunks were written outside every allowed
/// directory. Now the daemon opens the disks again at `record = on` below its roots, through no
/// link, and hands those handles to the writers (a writer process inherits its disk's
/// descriptor): the swapped disk leaves the set with an error the FS sees, the scan records whole
/// on the other disk, and a disk renamed away while recording keeps its chunks.
#[test]
fn a_disk_swapped_for_a_link_after_set_disks_receives_nothing() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (d0, d1) = (root.path().join("disk0"), root.path().join("disk1"));
    std::fs::create_dir_all(&d0).unwrap();
    std::fs::create_dir_all(&d1).unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok("net_protocol = udps : 64M : 4M ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok(&format!("set_disks = {} : {} ;", d0.display(), d1.display()));
    // The swap.
    std::fs::rename(&d1, root.path().join("disk1.old")).unwrap();
    std::os::unix::fs::symlink(outside.path(), &d1).unwrap();
    let status = fs.ok("status? ;");
    assert_eq!(status[0], "0x00000001", "nothing queued yet");
    fs.ok("record = on : swapped ;");
    // The error is where the FS looks.
    let status = fs.ok("status? ;");
    let word = u32::from_str_radix(status[0].trim_start_matches("0x"), 16).unwrap();
    assert_eq!(word & 0x2, 0x2, "error bit: {status:?}");
    let err = fs.ok("error? ;");
    assert!(
        err.iter().any(|f| f.contains("disk1") && f.contains("left out")),
        "{err:?}"
    );
    let sender = backend_sim(port, "2s", &[]);
    // While recording, disk0 is renamed away (and an empty directory put in its place): its
    // writer keeps writing into the directory it opened.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::rename(&d0, root.path().join("disk0.moved")).unwrap();
    std::fs::create_dir(&d0).unwrap();
    let (frames_sent, _) = sent(sender);
    let (total, loss) = settled(&mut fs);
    fs.ok("record = off ;");
    assert_eq!((total, loss), (frames_sent, 0));
    assert_eq!(fs.ok("set_disks? ;"), ["1", &d0.display().to_string()]);
    let log = serve.stop();
    assert!(
        files_below(outside.path()).is_empty(),
        "written outside: {:?}",
        files_below(outside.path())
    );
    assert!(files_below(&d0).is_empty(), "the new disk0 got {:?}", files_below(&d0));
    assert!(files_below(&root.path().join("disk1.old")).is_empty());
    let moved = files_below(&root.path().join("disk0.moved"));
    let bytes: u64 = moved.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
    assert_eq!(bytes, frames_sent * 8032, "{moved:?}\n{log:?}");
}

/// The same swap, for reading: a recording outside every allowed directory reached through a
/// disk swapped for a link after `set_disks`. Before, `scan_set`, `scan_check?` and
/// `disk2file` opened the disks by path and followed the link: the daemon served (and copied
/// below its root) a file of someone else's. Now it reads through the disks it opens below its
/// roots through no link, as the recorder writes: the swapped disk holds nothing it will read.
#[test]
fn a_disk_swapped_for_a_link_after_set_disks_serves_nothing_from_outside() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    // A vbs recording outside the roots: one chunk of real VDIF.
    let (ef, _) = common::gen_two_stations(outside.path(), &[]);
    let secret = outside.path().join("store").join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::copy(&ef, secret.join("secret.00000000")).unwrap();
    let d1 = root.path().join("disk1");
    std::fs::create_dir_all(&d1).unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok(&format!("set_disks = {} ;", d1.display()));
    // The swap.
    std::fs::rename(&d1, root.path().join("disk1.old")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("store"), &d1).unwrap();
    let r = fs.ask("scan_set = secret ;");
    assert_ne!(
        r.code,
        vsis::ReturnCode::Done,
        "the recording behind the link was opened: {r}"
    );
    assert!(r.to_string().contains("does not exist"), "{r}");
    let r = fs.ask("scan_check? ;");
    assert!(!r.to_string().contains("secret : VDIF"), "{r}");
    drop(fs);
    let _ = serve.stop();
    // Nothing of it was copied below the root.
    let copied: Vec<_> = files_below(root.path())
        .into_iter()
        .filter(|f| std::fs::read(f).is_ok_and(|b| b.len() > 1000))
        .collect();
    assert!(copied.is_empty(), "{copied:?}");
}
