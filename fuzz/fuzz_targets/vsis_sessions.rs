//! VSI-S statement sequences against `evlbi serve`'s daemon with a real recording on a real
//! disk (issue 36: `scan_set` past the end then `data_check?` panicked a connection thread;
//! `disk2file` truncated the scan it read). The input is what a client sends: its statements
//! run one after the other on one daemon that starts each run with the disk set and the scan
//! pointed at. Every statement gets a reply that parses back, none fails inside the daemon (a
//! caught panic answers "internal error"; libFuzzer's hook aborts on the panic itself anyway),
//! the scan pointer stays inside the scan, and the recording keeps every byte. Statements that
//! would open sockets (`record = on`, `net2file`, `net2net`, `fill2net`) are left out: their
//! sequences run in the socket tests; everything they share with the read-back runs here.
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use daemon::paths::StationPaths;
use daemon::sessions::TransferEnv;
use daemon::Daemon;
use libfuzzer_sys::fuzz_target;
use vsis::statement::split_request;
use vsis::{ReplyRepr, ReturnCode};

const FRAME: usize = 1032;
const FPS: u32 = 1000;
const SECONDS: u32 = 2;

/// The station: `<root>/disk0/fz/fz.00000000` (2 s of one thread, 1000 frames/s), `<root>/out`.
struct Station {
    root: PathBuf,
    chunk: PathBuf,
    bytes: Vec<u8>,
}

fn station() -> &'static Station {
    static S: OnceLock<Station> = OnceLock::new();
    S.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        // Stations of runs that have ended (no such process any more) are removed first.
        for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("evlbi-fuzz-vsis-") {
                if !std::path::Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let root = base.join(format!("evlbi-fuzz-vsis-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("disk0/fz")).unwrap();
        std::fs::create_dir_all(root.join("out")).unwrap();
        let layout = vdif::layout::FrameLayout::new(8e6, 2, 8, 1, FRAME - 32).unwrap();
        let (epoch, start) = vdif::time::to_epoch(1_795_475_830).unwrap();
        let mut bytes = Vec::new();
        for s in 0..SECONDS {
            for n in 0..FPS {
                let mut h = layout.header(u16::from_be_bytes(*b"Ef"));
                h.ref_epoch = epoch;
                h.seconds = start + s;
                h.frame_number = n;
                bytes.extend(h.to_bytes().unwrap());
                bytes.resize(bytes.len() + FRAME - 32, 0x5a);
            }
        }
        let chunk = root.join("disk0/fz/fz.00000000");
        std::fs::write(&chunk, &bytes).unwrap();
        Station { root, chunk, bytes }
    })
}

/// Statements that open sockets or start recordings.
fn opens_sockets(keyword: &str, query: bool) -> bool {
    !query && matches!(keyword, "record" | "net2file" | "net2net" | "fill2net")
}

/// Everything below the station's root but the recording, removed (what copies wrote).
fn clean(dir: &std::path::Path, keep: &std::path::Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => clean(&p, keep),
            _ if p != keep => {
                let _ = std::fs::remove_file(&p);
            }
            _ => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let st = station();
    let env = TransferEnv {
        paths: StationPaths::new(&[st.root.clone()], &[]).unwrap(),
        writer: recording::write::WriterPlacement::Thread,
        interval: Duration::from_millis(100),
    };
    let d = Daemon::new(env, "0", metrics::Hub::new("serve", "0")).unwrap();
    let setup = format!("set_disks = {}/disk0 ; scan_set = fz ;", st.root.display());
    let mut statements: Vec<_> = split_request(setup.as_bytes()).into_iter().flatten().collect();
    statements.extend(split_request(data).into_iter().flatten().take(64));
    let query = split_request(b"scan_set?;").into_iter().flatten().next().unwrap();
    for s in statements {
        if opens_sockets(&s.keyword, s.query) {
            continue;
        }
        let r = d.execute(&s);
        let text = r.to_string();
        assert_eq!(ReplyRepr::parse(text.as_bytes()).as_ref(), Ok(&r), "{text}");
        assert!(
            !(r.code == ReturnCode::Failed && r.fields.first().is_some_and(|f| f.starts_with("internal error"))),
            "{text}"
        );
        let q = d.execute(&query);
        if q.fields.get(1).map(String::as_str) == Some("fz") {
            let start: u64 = q.fields[2].parse().unwrap();
            let end: u64 = q.fields[3].parse().unwrap();
            let len = st.bytes.len() as u64;
            assert!(start < len && (end == 0 || (start < end && end <= len)), "{q} after {text}");
        }
    }
    let _ = d.shutdown();
    let now = std::fs::read(&st.chunk).unwrap();
    assert!(now == st.bytes, "the recording changed: {} bytes", now.len());
    clean(&st.root, &st.chunk);
});
