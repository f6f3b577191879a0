//! `evlbi serve` operated as a station service (contrib/): its settings from `--config FILE`
//! (every key honoured, flags over keys, a bad file a usage error naming file and problem), the
//! systemd unit (`systemd-analyze verify` and `security --offline`, and its system-call filter
//! against every call a whole session makes, traced), and the Prometheus alerting rules
//! (`promtool check rules`, `promtool test rules`, every series they name exported, and a real
//! Prometheus evaluating them against a live daemon: a recording without data, a disk that
//! fills mid-scan).
//!
//! A missing tool (promtool, systemd-analyze, strace, prometheus) skips its test with a line
//! starting "SKIPPED:"; scripts/test.sh names the missing tools in its summary.

// unsafe: kill(2) of the processes the tests started: std signals only SIGKILL.
#![allow(unsafe_code)]

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::{assert_usage_error, backend_sim, bin, free_tcp_port, free_udp_port, http_get, Proc, VsiDaemon};
use testkit::SmallDisk;

/// The repository's contrib/ directory.
fn contrib() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib")
}

/// `tool` on PATH (or at its path), or `None` after a loud "SKIPPED:" line naming `what`.
fn tool(tool: &str, what: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(tool))
        .find(|p| p.is_file());
    if found.is_none() {
        eprintln!("SKIPPED: {what}: {tool} is not installed (scripts/setup.sh installs it as root)");
    }
    found
}

/// `evlbi serve --config FILE` (plus `extra` flags) started in `/` (so relative paths in the
/// file must follow the file), its stderr lines forwarded.
fn serve_with_config(config: &Path, extra: &[&str]) -> (Proc, Receiver<String>) {
    let mut child = bin()
        .current_dir("/")
        .arg("serve")
        .arg("--config")
        .arg(config)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (Proc(child), rx)
}

/// Lines from `log` until one contains `needle` (bounded); all of them.
fn lines_until(log: &Receiver<String>, needle: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let t0 = Instant::now();
    while !seen.iter().any(|l: &String| l.contains(needle)) {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "no line with {needle:?} in {seen:?}"
        );
        if let Ok(l) = log.recv_timeout(Duration::from_millis(200)) {
            seen.push(l);
        }
    }
    seen
}

