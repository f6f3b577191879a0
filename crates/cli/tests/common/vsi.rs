//! `evlbi serve` as a child process and a VSI-S client that talks to it line by line, as the
//! Field System does.

// unsafe: kill(2) of the daemons the tests started: std signals only SIGKILL.
#![allow(unsafe_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use vsis::{ReplyRepr, ReturnCode};

use super::{bin, Proc};

/// A control connection speaking VSI-S line by line, as the FS does.
pub struct Vsi {
    pub w: TcpStream,
    pub r: BufReader<TcpStream>,
}

impl Vsi {
    pub fn connect(addr: SocketAddr) -> Vsi {
        let w = TcpStream::connect(addr).unwrap();
        w.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Vsi {
            r: BufReader::new(w.try_clone().unwrap()),
            w,
        }
    }

    /// Send one request line, read the reply line.
    pub fn raw(&mut self, line: &str) -> String {
        self.w.write_all(line.as_bytes()).unwrap();
        let mut reply = String::new();
        self.r.read_line(&mut reply).unwrap();
        reply
    }

    /// Send `statement` (one), return its parsed reply.
    pub fn ask(&mut self, statement: &str) -> ReplyRepr {
        let reply = self.raw(&format!("{statement}\n"));
        let mut all = ReplyRepr::parse_all(reply.as_bytes()).unwrap_or_else(|e| panic!("{reply:?}: {e}"));
        assert_eq!(all.len(), 1, "{statement} -> {reply:?}");
        all.remove(0)
    }

    /// `statement` must succeed (return code 0); its fields.
    pub fn ok(&mut self, statement: &str) -> Vec<String> {
        let r = self.ask(statement);
        assert_eq!(r.code, ReturnCode::Done, "{statement} -> {r}");
        r.fields
    }
}

/// `evlbi serve` on free ports with recordings below a root; its VSI-S and metrics addresses.
pub struct Serve {
    pub proc: Proc,
    pub vsi: SocketAddr,
    pub metrics: SocketAddr,
    pub log: std::sync::mpsc::Receiver<String>,
}

impl Serve {
    /// Started with `extra` options, the control port on `vsi_listen`.
    pub fn start(root: &Path, vsi_listen: &str, extra: &[&str]) -> Serve {
        Serve::start_with(bin(), root, vsi_listen, extra)
    }

    /// [`Serve::start`] with `evlbi` run by `evlbi` (e.g. inside a network namespace).
    pub fn start_with(evlbi: std::process::Command, root: &Path, vsi_listen: &str, extra: &[&str]) -> Serve {
        Serve::start_metrics_on(evlbi, root, vsi_listen, "127.0.0.1:0", extra)
    }

    /// [`Serve::start_with`] with its metrics on `metrics_listen` (e.g. an address a
    /// Prometheus in another namespace reaches).
    pub fn start_metrics_on(
        mut evlbi: std::process::Command,
        root: &Path,
        vsi_listen: &str,
        metrics_listen: &str,
        extra: &[&str],
    ) -> Serve {
        let mut child = evlbi
            .args([
                "serve",
                "--vsi",
                vsi_listen,
                "--metrics",
                metrics_listen,
                "--interval",
                "200ms",
            ])
            .arg("--root")
            .arg(root)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, log) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let proc = Proc(child);
        let (mut vsi, mut metrics) = (None, None);
        while vsi.is_none() || metrics.is_none() {
            let line = log
                .recv_timeout(Duration::from_secs(10))
                .expect("evlbi serve did not print its addresses");
            let addr_after = |tag: &str| {
                line.split(tag)
                    .nth(1)
                    .and_then(|r| r.split([' ', '/']).next())
                    .and_then(|a| a.parse::<SocketAddr>().ok())
            };
            metrics = metrics.or(addr_after("metrics: http://"));
            vsi = vsi.or(addr_after("VSI-S on "));
        }
        Serve {
            proc,
            vsi: vsi.unwrap(),
            metrics: metrics.unwrap(),
            log,
        }
    }

    /// Stop it (SIGTERM) and return what it printed from now to its exit (bounded).
    pub fn stop(self) -> Vec<String> {
        // SAFETY: kill(2) on the PID of a child we started and have not reaped.
        unsafe { libc::kill(self.proc.0.id() as libc::pid_t, libc::SIGTERM) };
        let mut lines = Vec::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            match self.log.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => lines.push(l),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        lines
    }
}

/// The sender's JSON: (frames sent, frames dropped on purpose) of its one station.
pub fn sent(send: Proc) -> (u64, u64) {
    let r = super::stream_send_json(send);
    let s = &r["stations"][0];
    (
        s["frames_sent"].as_u64().unwrap(),
        s["injected_drops"].as_u64().unwrap(),
    )
}

/// `evlbi?`'s total and loss.
pub fn evlbi(v: &mut Vsi) -> (u64, u64) {
    let f = v.ok("evlbi? ;");
    assert_eq!(
        (f[0].as_str(), f[2].as_str(), f[4].as_str(), f[6].as_str()),
        ("total", "loss", "out-of-order", "extent")
    );
    let n = |s: &str| s.split(' ').next().unwrap().parse::<u64>().unwrap();
    (n(&f[1]), n(&f[3]))
}

/// Wait (bounded) until `evlbi?`'s total stops moving (everything sent has been taken).
pub fn settled(v: &mut Vsi) -> (u64, u64) {
    let mut last = evlbi(v);
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(600));
        let now = evlbi(v);
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("evlbi? kept changing: {last:?}");
}

/// Valid and invalid (filled) frames of VDIF data of 8032-byte frames.
pub fn frames_of(data: &[u8]) -> (u64, u64) {
    assert_eq!(data.len() % 8032, 0, "not whole frames");
    let invalid = data
        .chunks(8032)
        .filter(|f| u32::from_le_bytes(f[..4].try_into().unwrap()) & (1 << 31) != 0)
        .count() as u64;
    ((data.len() / 8032) as u64 - invalid, invalid)
}

/// The FlexBuff recording of a scan labelled `scan` on the one disk `root`: its chunks
/// (`root/scan/scan.%08u`) in order, as one stream.
pub fn recording(root: &Path, scan: &str) -> Vec<u8> {
    let mut files: Vec<_> = std::fs::read_dir(root.join(scan))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for (i, f) in files.iter().enumerate() {
        assert_eq!(f.file_name().unwrap().to_str().unwrap(), format!("{scan}.{i:08}"));
    }
    files.iter().flat_map(|f| std::fs::read(f).unwrap()).collect()
}
