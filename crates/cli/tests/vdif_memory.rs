//! Memory stays bounded whatever `evlbi vdif` reads (issue 20). In a test binary of its own:
//! a child's peak RSS as wait4 reports it includes the RSS of the process that spawned it
//! (the kernel carries the parent's high-water mark over the exec of a vfork child), so the
//! parent here must stay small for the figure to bound the child's.

// unsafe: wait4(2)'s rusage: a child's peak memory; std cannot ask.
#![allow(unsafe_code)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Peak RSS of a child process, read from wait4's rusage (KiB), with a deadline.
// The child is reaped by wait4 (which std's Child cannot see), or killed and waited for.
#[allow(clippy::zombie_processes)]
fn run_measuring_rss(args: &[&str], deadline: Duration) -> (i32, i64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_evlbi"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain old data, for which all-zero bytes are a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: plain FFI call with valid pointers to locals; pid is our own child.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            return (libc::WEXITSTATUS(status), usage.ru_maxrss);
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} did not finish within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Memory stays bounded whatever the input: 256 MB of zeros (one byte of memory per byte of
/// garbage before) are read in a few MB by inspect, stats and dump.
#[test]
fn zeros_take_bounded_memory() {
    let d = tempfile::tempdir().unwrap();
    let zeros = d.path().join("zeros.bin");
    std::fs::File::create(&zeros).unwrap().set_len(256 << 20).unwrap();
    for cmd in [
        &["inspect"][..],
        &["stats"],
        &["dump", "--headers-only", "--frames", "10"],
    ] {
        let mut args = vec!["vdif"];
        args.extend_from_slice(cmd);
        args.push(p(&zeros));
        let (code, rss_kib) = run_measuring_rss(&args, Duration::from_secs(120));
        assert_eq!(code, 1, "{cmd:?}");
        assert!(rss_kib < 64 << 10, "{cmd:?}: peak RSS {rss_kib} KiB");
    }
}
