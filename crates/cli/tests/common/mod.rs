//! Helpers shared by the CLI tests that run evlbi as separate processes.

// unsafe: kill(2) of the processes the tests started: std signals only SIGKILL.
#![allow(unsafe_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

#[allow(dead_code)] // only the SFXC tests read through its harness
pub mod sfxc;
#[allow(dead_code)] // only the serve tests talk VSI-S
pub mod vsi;

/// The evlbi binary under test.
pub fn bin() -> Command {
    // `evlbi send` remembers each receiver's path rate in its state directory: a fresh one per
    // command, so no test starts from a rate another test (or the user) measured.
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let state = format!("{}/state-{}-{n}", env!("CARGO_TARGET_TMPDIR"), std::process::id());
    let mut c = Command::new(env!("CARGO_BIN_EXE_evlbi"));
    c.env("XDG_STATE_HOME", state);
    c
}

/// Run evlbi with `args` and assert it exits 2 (a usage error); its output for further checks.
#[allow(dead_code)] // not every test binary checks usage errors
pub fn assert_usage_error(args: &[&str]) -> std::process::Output {
    let o = bin().args(args).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Spawn `cmd` (a server started on port 0), forward its stderr lines, and return the port it
/// printed after `127.0.0.1:` in one of them (bounded wait).
#[allow(dead_code)] // not every test binary starts servers
pub fn spawn_with_port(cmd: &mut Command) -> (Child, u16, Receiver<String>) {
    spawn_with_port_on(cmd, "127.0.0.1")
}

/// [`spawn_with_port`] for a server listening on `host` (e.g. inside a namespace).
#[allow(dead_code)] // not every test binary starts servers
pub fn spawn_with_port_on(cmd: &mut Command, host: &str) -> (Child, u16, Receiver<String>) {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    if let Some((port, rx)) = port_from_stderr(&mut child, host) {
        return (child, port, rx);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the server did not print its address on stderr within 10 s");
}

/// Forward `child`'s (piped) stderr lines to a channel and wait up to 10 s for one that names
/// its port after `host:`; `None` if none did.
#[allow(dead_code)] // not every test binary starts servers
pub fn port_from_stderr(child: &mut Child, host: &str) -> Option<(u16, Receiver<String>)> {
    let prefix = format!("{host}:");
    let stderr = child.stderr.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
        if let Some(port) = line
            .split(prefix.as_str())
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|p| p.parse::<u16>().ok())
        {
            return Some((port, rx));
        }
    }
    None
}

/// A TCP port free a moment ago on 127.0.0.1.
#[allow(dead_code)] // not every test binary needs one
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A UDP port free a moment ago on 127.0.0.1.
#[allow(dead_code)] // not every test binary needs one
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP GET; the status line and the body (both empty when nothing answers).
#[allow(dead_code)] // not every test binary scrapes
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return (String::new(), String::new());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
    let _ = s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

/// The backend simulator: one station (Ef), 512 Mb/s of 8000-byte frames in udps (jive5ab)
/// framing, each frame sent at its VDIF time, for `seconds`, to 127.0.0.1:`port`, plus `extra`
/// options; its JSON summary goes to a pipe (read it with [`stream_send_json`]). It sends every
/// frame (`--max-lag 1h`: a loaded test host that holds it up delays frames, never skips them),
/// so a recorder's counts can be held to what was sent.
#[allow(dead_code)] // not every test binary needs a backend
pub fn backend_sim(port: u16, seconds: &str, extra: &[&str]) -> Proc {
    backend_sim_to(&[&format!("127.0.0.1:{port}")], seconds, extra)
}

/// [`backend_sim`] sending to each of `to` (with `--senders K`, board k to the k-th).
#[allow(dead_code)] // not every test binary sends
pub fn backend_sim_to(to: &[&str], seconds: &str, extra: &[&str]) -> Proc {
    let child = bin()
        .args(["stream", "send", "--generate", "--stations", "Ef", "--rate", "512M"])
        .args(["--frame", "8000", "--seq-format", "jive5ab", "--loop", "--json"])
        .args(["--max-lag", "1h", "--duration", seconds])
        .args(to.iter().flat_map(|t| ["--to", t]))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Proc(child)
}

/// The JSON summary of a `stream send` started with its stdout piped, once it exits (within
/// 60 s); it must succeed.
#[allow(dead_code)] // not every test binary sends
pub fn stream_send_json(mut send: Proc) -> serde_json::Value {
    use std::io::Read;
    // Read while it runs: its JSON may exceed what a pipe holds.
    let mut stdout = send.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = send.0.try_wait().unwrap() {
            break status;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "stream send did not end");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "stream send failed: {status}");
    serde_json::from_str(&reader.join().unwrap()).unwrap()
}