/// The value of `series` (name and labels exactly as evlbi writes them) in a scrape of
/// `metrics`.
fn metric(metrics: SocketAddr, series: &str) -> Option<f64> {
    let (_, body) = http_get(metrics, "/metrics");
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Poll `metric` until it equals `want` (bounded); the last value seen.
fn metric_becomes(metrics: SocketAddr, series: &str, want: f64) -> Option<f64> {
    let t0 = Instant::now();
    loop {
        let v = metric(metrics, series);
        if v == Some(want) || t0.elapsed() > Duration::from_secs(20) {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An address of this host that is not loopback (the source of a connection to it), found by
/// routing a UDP socket (nothing is sent); `None` on a host with loopback only.
fn non_loopback_address() -> Option<IpAddr> {
    ["192.0.2.1:9", "10.255.255.1:9", "8.8.8.8:53"].iter().find_map(|to| {
        let s = UdpSocket::bind("0.0.0.0:0").ok()?;
        s.connect(to).ok()?;
        let ip = s.local_addr().ok()?.ip();
        (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
    })
}

/// A 32-byte pre-shared key file, readable by its owner only.
fn write_key(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, "c2VydmljZS10ZXN0LWtleS0wMTIzNDU2Nzg5YWJjZGVm\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Ports of one daemon's services, free a moment ago.
struct Ports {
    vsi: u16,
    metrics: u16,
    probe: u16,
    recv: u16,
}

impl Ports {
    fn free() -> Ports {
        Ports {
            vsi: free_tcp_port(),
            metrics: free_tcp_port(),
            probe: free_tcp_port(),
            recv: free_tcp_port(),
        }
    }

    fn metrics(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.metrics))
    }
}

/// A station directory: disk0, disk1, out/, a key, and serve.toml setting every key (paths
/// relative to the file), the control port on every address.
fn station(dir: &Path, p: &Ports) -> PathBuf {
    for d in ["disk0", "disk1", "out"] {
        std::fs::create_dir(dir.join(d)).unwrap();
    }
    write_key(&dir.join("key"));
    let cfg = dir.join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "# a station's settings\nvsi = \"0.0.0.0:{}\"\nvsi_allow = [\"192.0.2.77\"]\nroot = [\"out\"]\n\
             disks = [\"disk*\"]\nmetrics = \"127.0.0.1:{}\"\ninterval = \"200ms\"\n\
             first_request_timeout = \"1s\"\nprobe_server = \"127.0.0.1:{}\"\nrecv_listen = \"127.0.0.1:{}\"\n\
             key_file = \"key\"\n",
            p.vsi, p.metrics, p.probe, p.recv
        ),
    )
    .unwrap();
    cfg
}

/// Every key of the file is honoured, started in another directory: the control port and who
/// may use it, the disks, the metrics address, the first-request time-out, the probe server,
/// the file receiver with its key and root. Then flags over the same file win.
#[test]
fn serve_honours_its_config_file_and_flags_override_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = Ports::free();
    let cfg = station(dir.path(), &p);
    let (serve, log) = serve_with_config(&cfg, &[]);
    let lines = lines_until(&log, "file receiver on");
    let d = dir.path().display();
    let all = lines.join("\n");
    assert!(
        all.contains(&format!(
            "VSI-S on 0.0.0.0:{} (TCP; loopback peers and 192.0.2.77)",
            p.vsi
        )),
        "{all}"
    );
    assert!(all.contains(&format!("disks {d}/disk0, {d}/disk1")), "{all}");
    assert!(all.contains(&format!("probe server on 127.0.0.1:{}", p.probe)), "{all}");
    assert!(
        all.contains(&format!(
            "file receiver on 127.0.0.1:{} (TCP), files below {d}/out",
            p.recv
        )),
        "{all}"
    );
    let fs = VsiDaemon { port: p.vsi };
    let r = fs.vsi(&["set_disks? ;", "status? ;"]);
    assert_eq!(r[0], format!("!set_disks? 0 : 2 : {d}/disk0 : {d}/disk1 ;"));
    assert!(r[1].starts_with("!status? 0 : 0x"), "{}", r[1]);
    // The metrics address of the file, counting those two requests.
    let ok = "evlbi_serve_statements_total{source=\"serve\",outcome=\"ok\"}";
    assert_eq!(metric_becomes(p.metrics(), ok, 2.0), Some(2.0));
    // first_request_timeout = "1s" (the default is 60 s): a silent connection is closed.
    let mut idle = TcpStream::connect(("127.0.0.1", p.vsi)).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let t0 = Instant::now();
    assert_eq!(idle.read(&mut [0u8; 64]).unwrap_or(0), 0, "closed without a word");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(30),
        "{waited:?}"
    );
    // vsi_allow: a peer on this host's own non-loopback address is not in it: shut out, counted.
    match non_loopback_address() {
        Some(ip) => {
            let mut s = TcpStream::connect((ip, p.vsi)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let _ = s.write_all(b"status? ;\n");
            let mut got = Vec::new();
            // Closed (EOF or reset) is the refusal; a read that timed out is a daemon that never
            // looked at the connection, not one that shut it out.
            let read = s.read_to_end(&mut got);
            assert!(
                !read
                    .as_ref()
                    .is_err_and(|e| matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
                "{ip}: no answer and no close in 10 s: {read:?}"
            );
            assert!(got.is_empty(), "{ip} is not allowed, yet got {got:?}");
            let refused = "evlbi_serve_connections_refused_total{source=\"serve\"}";
            assert_eq!(metric_becomes(p.metrics(), refused, 1.0), Some(1.0));
        }
        None => eprintln!("SKIPPED (part): no non-loopback address on this host to be refused from"),
    }
    // recv_listen with key_file ("key", next to the file) and root ("out"): a file arrives.
    let src = dir.path().join("schedule.vex");
    std::fs::write(&src, b"$EXPER = r41066;\n".repeat(500)).unwrap();
    let o = bin()
        .arg("send")
        .arg(&src)
        .arg(format!("127.0.0.1:{}/incoming", p.recv))
        .arg("--key-file")
        .arg(dir.path().join("key"))
        .args(["--cc", "fixed", "--rate", "100M", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read(dir.path().join("out/incoming/schedule.vex")).unwrap(),
        std::fs::read(&src).unwrap()
    );
    drop(serve);

    // Flags win: another control port and metrics address, another disk list (replacing the
    // file's); the rest still from the file (vsi_allow).
    std::fs::create_dir(dir.path().join("other0")).unwrap();
    let vsi2 = free_tcp_port();
    let metrics2 = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()));
    let disks2 = format!("{d}/other*");
    let (_serve, log) = serve_with_config(
        &cfg,
        &[
            "--vsi",
            &format!("127.0.0.1:{vsi2}"),
            "--metrics",
            &metrics2.to_string(),
            "--disks",
            &disks2,
        ],
    );
    let all = lines_until(&log, "file receiver on").join("\n");
    assert!(
        all.contains(&format!(
            "VSI-S on 127.0.0.1:{vsi2} (TCP; loopback peers and 192.0.2.77)"
        )),
        "{all}"
    );
    let line = all.lines().find(|l| l.contains("VSI-S on")).unwrap_or("");
    assert!(line.ends_with(&format!("; disks {d}/other0")), "{line}");
    let r = VsiDaemon { port: vsi2 }.vsi(&["set_disks? ;"]);
    assert_eq!(r[0], format!("!set_disks? 0 : 1 : {d}/other0 ;"));
    assert_eq!(metric_becomes(metrics2, ok, 1.0), Some(1.0));
    assert_eq!(metric(p.metrics(), ok), None, "the file's metrics address is not used");
}

/// A file that cannot be used is a usage error (exit 2) naming the file and the problem.
#[test]
fn a_bad_config_file_is_a_usage_error_naming_file_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "misspelt.toml",
            "vsi = \"127.0.0.1:0\"\nvsi_alow = [\"10.1.1.5\"]\n",
            &["line 2", "unknown field `vsi_alow`", "expected one of", "`vsi_allow`"],
        ),
        (
            "type.toml",
            "metrics = 9200\n",
            &["line 1", "metrics", "invalid type: integer `9200`"],
        ),
        (
            "list.toml",
            "disks = \"/mnt/disk*\"\n",
            &[
                "line 1",
                "disks",
                "invalid type: string \"/mnt/disk*\", expected a sequence",
            ],
        ),
        (
            "duration.toml",
            "interval = \"fast\"\n",
            &["line 1", "interval", "\"fast\""],
        ),
        ("syntax.toml", "vsi = 127.0.0.1:2620\n", &["line 1", "vsi"]),
    ];
    for (name, text, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let o = assert_usage_error(&["serve", "--config", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&format!("--config {}: ", path.display())), "{name}: {err}");
        for w in want {
            assert!(err.contains(w), "{name}: {w:?} not in {err}");
        }
    }
    let missing = dir.path().join("absent.toml");
    let o = assert_usage_error(&["serve", "--config", missing.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("--config {}: cannot read it: No such file", missing.display())),
        "{err}"
    );
    let o = assert_usage_error(&["serve", "--config", dir.path().to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read it"));
}

/// contrib/evlbi-serve.toml starts the daemon as it stands (its /mnt/disk* and ports
/// overridden by flags, so the test needs no such disks): the FS host it allows is taken.
#[test]
fn the_example_config_starts_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("disk0")).unwrap();
    let disks = format!("{}/disk*", dir.path().display());
    let (_serve, log) = serve_with_config(
        &contrib().join("evlbi-serve.toml"),
        &["--vsi", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--disks", &disks],
    );
    let all = lines_until(&log, "VSI-S on").join("\n");
    assert!(all.contains("(TCP; loopback peers and 10.1.1.5)"), "{all}");
    assert!(all.contains(&format!("disks {}/disk0", dir.path().display())), "{all}");
}

