//! The competing CPU-bound task of `--cpu-load` (seed 001 §4: "a CPU intensive task" on the
//! sending host at a given nice level, to see how much CPU a TCP sender needs).
//!
//! The task is a child process (the evlbi binary itself, through a hidden subcommand that calls
//! [`burn`]) started at the asked nice level: the level is set between fork and exec, so the
//! task never runs at another one, and a level the user may not set (negative without
//! CAP_SYS_NICE) fails the start. It cannot outlive the test: [`Burner`] kills it by PID when
//! stopped or dropped (error paths included), the kernel kills it if the thread that started it
//! ends (PR_SET_PDEATHSIG: start it from a thread that lives as long as the test, e.g. `main`),
//! and it stops by itself after its maximum run time or when its parent changes.

// unsafe: sysconf(3), sched_setaffinity(2) and getppid(2) for the CPU burners: std has none.
#![allow(unsafe_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netio::counters::{clock_ticks_per_second, ProcessStat};
use probe::tcp_results::CpuLoadReport;

use crate::error::ProbeSessionError;

/// Lowest (most favoured) nice level.
pub const NICE_MIN: i32 = -20;
/// Highest (least favoured) nice level.
pub const NICE_MAX: i32 = 19;

/// How to start the competing task.
#[derive(Clone, Debug)]
pub struct CpuLoadSpec {
    /// Executable to run (usually `std::env::current_exe()`).
    pub program: PathBuf,
    /// Its arguments up to the ones [`Burner::start`] appends (`--threads K --seconds S
    /// --parent PID`), e.g. `["probe", "burn-cpu"]`.
    pub args: Vec<String>,
    /// Nice level, [`NICE_MIN`]..=[`NICE_MAX`].
    pub nice: i32,
    /// Spinning threads (usually one per CPU).
    pub threads: u32,
    /// The task ends by itself after this long.
    pub max_run: Duration,
}

/// CPUs online.
pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// A running competing task; killed and reaped when stopped or dropped.
#[derive(Debug)]
pub struct Burner {
    child: Option<Child>,
    spec: CpuLoadSpec,
    nice_observed: Option<i32>,
    mark: Option<(Instant, ProcessStat)>,
}

impl Burner {
    /// Start the task at `spec.nice`.
    pub fn start(spec: &CpuLoadSpec) -> Result<Burner, ProbeSessionError> {
        if !(NICE_MIN..=NICE_MAX).contains(&spec.nice) {
            return Err(ProbeSessionError::CpuLoad(format!(
                "nice level {} outside {NICE_MIN}..={NICE_MAX}",
                spec.nice
            )));
        }
        let nice = spec.nice;
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .arg("--threads")
            .arg(spec.threads.max(1).to_string())
            .arg("--seconds")
            .arg(format!("{:.3}", spec.max_run.as_secs_f64()))
            .arg("--parent")
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: the closure runs in the child between fork and exec and calls only
        // async-signal-safe system calls (setpriority, prctl) and errno access.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                if libc::setpriority(libc::PRIO_PROCESS, 0, nice) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| {
            let hint = if nice < 0 && matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) {
                " (a negative nice level needs root or CAP_SYS_NICE)"
            } else {
                ""
            };
            ProbeSessionError::CpuLoad(format!(
                "cannot start the CPU load at nice {nice} ({}): {e}{hint}",
                spec.program.display()
            ))
        })?;
        let nice_observed = ProcessStat::read(child.id()).ok().map(|s| s.nice);
        Ok(Burner {
            child: Some(child),
            spec: spec.clone(),
            nice_observed,
            mark: None,
        })
    }

    /// The task's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Start measuring the task's CPU here (the start of the data phase).
    pub fn mark(&mut self) {
        self.mark = self
            .pid()
            .and_then(|p| ProcessStat::read(p).ok())
            .map(|s| (Instant::now(), s));
    }

    /// Measure the task's CPU since [`Burner::mark`], kill it and reap it.
    pub fn stop(mut self) -> CpuLoadReport {
        let end = self.pid().and_then(|p| ProcessStat::read(p).ok());
        let cpus = online_cpus();
        let task_pct = match (self.mark, end) {
            (Some((t0, a)), Some(b)) => {
                let ticks = (b.utime + b.stime).saturating_sub(a.utime + a.stime);
                let secs = t0.elapsed().as_secs_f64().max(1e-9);
                Some((100.0 * ticks as f64 / clock_ticks_per_second() as f64 / secs / f64::from(cpus)).min(100.0))
            }
            _ => None,
        };
        self.kill();
        CpuLoadReport {
            nice: self.spec.nice,
            nice_observed: self.nice_observed,
            threads: self.spec.threads.max(1),
            cpus,
            task_cpu_pct: task_pct,
            available_cpu_pct: task_pct.map(|p| 100.0 - p),
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SIGKILL by PID of a child we started and have not reaped; then reap it.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Burner {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The competing task's body (the hidden `burn-cpu` subcommand): `threads` threads spin until
/// `max_run` has passed or the process's parent is no longer `parent`. Returns the exit code.
pub fn burn(threads: u32, max_run: Duration, parent: u32) -> i32 {
    // SAFETY: getppid has no preconditions.
    let parent_alive = || unsafe { libc::getppid() } as u32 == parent;
    if !parent_alive() {
        return 1;
    }
    let deadline = Instant::now() + max_run.min(Duration::from_secs(8 * 24 * 3600));
    let spin = || {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        while Instant::now() < deadline && parent_alive() {
            for _ in 0..200_000 {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
            }
            std::hint::black_box(x);
        }
    };
    // Threads inherit the nice level set before exec.
    std::thread::scope(|s| {
        for _ in 1..threads.clamp(1, 1024) {
            s.spawn(spin);
        }
        spin();
    });
    0
}
