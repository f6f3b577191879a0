//! Cross-check with an independent implementation: jive5ab reads the vbs and Mark6 scans evlbi
//! records (`scan_set=` + `disk2file=`), and evlbi reads the ones jive5ab records from evlbi's
//! udps stream (`record=on`), byte for byte. Needs the jive5ab binary (the one
//! `scripts/jive5ab-path` finds: $JIVE5AB, or the build `scripts/setup.sh` caches) and /dev/shm
//! (jive5ab records only on mount points off the root file system); skipped with a message
//! otherwise, which `scripts/test.sh` repeats in its summary.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{bin, free_udp_port, Jive5ab};

const FRAME: usize = 8032;

fn jive5ab() -> Option<PathBuf> {
    common::jive5ab_path().filter(|_| Path::new("/dev/shm").is_dir())
}

fn generate(dir: &Path) -> PathBuf {
    let out = bin()
        .args([
            "vdif",
            "gen",
            "--stations",
            "Ef",
            "--threads",
            "2",
            "--rate",
            "128M",
            "--seconds",
            "2",
            "-q",
        ])
        .args(["--start", "2026-11-23T12:00:00Z", "--out"])
        .arg(dir.join("in"))
        .output()
        .unwrap();
    assert!(out.status.success());
    dir.join("in/Ef.vdif")
}

fn disks(root: &Path) -> Vec<PathBuf> {
    (0..3)
        .map(|i| {
            let d = root.join(format!("d{i}"));
            std::fs::create_dir_all(&d).unwrap();
            d
        })
        .collect()
}

fn colon(d: &[PathBuf]) -> String {
    d.iter().map(|p| p.to_str().unwrap()).collect::<Vec<_>>().join(":")
}

#[test]
fn jive5ab_reads_what_evlbi_records_and_evlbi_what_jive5ab_records() {
    let Some(j5) = jive5ab() else {
        eprintln!("SKIPPED: no jive5ab binary (run scripts/setup.sh, or set JIVE5AB) or no /dev/shm");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = generate(tmp.path());
    let sent = std::fs::read(&file).unwrap();
    // One daemon for both layouts, the vbs scan first. jive5ab 3.1.0 scans a Mark6 recording with
    // a thread per disk, and each thread adds the recording's data-stream label (`_dsEf`) to one
    // static map unguarded (libvbs.cc, getDataStreamId); two threads adding the same label at once
    // end the daemon ("terminate called after throwing … std::string", seen once in CI on
    // `scan_set=ev_dsEf;` over three disks). Its vbs scan is serial and enters the label first, so
    // the Mark6 threads only look it up.
    let j = Jive5ab::start(&j5);
    for layout in ["vbs", "mk6"] {
        // evlbi records; jive5ab reads.
        let shm = tempfile::Builder::new().tempdir_in("/dev/shm").unwrap();
        let d = disks(shm.path());
        let joined = d.iter().map(|p| p.to_str().unwrap()).collect::<Vec<_>>().join(",");
        let rx = common::StreamRecv::start(&["--format", layout, "--disks", &joined, "--scan", "ev", "--block", "1M"]);
        let out = bin()
            .args(["stream", "send", "--to", &format!("127.0.0.1:{}", rx.port)])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success());
        let (st, log) = rx.wait();
        assert!(st.success(), "{log}");
        let back = tmp.path().join(format!("j5-{layout}.vdif"));
        let replies = j.vsi(&[
            &format!("set_disks={};", colon(&d)),
            "mode=VDIF_8000-128-8-2;",
            "scan_set=ev_dsEf;",
            "scan_check?;",
            &format!("disk2file={}:::w;", back.display()),
        ]);
        assert!(replies[3].contains("ev_dsEf : VDIF"), "{layout}: {replies:?}");
        j.until_inactive("disk2file?;");
        let got = std::fs::read(&back).unwrap();
        assert_eq!(got.len(), sent.len(), "{layout}: jive5ab read {} bytes", got.len());
        assert!(got == sent, "{layout}: jive5ab reads evlbi's recording differently");

        // jive5ab records evlbi's udps stream; evlbi reads.
        let shm = tempfile::Builder::new().tempdir_in("/dev/shm").unwrap();
        let d = disks(shm.path());
        let data_port = free_udp_port();
        let replies = j.vsi(&[
            "net_protocol=udps:64M:8M:4;",
            "mtu=9000;",
            "mode=VDIF_8000-128-8-2;",
            &format!("net_port={data_port};"),
            &format!("set_disks={};", colon(&d)),
            &format!("record=mk6:{};", u8::from(layout == "mk6")),
            "record=on:j5;",
        ]);
        assert!(
            replies.iter().all(|r| r.contains("= 0") || r.contains("=  0")),
            "{replies:?}"
        );
        let out = bin()
            .args([
                "stream",
                "send",
                "--seq-format",
                "jive5ab",
                "--to",
                &format!("127.0.0.1:{data_port}"),
            ])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success());
        std::thread::sleep(Duration::from_millis(500));
        j.vsi(&["record=off;"]);
        j.until_inactive("record?;");
        let glob = format!("{}/d*", shm.path().display());
        let g = tmp.path().join(format!("ev-{layout}.vdif"));
        let o = bin()
            .args(["vdif", "gather", "--disks", &glob, &format!("{layout}://j5"), "-o"])
            .arg(&g)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got = std::fs::read(&g).unwrap();
        assert_eq!(got.len() % FRAME, 0);
        assert!(
            got == sent,
            "{layout}: evlbi reads jive5ab's recording differently ({} bytes)",
            got.len()
        );
    }
}