/// The unit with its ExecStart pointing at the binary under test.
fn unit_under_test(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(contrib().join("evlbi-serve.service")).unwrap();
    let exec = "ExecStart=/usr/local/bin/evlbi serve --config /etc/evlbi/serve.toml\n";
    assert_eq!(text.matches(exec).count(), 1, "the unit runs evlbi serve --config");
    let unit = dir.join("evlbi-serve.service");
    let here = format!(
        "ExecStart={} serve --config /etc/evlbi/serve.toml\n",
        env!("CARGO_BIN_EXE_evlbi")
    );
    std::fs::write(&unit, text.replace(exec, &here)).unwrap();
    unit
}

/// `systemd-analyze verify` finds nothing to say about the unit (it runs here without a
/// running systemd), and its offline security analysis rates the sandbox at most 2.0 ("OK").
#[test]
fn the_systemd_unit_verifies_and_is_sandboxed() {
    let Some(analyze) = tool("systemd-analyze", "the systemd unit check") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let unit = unit_under_test(dir.path());
    let complaints = |unit: &Path| {
        let o = Command::new(&analyze).arg("verify").arg(unit).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let name = unit.file_name().unwrap().to_string_lossy().into_owned();
        (
            o.status.success(),
            err.lines()
                .filter(|l| l.contains(&name))
                .map(String::from)
                .collect::<Vec<_>>(),
        )
    };
    let (ok, said) = complaints(&unit);
    assert!(ok && said.is_empty(), "systemd-analyze verify: {said:?}");
    // The check can fail: a misspelt key in a copy is reported.
    let text = std::fs::read_to_string(&unit).unwrap();
    let bad = dir.path().join("bad.service");
    std::fs::write(&bad, text.replace("ProtectSystem=strict", "ProtectSytem=strict")).unwrap();
    let (_, said) = complaints(&bad);
    assert!(said.iter().any(|l| l.contains("ProtectSytem")), "{said:?}");
    let o = Command::new(&analyze)
        .args(["security", "--offline=yes", "--threshold=20", "--no-pager"])
        .arg(&unit)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let level = out.lines().find(|l| l.contains("Overall exposure level")).unwrap_or("");
    assert!(o.status.success(), "exposure above 2.0: {out}");
    eprintln!("{}", level.trim());
    for key in [
        "ProtectSystem=strict",
        "ReadWritePaths=",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=\n",
        "LimitNOFILE=65536",
        "Restart=on-failure",
        "RestartPreventExitStatus=2",
        "User=evlbi",
    ] {
        assert!(text.contains(key), "{key}");
    }
}

