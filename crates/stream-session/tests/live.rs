//! The live output over a real unix socket: a reader that speaks SFXC's `mk5://` request gets
//! the frames in order from a time step; a second reader is closed at once; a reader that does
//! not read costs counted drops while the producer never waits; the socket's path is checked.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stream_session::live::sfxc::{SfxcAddr, SfxcError, SfxcListener};
use stream_session::live::{LiveOutput, StartRule};

const FRAME: usize = 1032;

/// A VDIF frame of second `sec`, frame `n`, thread `thread`: 32-byte header, data all `fill`.
fn frame(sec: u32, n: u32, thread: u16, fill: u8) -> Vec<u8> {
    let mut f = vec![fill; FRAME];
    f[..4].copy_from_slice(&sec.to_le_bytes());
    f[4..8].copy_from_slice(&((50u32 << 24) | n).to_le_bytes());
    f[8..12].copy_from_slice(&((FRAME / 8) as u32).to_le_bytes());
    f[12..16].copy_from_slice(&(u32::from(thread) << 16).to_le_bytes());
    f
}

fn listener(dir: &std::path::Path, name: &str) -> Result<SfxcListener, SfxcError> {
    let d = Arc::new(safedir::Dir::open(dir).unwrap());
    SfxcListener::bind(SfxcAddr::Unix {
        dir: d,
        name: name.into(),
    })
}

/// Connect as SFXC does and send its 24-byte request.
fn sfxc_reader(path: &std::path::Path) -> UnixStream {
    let mut s = UnixStream::connect(path).unwrap();
    let mut req = [0u8; 24];
    req[..5].copy_from_slice(b"EF001");
    s.write_all(&req).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Wait (bounded) until `f` holds.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(20), "{what}: timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_reader_gets_frames_from_a_time_step_in_order_and_a_second_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let l = listener(t.path(), "mk5read").unwrap();
    let mut out = LiveOutput::start(Box::new(l), None, 1 << 20, StartRule::default()).unwrap();
    assert!(out.takes(vdif::StationId(0x4566)));
    // Before any reader: not kept.
    out.frame(&frame(10, 0, 0, 1), false);
    out.frame(&frame(10, 1, 0, 1), false);
    out.flush();
    let mut r = sfxc_reader(&t.path().join("mk5read"));
    until("connected", || out.status().connected);
    // The reader came in the middle of step 1: it starts at step 2 (thread 0).
    out.frame(&frame(10, 1, 1, 2), false);
    let mut sent = Vec::new();
    for n in 2..6 {
        for th in 0..2 {
            let mut f = frame(10, n, th, n as u8);
            if n == 3 && th == 1 {
                // A filled frame: header with the invalid bit, the fill pattern as data.
                f[3] |= 0x80;
                stream::feed::fill_data(&mut f, 32);
                out.frame(&f, true);
            } else {
                out.frame(&f, false);
            }
            sent.extend_from_slice(&f);
        }
    }
    // A frame behind the last is never sent.
    out.frame(&frame(10, 4, 0, 9), false);
    out.flush();
    let mut got = vec![0u8; sent.len()];
    r.read_exact(&mut got).unwrap();
    assert!(
        got == sent,
        "the reader gets exactly the frames from step 2 on, the filled one whole"
    );
    // A second reader is closed at once (it reads EOF, or a reset: its request was not read).
    let mut second = sfxc_reader(&t.path().join("mk5read"));
    let mut b = [0u8; 1];
    match second.read(&mut b) {
        Ok(n) => assert_eq!(n, 0),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
    }
    until("refused counted", || out.status().clients_refused == 1);
    let s = out.finish(Duration::from_millis(100));
    assert_eq!(
        (
            s.frames_in,
            s.frames_sent,
            s.filled_sent,
            s.dropped_no_reader,
            s.skipped_at_start,
            s.behind
        ),
        (12, 8, 1, 2, 1, 1)
    );
    assert_eq!(s.clients, 1);
    assert!(!t.path().join("mk5read").exists(), "the socket is removed at the end");
}

#[test]
fn a_reader_that_does_not_read_costs_counted_drops_never_a_wait() {
    let t = tempfile::tempdir().unwrap();
    let l = listener(t.path(), "slow").unwrap();
    let mut out = LiveOutput::start(Box::new(l), None, 2 << 20, StartRule::default()).unwrap();
    let r = sfxc_reader(&t.path().join("slow"));
    until("connected", || out.status().connected);
    // 200 MB offered to a reader that reads nothing: the producer goes on (bounded in time by
    // the test's own deadline) and the excess is counted.
    let t0 = Instant::now();
    let n = 200_000u32;
    for i in 0..n {
        out.frame(&frame(100 + i / 1000, i % 1000, 0, 7), false);
        if i % 64 == 63 {
            out.flush();
        }
    }
    out.flush();
    assert!(t0.elapsed() < Duration::from_secs(60), "the producer was held up");
    let s = out.status();
    assert!(s.dropped_slow_reader > 0, "{s:?}");
    assert!(s.queued_peak_bytes <= 2 << 20, "{s:?}");
    drop(r);
    let s = out.finish(Duration::from_millis(100));
    assert_eq!(
        s.frames_in,
        s.frames_sent + s.dropped_slow_reader + s.skipped_at_start,
        "every frame counted once: {s:?}"
    );
}

#[test]
fn a_socket_path_in_use_or_not_a_socket_is_refused_and_a_stale_one_replaced() {
    let t = tempfile::tempdir().unwrap();
    // A file and a link at the name are left alone.
    std::fs::write(t.path().join("file"), b"keep").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", t.path().join("link")).unwrap();
    for name in ["file", "link"] {
        let e = listener(t.path(), name).err().expect("refused");
        assert!(matches!(e, SfxcError::NotASocket(_)), "{name}: {e}");
    }
    assert_eq!(std::fs::read(t.path().join("file")).unwrap(), b"keep");
    assert!(std::fs::symlink_metadata(t.path().join("link"))
        .unwrap()
        .file_type()
        .is_symlink());
    // A socket someone listens on is in use.
    let live = std::os::unix::net::UnixListener::bind(t.path().join("busy")).unwrap();
    let e = listener(t.path(), "busy").err().expect("refused");
    assert!(matches!(e, SfxcError::InUse(_)), "{e}");
    drop(live);
    // The same socket left behind (nobody listens) is replaced.
    assert!(t.path().join("busy").exists());
    let l = listener(t.path(), "busy").unwrap();
    drop(l);
    // A name with a slash is no name in the directory.
    assert!(listener(t.path(), "../x").is_err());
}
