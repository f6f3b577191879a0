//! The control port in-process over 127.0.0.1 with small limits: garbage is answered but never
//! makes a session (it is closed at its deadline), sessions are capped (the next one is told
//! the server is busy), and a closed session frees its place.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use daemon::sessions::TransferEnv;
use daemon::vsi::{serve, VsiLimits};
use daemon::Daemon;

struct Running {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    _root: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start(limits: VsiLimits) -> Running {
    let root = tempfile::tempdir().unwrap();
    let env = TransferEnv {
        paths: daemon::paths::StationPaths::new(&[root.path().to_path_buf()], &[]).unwrap(),
        writer: recording::write::WriterPlacement::Thread,
        interval: Duration::from_millis(100),
    };
    let daemon = Daemon::new(env, "0", metrics::Hub::new("serve", "0")).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::spawn(move || {
        serve(&listener, &daemon, &limits, &flag).unwrap();
    });
    Running {
        addr,
        stop,
        thread: Some(thread),
        _root: root,
    }
}

fn line(r: &mut BufReader<TcpStream>) -> String {
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    l
}

fn client(addr: SocketAddr) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let r = BufReader::new(s.try_clone().unwrap());
    (s, r)
}

#[test]
fn garbage_is_answered_but_makes_no_session() {
    let d = start(VsiLimits {
        pending: 4,
        first_request: Duration::from_millis(800),
        sessions: 1,
        ..VsiLimits::default()
    });
    let (mut g, mut gr) = client(d.addr);
    g.write_all(b"bar;=3;\n").unwrap();
    assert_eq!(
        line(&mut gr),
        "!syntax = 7 : Not a command or query ;!syntax = 7 : No keyword given ;\n"
    );
    // Still pending: the one session place is free for a real client.
    let (mut fs, mut fr) = client(d.addr);
    fs.write_all(b"mtu?;\n").unwrap();
    assert_eq!(line(&mut fr), "!mtu? 0 : 1500 ;\n");
    // The garbage client is closed at its deadline; the session stays.
    let mut rest = Vec::new();
    assert_eq!(gr.read_to_end(&mut rest).unwrap_or(0), 0);
    std::thread::sleep(Duration::from_millis(900));
    fs.write_all(b"record?;\n").unwrap();
    assert_eq!(line(&mut fr), "!record? 0 : off ;\n");
}

#[test]
fn sessions_are_capped_and_freed() {
    let d = start(VsiLimits {
        pending: 4,
        first_request: Duration::from_millis(500),
        sessions: 1,
        ..VsiLimits::default()
    });
    let (mut a, mut ar) = client(d.addr);
    a.write_all(b"version?;\n").unwrap();
    assert!(line(&mut ar).starts_with("!version? 0 : evlbi"));
    // A second session waits for a place until its deadline, then is told the server is busy.
    let (mut b, mut br) = client(d.addr);
    b.write_all(b"version?;\n").unwrap();
    let busy = line(&mut br);
    assert!(busy.starts_with("!syntax = 5 : the server is busy"), "{busy}");
    // Once the first closes, a new one gets in.
    drop(a);
    drop(ar);
    std::thread::sleep(Duration::from_millis(300));
    let (mut c, mut cr) = client(d.addr);
    c.write_all(b"version?;\n").unwrap();
    assert!(line(&mut cr).starts_with("!version? 0 : evlbi"));
}

#[test]
fn a_scan_set_name_no_recording_can_have_is_refused_where_it_enters_and_is_not_remembered_as_a_search() {
    let d = start(VsiLimits::default());
    let (mut s, mut r) = client(d.addr);
    let mut say = |statement: &str| {
        s.write_all(format!("{statement}\n").as_bytes()).unwrap();
        line(&mut r)
    };
    // Names no recording can have (a dot, a path, a space inside the field) are the statement's
    // parameter error, 8, with the rule a name must meet (its `:` shown as `.`, VSI-S field rule).
    for bad in ["a.b", "../x", "x/y"] {
        let reply = say(&format!("scan_set = {bad} ;"));
        assert!(
            reply.starts_with(&format!("!scan_set = 8 : scan name \"{bad}\". use 1 to 128")),
            "{bad}: {reply}"
        );
    }
    // Refused before it became this session's search string: `next` has none to repeat
    // (jive5ab's words and code). It was remembered, and answered 8 again, before.
    let reply = say("scan_set = next ;");
    assert!(
        reply.starts_with("!scan_set = 4 : no search string given yet"),
        "{reply}"
    );
    // A name a recording can have, longer than a new scan's label may be (a label, its letter
    // and `_ds<stream>`): looked for on the disks, as jive5ab does.
    let long = format!("{}a_ds{}", "l".repeat(scanfmt::name::MAX_LABEL), "s".repeat(32));
    assert_eq!(long.len(), scanfmt::name::MAX_NAME);
    let reply = say(&format!("scan_set = {long} ;"));
    assert!(
        reply.starts_with(&format!("!scan_set = 4 : '{long}' does not exist in Mk6/VBS format")),
        "{reply}"
    );
    let reply = say("scan_set = next ;");
    assert!(reply.contains("does not exist in Mk6/VBS format"), "{reply}");
}
