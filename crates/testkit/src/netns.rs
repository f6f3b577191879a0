//! A network namespace of a test's own, its loopback interface up and holding the addresses the
//! test asks for: a place where peers have addresses other than 127.0.0.1 without touching the
//! host's interfaces (and without a kernel module for dummy or veth devices). Needs root and
//! iproute2; removed on drop.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use crate::FixtureError;

/// A named network namespace (`ip netns add`), deleted on drop.
pub struct Netns {
    name: String,
}

impl Netns {
    /// Why a namespace cannot be made here, or `None`.
    pub fn skip_reason() -> Option<String> {
        if !rustix::process::geteuid().is_root() {
            return Some("not root".into());
        }
        if Command::new("ip").arg("-V").output().is_err() {
            return Some("iproute2 `ip` is not installed".into());
        }
        None
    }

    /// Namespace `evlbi-TAG-PID` with `lo` up and holding `addrs` (/24) besides 127.0.0.1.
    pub fn create(tag: &str, addrs: &[IpAddr]) -> Result<Netns, FixtureError> {
        let ns = Netns {
            name: format!("evlbi-{tag}-{}", std::process::id()),
        };
        ns.ip(&["netns", "add", &ns.name], false)?;
        ns.ip(&["link", "set", "lo", "up"], true)?;
        for a in addrs {
            ns.ip(&["addr", "add", &format!("{a}/24"), "dev", "lo"], true)?;
        }
        Ok(ns)
    }

    fn ip(&self, args: &[&str], inside: bool) -> Result<(), FixtureError> {
        let mut c = Command::new("ip");
        if inside {
            c.args(["-n", &self.name]);
        }
        let out = c.args(args).output().map_err(FixtureError::io("run ip"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(FixtureError::Command {
                command: format!("ip {args:?}"),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command run inside it (`ip netns exec NAME PROGRAM`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Move the calling thread into it: sockets it opens from now on are the namespace's.
    pub fn enter(&self) -> Result<(), FixtureError> {
        enter(&self.path())
    }

    /// The file naming it (for a thread elsewhere to enter with [`enter`]).
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.name)
    }
}

/// Move the calling thread into the network namespace named by the file `path`.
pub fn enter(path: &std::path::Path) -> Result<(), FixtureError> {
    use std::os::fd::AsFd;
    let f = std::fs::File::open(path).map_err(FixtureError::io(path.display().to_string()))?;
    rustix::thread::move_into_link_name_space(f.as_fd(), Some(rustix::thread::LinkNameSpaceType::Network))
        .map_err(|e| FixtureError::io(format!("setns {}", path.display()))(e.into()))
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}