/// The system calls a group or name of `systemd-analyze syscall-filter` stands for.
fn expand(groups: &std::collections::BTreeMap<String, Vec<String>>, name: &str, out: &mut BTreeSet<String>) {
    match groups.get(name) {
        Some(members) => {
            for m in members {
                expand(groups, m, out);
            }
        }
        None => {
            out.insert(name.to_string());
        }
    }
}

/// What the unit's SystemCallFilter lines allow: the union of the allow lists less the union of
/// the `~` deny lists, expanded with `systemd-analyze syscall-filter`.
fn unit_allows(analyze: &Path, unit: &str) -> BTreeSet<String> {
    let o = Command::new(analyze).arg("syscall-filter").output().unwrap();
    assert!(o.status.success());
    let mut groups = std::collections::BTreeMap::<String, Vec<String>>::new();
    let mut current = None;
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if line.starts_with('@') {
            current = Some(t.to_string());
            groups.insert(t.to_string(), Vec::new());
        } else if let Some(g) = &current {
            groups.get_mut(g).unwrap().push(t.to_string());
        }
    }
    let (mut allow, mut deny) = (BTreeSet::new(), BTreeSet::new());
    for line in unit.lines() {
        if let Some(v) = line.strip_prefix("SystemCallFilter=") {
            let (set, list) = match v.strip_prefix('~') {
                Some(l) => (&mut deny, l),
                None => (&mut allow, v),
            };
            for name in list.split_whitespace() {
                expand(&groups, name, set);
            }
        }
    }
    assert!(allow.len() > 100 && !deny.is_empty(), "{allow:?} {deny:?}");
    allow.difference(&deny).cloned().collect()
}

/// The `evlbi serve` strace runs: its PID and its `--config` path, unique to the test, by which
/// it is recognised in /proc whoever its parent is by then (strace killed or gone leaves it
/// running, reparented). Stopped on drop, by SIGKILL if SIGTERM does not end it: a failing test
/// must not leave a daemon behind.
struct Traced {
    pid: libc::pid_t,
    marker: String,
}

