//! Helpers shared by the CLI tests that run evlbi as separate processes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The evlbi binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_evlbi"))
}

/// Spawn `cmd` (a server started on port 0), forward its stderr lines, and return the port it
/// printed after `127.0.0.1:` in one of them (bounded wait).
pub fn spawn_with_port(cmd: &mut Command) -> (Child, u16, Receiver<String>) {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
        if let Some(port) = line
            .split("127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|p| p.parse::<u16>().ok())
        {
            return (child, port, rx);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the server did not print its address on stderr within 10 s");
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