/// A process held with SIGSTOP (a descheduled host, a stalled disk); continued on drop, so a
/// failing test leaves nothing stopped.
#[allow(dead_code)]
pub struct Stopped(u32);

#[allow(dead_code)]
impl Stopped {
    fn signal(pid: u32, sig: libc::c_int) {
        // SAFETY: kill(2) on a process the test started (or its writer child), still running.
        let rc = unsafe { libc::kill(pid as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill {sig} {pid}: {}", std::io::Error::last_os_error());
    }

    /// Stop `pid` (a process the test started) until the guard drops.
    pub fn new(pid: u32) -> Stopped {
        Stopped::signal(pid, libc::SIGSTOP);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        Stopped::signal(self.0, libc::SIGCONT);
    }
}

/// SIGTERM to `pid`, a process the test started and has not reaped (the Ctrl-C of a command
/// that writes its report on the way out).
#[allow(dead_code)]
pub fn sigterm(pid: u32) {
    // SAFETY: kill(2) on the PID of a child the test started and has not reaped.
    let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill TERM {pid}: {}", std::io::Error::last_os_error());
}

/// A process killed on drop if still running (tests must not leave servers behind).
#[allow(dead_code)] // not every test binary starts processes this way
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        // Already exited (and reaped now, or by the test): its PID may belong to another
        // process by now, so no signal.
        if let Ok(Some(_)) = self.0.try_wait() {
            return;
        }
        // SIGTERM first (linkemu removes its namespaces then), SIGKILL if it lingers.
        // SAFETY: kill(2) on the PID of a child we started and have not reaped.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `evlbi linkemu` between two fresh network namespaces (A = 10.77.0.1, B = 10.77.0.2); the
/// emulator is stopped with SIGTERM on drop and removes the namespaces.
#[allow(dead_code)] // not every test binary emulates a WAN
pub struct Wan {
    /// Namespace of side A.
    pub a: String,
    /// Namespace of side B.
    pub b: String,
    emu: Option<Proc>,
    _state: tempfile::TempDir,
}

#[allow(dead_code)]
impl Wan {
    /// Side B's address.
    pub const B_ADDR: &'static str = "10.77.0.2";

    /// Why a WAN cannot be emulated here (root, TUN and iproute2 are needed), or `None`.
    pub fn skip_reason() -> Option<String> {
        let uid = Command::new("id").arg("-u").output().ok()?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return Some("not root".into());
        }
        if !std::path::Path::new("/dev/net/tun").exists() {
            return Some("/dev/net/tun is missing".into());
        }
        if Command::new("ip").arg("-V").output().is_err() {
            return Some("iproute2 `ip` is not installed".into());
        }
        None
    }

    /// Start the emulator with the path options `path` (e.g. `--delay 10ms --loss 1%`); namespace
    /// names carry `tag` and this process's PID. Waits (bounded) until B's address is up.
    pub fn start(tag: &str, path: &[&str]) -> Wan {
        let state = tempfile::tempdir().unwrap();
        let pid = std::process::id();
        let (a, b) = (format!("ev{tag}-{pid}-a"), format!("ev{tag}-{pid}-b"));
        let emu = Proc(
            bin()
                .args([
                    "linkemu",
                    "--a",
                    &format!("ns:{a}"),
                    "--b",
                    &format!("ns:{b}"),
                    "--quiet",
                ])
                .arg("--state-dir")
                .arg(state.path())
                .args(path)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = Command::new("ip").args(["-n", &b, "addr", "show"]).output().unwrap();
            if String::from_utf8_lossy(&out.stdout).contains(Self::B_ADDR) {
                break;
            }
            assert!(Instant::now() < deadline, "linkemu did not bring up {b} within 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Wan {
            a,
            b,
            emu: Some(emu),
            _state: state,
        }
    }

    /// The evlbi binary run inside namespace `ns` (one of `self.a`, `self.b`).
    pub fn evlbi_in(&self, ns: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_evlbi")]);
        c
    }

    /// Stop the emulator now (SIGTERM, bounded wait): the namespaces are gone afterwards.
    pub fn stop(&mut self) {
        self.emu.take();
    }

    /// Stop the emulator and return what it printed on stdout (its summary, with `--json`).
    pub fn stop_with_summary(&mut self) -> String {
        use std::io::Read;
        let Some(mut p) = self.emu.take() else {
            return String::new();
        };
        // SAFETY: kill(2) on the PID of a child we started and have not reaped.
        unsafe { libc::kill(p.0.id() as libc::pid_t, libc::SIGTERM) };
        let mut out = String::new();
        if let Some(mut so) = p.0.stdout.take() {
            // Ends when the emulator exits (bounded by its own shutdown; Proc's drop then reaps).
            let _ = so.read_to_string(&mut out);
        }
        out
    }
}

/// Two stations (Ef, Wb) of 2 s from 2026-11-23T12:00:00Z, generated into `dir/in` with `extra`
/// `vdif gen` options: their paths.
#[allow(dead_code)] // not every test binary generates stations
pub fn gen_two_stations(dir: &std::path::Path, extra: &[&str]) -> (std::path::PathBuf, std::path::PathBuf) {
    let out = bin()
        .args(["vdif", "gen", "--stations", "Ef,Wb", "--seconds", "2", "-q"])
        .args(["--start", "2026-11-23T12:00:00Z", "--out"])
        .arg(dir.join("in"))
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (dir.join("in/Ef.vdif"), dir.join("in/Wb.vdif"))
}

/// A `stream recv` process on 127.0.0.1 that stops 3 s after the last datagram (or its start,
/// when none comes); killed on drop if still running.
#[allow(dead_code)] // not every test binary streams
pub struct StreamRecv {
    /// The process.
    pub child: Child,
    /// Its UDP port.
    pub port: u16,
    /// Its stderr lines.
    pub log: Receiver<String>,
}

impl Drop for StreamRecv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[allow(dead_code)] // not every test binary streams
impl StreamRecv {
    /// Started quiet (`-q`) on a free port with `extra` options; waits (bounded) for its address.
    pub fn start(extra: &[&str]) -> StreamRecv {
        StreamRecv::spawn(true, extra)
    }

    /// Started on a free port; `quiet` hides the live lines.
    pub fn spawn(quiet: bool, extra: &[&str]) -> StreamRecv {
        let mut cmd = bin();
        // The idle timeout counts from the start until the first datagram (issue 29): room for
        // a sender on a busy machine to start, generate or load its data and reach its timeline.
        cmd.args(["stream", "recv", "--listen", "127.0.0.1:0", "--idle-timeout", "3s"]);
        if quiet {
            cmd.arg("-q");
        }
        cmd.args(extra);
        let (child, port, log) = spawn_with_port(&mut cmd);
        StreamRecv { child, port, log }
    }

    /// Wait (bounded) for the receiver to stop on its idle timeout; its exit status and stderr.
    pub fn wait(mut self) -> (std::process::ExitStatus, String) {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                // The stderr reader ends with the process: collect what is left (bounded).
                let mut log = Vec::new();
                while let Ok(l) = self.log.recv_timeout(Duration::from_secs(2)) {
                    log.push(l);
                }
                return (st, log.join("\n"));
            }
            assert!(t0.elapsed() < Duration::from_secs(40), "receiver did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The jive5ab binary the interop tests use: what `scripts/jive5ab-path` prints ($JIVE5AB, or
/// the build `scripts/setup.sh` caches outside the checkout); `None` when there is none.
#[allow(dead_code)]
pub fn jive5ab_path() -> Option<std::path::PathBuf> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/jive5ab-path");
    let out = std::process::Command::new(script).output().ok()?;
    let p = std::path::PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && p.is_file()).then_some(p)
}

/// A VSI-S daemon on 127.0.0.1 (jive5ab or `evlbi serve`): one connection per call, one reply
/// line per command.
#[allow(dead_code)]
pub struct VsiDaemon {
    /// Its control port.
    pub port: u16,
}

#[allow(dead_code)]
impl VsiDaemon {
    /// Send VSI-S commands on one connection, one reply line each (waits ≤ 10 s for the port).
    pub fn vsi(&self, cmds: &[&str]) -> Vec<String> {
        self.try_vsi(cmds).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`VsiDaemon::vsi`], or which command the daemon closed the connection at (a daemon
    /// that dies mid-session must say so, not fail as a broken pipe on the next write).
    pub fn try_vsi(&self, cmds: &[&str]) -> Result<Vec<String>, String> {
        use std::io::{BufRead, BufReader, Write};
        let t0 = std::time::Instant::now();
        let s = loop {
            match std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                Ok(s) => break s,
                Err(e) => {
                    if t0.elapsed() > std::time::Duration::from_secs(10) {
                        return Err(format!("port {}: {e}", self.port));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
        };
        s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut replies = Vec::new();
        for c in cmds {
            let at = |e: String| format!("port {}: {c:?} after replies {replies:?}: {e}", self.port);
            writeln!(w, "{c}").map_err(|e| at(format!("write: {e}")))?;
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) => return Err(at("the daemon closed the connection".into())),
                Ok(_) => replies.push(line.trim().to_string()),
                Err(e) => return Err(at(format!("read: {e}"))),
            }
        }
        Ok(replies)
    }

    /// Wait (bounded) until `query` no longer answers "active" (or "on", for record?).
    pub fn until_inactive(&self, query: &str) {
        until_inactive(query, |q| self.vsi(q))
    }
}

/// Ask `query` (bounded, 60 s) until it no longer answers "active" (or "on", for record?).
fn until_inactive(query: &str, ask: impl Fn(&[&str]) -> Vec<String>) {
    let t0 = std::time::Instant::now();
    while ask(&[query])
        .first()
        .is_some_and(|r| r.contains(": active") || r.contains(": on "))
    {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "{query} still active"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// jive5ab on a free control port (as root it keeps its rights, `-*`), stopped on drop.
#[allow(dead_code)]
pub struct Jive5ab {
    proc: std::sync::Mutex<Proc>,
    /// Its control connection.
    pub ctl: VsiDaemon,
    /// Its stdout and stderr, shown when it fails a command.
    log: tempfile::NamedTempFile,
}

#[allow(dead_code)]
impl Jive5ab {
    /// Start `bin` in `cwd` (where a disk2file without a path lands).
    pub fn start_in(bin: &std::path::Path, cwd: &std::path::Path) -> Jive5ab {
        let port = free_tcp_port();
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(bin)
            .args(["-m", "0", "-*", "-p", &port.to_string()])
            .current_dir(cwd)
            .stdout(log.reopen().unwrap())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        Jive5ab {
            proc: std::sync::Mutex::new(Proc(child)),
            ctl: VsiDaemon { port },
            log,
        }
    }

    /// Whether it still runs, and the end of what it printed: the context of a failed command.
    pub fn state(&self) -> String {
        let status = match self.proc.lock().map(|mut p| p.0.try_wait()) {
            Ok(Ok(Some(st))) => format!("jive5ab exited: {st}"),
            Ok(Ok(None)) => "jive5ab still runs".to_string(),
            other => format!("jive5ab's state unknown: {other:?}"),
        };
        let log = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("{status}; its last output:\n{}", tail.join("\n"))
    }

    /// Start `bin`.
    pub fn start(bin: &std::path::Path) -> Jive5ab {
        Jive5ab::start_in(bin, std::path::Path::new("/"))
    }

    /// See [`VsiDaemon::vsi`]; a failure says whether jive5ab died and what it printed.
    pub fn vsi(&self, cmds: &[&str]) -> Vec<String> {
        self.ctl
            .try_vsi(cmds)
            .unwrap_or_else(|e| panic!("{e}\n{}", self.state()))
    }

    /// See [`VsiDaemon::until_inactive`].
    pub fn until_inactive(&self, query: &str) {
        until_inactive(query, |q| self.vsi(q))
    }

    /// `file2net` of `file` to 127.0.0.1:`port` in udps under a 9000-byte MTU (8960-byte
    /// datagrams) with `ipd_ns` between datagrams, until jive5ab says it is done.
    pub fn file2net_udps(&self, file: &std::path::Path, port: u16, ipd_ns: u32) {
        let file_cmd = format!("file2net = connect : 127.0.0.1 : {} ;", file.display());
        let r = self.vsi(&[
            "net_protocol = udps ;",
            "mtu = 9000 ;",
            &format!("ipd = {ipd_ns} ;"),
            &format!("net_port = {port} ;"),
            &file_cmd,
        ]);
        assert!(r.iter().all(|l| l.contains("= 0") || l.contains("=  0")), "{r:?}");
        // jive5ab connects in the background: `on` before it has is "6 : not connected yet".
        let t0 = std::time::Instant::now();
        loop {
            let on = self.vsi(&["file2net = on ;"]);
            if on[0].contains("=  0") || on[0].contains("= 0") {
                break;
            }
            assert!(on[0].contains("not connected yet"), "{on:?}");
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(10),
                "jive5ab never connected: {on:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.until_inactive("file2net? ;");
    }
}