impl Traced {
    /// strace's child (bounded wait for the fork and the exec of `evlbi serve … marker`).
    fn find(strace: &Proc, marker: &Path) -> Traced {
        let children = format!("/proc/{0}/task/{0}/children", strace.0.id());
        let marker = marker.display().to_string();
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(&children).unwrap_or_default();
            for pid in text.split_whitespace().filter_map(|p| p.parse().ok()) {
                let t = Traced {
                    pid,
                    marker: marker.clone(),
                };
                if t.is_ours() {
                    return t;
                }
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "strace started no evlbi serve");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the PID is still our daemon (its command line names our config: not a reused PID).
    fn is_ours(&self) -> bool {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.pid)).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(&self.marker)
    }

    /// What /proc says of it, for a failure message.
    fn state(&self) -> String {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        status
            .lines()
            .filter(|l| ["State", "PPid", "TracerPid"].iter().any(|k| l.starts_with(k)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Send `sig` if it is still our daemon; whether sent.
    fn signal(&self, sig: libc::c_int) -> bool {
        // SAFETY: kill(2) on a PID whose command line, just read, names this test's config.
        self.is_ours() && unsafe { libc::kill(self.pid, sig) } == 0
    }

    /// SIGTERM, as systemd stops it; whether sent.
    fn terminate(&self) -> bool {
        self.signal(libc::SIGTERM)
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        if !self.terminate() {
            return;
        }
        let t0 = Instant::now();
        while self.is_ours() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.signal(libc::SIGKILL);
    }
}

/// The system calls of an `strace -c` summary.
fn traced_calls(summary: &str) -> BTreeSet<String> {
    summary
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|w| {
            w.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
        .filter(|w| !matches!(*w, "total" | "syscall" | ""))
        .map(String::from)
        .collect()
}

/// The unit's system-call filter lets a whole session through: `evlbi serve --config` traced
/// with strace while the FS records a vbs scan over two disks, checks it and copies it out with
/// disk2file, a scraper reads /metrics, a probe client measures, a file arrives, and SIGTERM
/// stops it. Every call made (writer processes included) is one the unit allows.
#[test]
fn the_units_system_call_filter_allows_a_whole_session() {
    let (Some(analyze), Some(strace)) = (
        tool("systemd-analyze", "the unit's system-call filter check"),
        tool("strace", "the unit's system-call filter check"),
    ) else {
        return;
    };
    let allowed = unit_allows(
        &analyze,
        &std::fs::read_to_string(contrib().join("evlbi-serve.service")).unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let p = Ports::free();
    let cfg = station(dir.path(), &p);
    let trace = dir.path().join("strace.txt");
    let mut traced = Proc(
        Command::new(&strace)
            .args(["-f", "-qq", "-c", "-o"])
            .arg(&trace)
            .arg(env!("CARGO_BIN_EXE_evlbi"))
            .arg("serve")
            .arg("--config")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let evlbi = Traced::find(&traced, &cfg);
    let fs = VsiDaemon { port: p.vsi };
    let data = free_udp_port();
    let r = fs.vsi(&[
        "mode = VDIF_8000-512-16-2 ;",
        &format!("net_port = {data} ;"),
        "record = on : syscalls ;",
    ]);
    assert!(r.iter().all(|l| l.contains(" 0 ")), "{r:?}");
    let _ = common::stream_send_json(backend_sim(data, "1s", &[]));
    let out = format!("{}/out/copy.vdif", dir.path().display());
    let r = fs.vsi(&[
        "record = off ;",
        "scan_check? ;",
        &format!("disk2file = {out} : : : w ;"),
    ]);
    assert!(r[1].starts_with("!scan_check? 0 : "), "{r:?}");
    fs.until_inactive("disk2file? ;");
    assert!(std::fs::metadata(&out).unwrap().len() > 0);
    assert!(metric(p.metrics(), "evlbi_serve_scans_total{source=\"serve\"}").is_some());
    let o = bin()
        .args([
            "probe",
            "client",
            &format!("127.0.0.1:{}", p.probe),
            "--spacing",
            "20us",
            "--count",
            "500",
        ])
        .arg("--key-file")
        .arg(dir.path().join("key"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = bin()
        .arg("send")
        .arg(&cfg)
        .arg(format!("127.0.0.1:{}/in", p.recv))
        .arg("--key-file")
        .arg(dir.path().join("key"))
        .args(["--cc", "fixed", "--rate", "100M", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // SIGTERM to evlbi (strace's child), as systemd stops it; strace then writes its summary.
    assert!(
        evlbi.terminate(),
        "evlbi serve is gone before SIGTERM: {}",
        evlbi.state()
    );
    let t0 = Instant::now();
    while traced.0.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "evlbi serve did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let calls = traced_calls(&std::fs::read_to_string(&trace).unwrap());
    assert!(
        ["recvmmsg", "execve", "accept4", "pwrite64", "wait4"]
            .iter()
            .all(|c| calls.contains(*c)),
        "the trace misses the session: {calls:?}"
    );
    let denied: Vec<_> = calls.iter().filter(|c| !allowed.contains(*c)).collect();
    assert!(
        denied.is_empty(),
        "the unit's SystemCallFilter denies {denied:?} (all made: {calls:?})"
    );
    eprintln!("{} distinct system calls, all allowed by the unit", calls.len());
}

/// `promtool check rules` and `promtool test rules` pass on contrib/.
#[test]
fn promtool_checks_and_tests_the_alert_rules() {
    let Some(promtool) = tool("promtool", "the alert rules' promtool checks") else {
        return;
    };
    let o = Command::new(&promtool)
        .args(["check", "rules", "evlbi-recorder.rules.yml"])
        .current_dir(contrib())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("SUCCESS: 12 rules found"),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(&promtool)
        .args(["test", "rules", "evlbi-recorder.rules.test.yml"])
        .current_dir(contrib())
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success() && out.contains("SUCCESS"), "{out}");
}

/// Every `evlbi_…` series the rules and their tests name is one evlbi exports (a counter with
/// `_total`, as the encoder writes it), and every alert of the rules has a test.
#[test]
fn the_alert_rules_name_only_series_evlbi_exports() {
    let exported: BTreeSet<String> = metrics::series::ALL
        .iter()
        .map(|m| match m.kind {
            metrics::series::Kind::Counter => format!("{}_total", m.name),
            metrics::series::Kind::Gauge => m.name.to_string(),
        })
        .collect();
    let rules = std::fs::read_to_string(contrib().join("evlbi-recorder.rules.yml")).unwrap();
    let tests = std::fs::read_to_string(contrib().join("evlbi-recorder.rules.test.yml")).unwrap();
    let names = |text: &str| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (i, _) in text.match_indices("evlbi_") {
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            out.insert(name);
        }
        out
    };
    let used = names(&rules);
    assert!(used.len() >= 9, "{used:?}");
    for n in used.iter().chain(names(&tests).iter()) {
        assert!(exported.contains(n), "{n} is not a series evlbi exports");
    }
    for alert in rules.lines().filter_map(|l| l.trim().strip_prefix("- alert: ")) {
        assert!(
            tests.contains(&format!("alertname: {alert}\n")),
            "no promtool test for {alert}"
        );
    }
}

/// The alerts a Prometheus at `prom` holds: (name, state, instance).
fn alerts(prom: SocketAddr) -> Vec<(String, String, String)> {
    let (_, body) = http_get(prom, "/api/v1/alerts");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    doc["data"]["alerts"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
                    (
                        s(&x["labels"]["alertname"]),
                        s(&x["state"]),
                        s(&x["labels"]["instance"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Poll `prom`'s alerts until `ok` holds for them (bounded); the last seen.
fn alerts_until(prom: SocketAddr, what: &str, ok: impl Fn(&[(String, String, String)]) -> bool) {
    let t0 = Instant::now();
    loop {
        let a = alerts(prom);
        if ok(&a) {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "{what}: alerts {a:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A real Prometheus, the rules of contrib/ loaded, scraping `evlbi serve --config`: a
/// recording with no data makes EvlbiRecordingNoData pending; then data onto three disks, one
/// a tmpfs that fails its first chunk (out of inodes: a failure its free space does not show,
/// so the recorder does give it a block — a disk merely full is passed over, not dropped), make
/// `evlbi_stream_disks_dropped` 1 and EvlbiDiskDropped fire, while the no-data alert goes.
#[test]
fn prometheus_raises_the_recorder_alerts_from_a_live_daemon() {
    let Some(prometheus) = tool("prometheus", "the live alert rules test") else {
        return;
    };
    // Room for its root and the scan's directory, no file.
    let small = match SmallDisk::mount_with("size=64m,nr_inodes=2") {
        Ok(d) => d,
        Err(why) => {
            eprintln!("SKIPPED: the live alert rules test: cannot mount a small tmpfs (needs root): {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    for d in ["disk0", "disk1"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    let (vsi, metrics) = (free_tcp_port(), SocketAddr::from(([127, 0, 0, 1], free_tcp_port())));
    let cfg = dir.path().join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "vsi = \"127.0.0.1:{vsi}\"\nmetrics = \"{metrics}\"\ninterval = \"200ms\"\n\
             disks = [\"{}/disk*\", \"{}\"]\n",
            dir.path().display(),
            small.path().display()
        ),
    )
    .unwrap();
    let (_serve, log) = serve_with_config(&cfg, &[]);
    lines_until(&log, "VSI-S on");
    let prom_cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &prom_cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: evlbi\n    static_configs:\n      - targets: ['{metrics}']\n",
            contrib().join("evlbi-recorder.rules.yml").display()
        ),
    )
    .unwrap();
    let prom = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()));
    let _prometheus = Proc(
        Command::new(prometheus)
            .arg(format!("--config.file={}", prom_cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
            .arg(format!("--web.listen-address={prom}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !http_get(prom, "/-/ready").0.contains(" 200 ") {
        assert!(t0.elapsed() < Duration::from_secs(60), "prometheus not ready on {prom}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let fs = VsiDaemon { port: vsi };
    let data = free_udp_port();
    let r = fs.vsi(&[
        "mode = VDIF_8000-512-16-2 ;",
        "net_protocol = udps : 32M : 1M ;",
        &format!("net_port = {data} ;"),
        "set_disks? ;",
        "record = on : alerts ;",
    ]);
    assert!(r[3].starts_with("!set_disks? 0 : 3 : "), "{r:?}");
    assert!(r[4].starts_with("!record = 0"), "{r:?}");
    let me = metrics.to_string();
    alerts_until(prom, "a recording without data", |a| {
        a.iter()
            .any(|(n, s, i)| n == "EvlbiRecordingNoData" && (s == "pending" || s == "firing") && *i == me)
    });
    let send = backend_sim(data, "3s", &[]);
    let dropped = "evlbi_stream_disks_dropped{source=\"record\"}";
    assert_eq!(
        metric_becomes(metrics, dropped, 1.0),
        Some(1.0),
        "the small disk failed"
    );
    alerts_until(prom, "a disk dropped while data flow", |a| {
        a.iter()
            .any(|(n, s, i)| n == "EvlbiDiskDropped" && s == "firing" && *i == me)
            && !a.iter().any(|(n, ..)| n == "EvlbiRecordingNoData")
    });
    let _ = common::stream_send_json(send);
    let r = fs.vsi(&["record = off ;"]);
    assert!(r[0].starts_with("!record = 0"), "{r:?}");
    // The dropped disk is said where the FS's fb_status looks: status? bit 0x2, then error?
    // names it; it has left the disk set.
    // The frames in flight to it reached no disk: a second error, after the disk's.
    let r = fs.vsi(&["status? ;", "error? ;", "error? ;", "status? ;", "set_disks? ;"]);
    let word = |reply: &str| {
        let hex = reply.split(':').nth(1).unwrap().trim().trim_end_matches(';').trim();
        u32::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap()
    };
    assert_eq!(word(&r[0]) & 0x2, 0x2, "{r:?}");
    assert!(
        r[1].contains(&small.path().display().to_string()) && r[1].contains("dropped"),
        "{r:?}"
    );
    // The frames the dropped disk had in flight, if any, are the next error; then none.
    assert!(
        r[2].contains("frames reached the recorder but no disk") || r[2].starts_with("!error? 0 :  :"),
        "{r:?}"
    );
    assert_eq!(word(&r[3]) & 0x2, 0, "error? took them: {r:?}");
    assert!(
        r[4].starts_with("!set_disks? 0 : 2 : ") && !r[4].contains(&small.path().display().to_string()),
        "{r:?}"
    );
}

/// Bytes of the files below `dir` (recursively).
fn bytes_below(dir: &Path) -> u64 {
    std::fs::read_dir(dir).unwrap().fold(0, |sum, e| {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        sum + if m.is_dir() { bytes_below(&e.path()) } else { m.len() }
    })
}

/// `PATH=GB` fields (after jive5ab's in `rtime?` and `status?`) as bytes, in order.
fn disk_fields(fields: &[&str]) -> Vec<(String, f64)> {
    fields
        .iter()
        .filter_map(|f| f.rsplit_once('='))
        .map(|(p, gb)| (p.to_string(), gb.trim_end_matches("GB").parse::<f64>().unwrap() * 1e9))
        .collect()
}

/// A reply's fields after the return code, the trailing " ;" gone.
fn reply_fields(reply: &str) -> Vec<&str> {
    reply.trim_end_matches(';').trim_end().split(" : ").skip(1).collect()
}

/// Issue 37 (3): two small file systems of different sizes (tmpfs size=24m and 48m) recording a
/// 32 Mb/s stream in a 2048 Mb/s mode. While it records, `rtime?`'s time left is at the rate
/// it measures (well under the mode's) over the set's free space, and `status?` and `rtime?`
/// end with each disk's free space; the metrics say the rate was measured. Once stopped, each
/// disk's free space is its size less what was written on it, and the rate is the mode's again.
#[test]
fn rtime_and_status_say_each_disks_free_space_and_the_time_left_at_the_measured_rate() {
    let mut small = Vec::new();
    for mib in [24u64, 48] {
        match SmallDisk::mount(mib << 20) {
            Ok(d) => small.push((d, mib << 20)),
            Err(why) => {
                eprintln!("SKIPPED: the disk space test: cannot mount a small tmpfs (needs root): {why}");
                return;
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (vsi, metrics) = (free_tcp_port(), SocketAddr::from(([127, 0, 0, 1], free_tcp_port())));
    let cfg = dir.path().join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "vsi = \"127.0.0.1:{vsi}\"\nmetrics = \"{metrics}\"\ninterval = \"200ms\"\n\
             disks = [\"{}\", \"{}\"]\n",
            small[0].0.path().display(),
            small[1].0.path().display()
        ),
    )
    .unwrap();
    let (_serve, log) = serve_with_config(&cfg, &[]);
    lines_until(&log, "VSI-S on");
    let fs = VsiDaemon { port: vsi };
    let data = free_udp_port();
    // 2048 Mb/s of data in 8000-byte payloads, 8032-byte frames, as rtime? prints it.
    let (mode_mbps, mode_said) = (2048.0 * 8032.0 / 8000.0, "2056.19Mbps");
    let r = fs.vsi(&[
        "mode = VDIF_8000-2048-16-2 ;",
        "net_protocol = udps : 32M : 1M ;",
        &format!("net_port = {data} ;"),
        "rtime? ;",
        "record = on : spaced ;",
    ]);
    let idle = reply_fields(&r[3]);
    assert_eq!(idle[6], mode_said, "idle: the mode's rate: {r:?}");
    assert!(r[4].starts_with("!record = 0"), "{r:?}");
    let sent_mbps = 32.0 * 8032.0 / 8000.0;
    let send = Proc(
        bin()
            .args(["stream", "send", "--generate", "--stations", "Ef", "--rate", "32M"])
            .args(["--frame", "8000", "--seq-format", "jive5ab", "--loop", "--json"])
            .args(["--max-lag", "1h", "--duration", "4s"])
            .args(["--to", &format!("127.0.0.1:{data}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let measured = "evlbi_serve_fill_rate_measured{source=\"serve\"}";
    assert_eq!(
        metric_becomes(metrics, measured, 1.0),
        Some(1.0),
        "a running recording's rate"
    );
    let r = fs.vsi(&["rtime? ;", "status? ;"]);
    let (rtime, status) = (reply_fields(&r[0]), reply_fields(&r[1]));
    let rate: f64 = rtime[6].trim_end_matches("Mbps").parse().unwrap();
    // Frames leave at their VDIF time or later, and the recording started before the sender:
    // what it wrote over its time is at most the sent rate (a frame or two of slack).
    assert!(
        rate > 0.0 && rate <= sent_mbps * 1.05 && rate < mode_mbps / 10.0,
        "the measured rate, not the mode's: {r:?}"
    );
    let set_free: f64 = rtime[1].trim_end_matches("GB").parse::<f64>().unwrap() * 1e9;
    let left: f64 = rtime[0].trim_end_matches('s').parse().unwrap();
    let want = set_free * 8.0 / (rate * 1e6);
    assert!((left - want).abs() <= 0.01 * want, "{left} s, want {want}: {r:?}");
    let per_disk = disk_fields(&rtime[7..]);
    assert_eq!(per_disk.len(), 2, "{r:?}");
    let sum: f64 = per_disk.iter().map(|d| d.1).sum();
    assert!((sum - set_free).abs() <= 1e4, "two file systems, both counted: {r:?}");
    let word = u32::from_str_radix(status[0].trim_start_matches("0x"), 16).unwrap();
    assert_eq!(word & 0x40, 0x40, "recording: {r:?}");
    let on_status = disk_fields(&status[1..]);
    assert_eq!(on_status.len(), 2, "each disk after the status word: {r:?}");
    for (d, _) in &small {
        let p = d.path().display().to_string();
        assert!(on_status.iter().any(|x| x.0 == p), "{p}: {r:?}");
    }
    let _ = common::stream_send_json(send);
    let r = fs.vsi(&["record = off ;"]);
    assert!(r[0].starts_with("!record = 0"), "{r:?}");
    assert_eq!(metric_becomes(metrics, measured, 0.0), Some(0.0), "idle again");
    let r = fs.vsi(&["status? ;", "rtime? ;"]);
    assert_eq!(reply_fields(&r[1])[6], mode_said, "idle: {r:?}");
    let mut written_total = 0;
    let after = disk_fields(&reply_fields(&r[0])[1..]);
    for (d, size) in &small {
        let p = d.path().display().to_string();
        let free = after.iter().find(|x| x.0 == p).map(|x| x.1).expect(&p);
        let written = bytes_below(d.path());
        written_total += written;
        // tmpfs uses whole pages, and a directory or two: within 64 KiB of the files' bytes.
        let used = *size as f64 - free;
        assert!(
            used >= written as f64 - 1e4 && used <= written as f64 + 65536.0 + 1e4,
            "{}: {written} bytes written, {used} used: {r:?}",
            d.path().display()
        );
    }
    assert!(written_total > 4_000_000, "the scan was written: {written_total} bytes");
}
