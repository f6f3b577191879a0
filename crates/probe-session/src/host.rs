//! Host counters around a trial: read /proc through `netio::counters` before and after, and
//! keep the differences as `hostcounters`' [`HostDelta`] (the probe crate does not depend on
//! netio). A counter file that cannot be read leaves its part `None`, never fails the trial.

// unsafe: getifaddrs(3): the host's interfaces; std cannot list them.
#![allow(unsafe_code)]

use std::net::IpAddr;
use std::time::Instant;

use hostcounters::HostDelta;
use netio::counters::{
    clock_ticks_per_second, read_cpu_times, read_net_dev, read_process_cpu, CpuTimes, InterfaceCounters, ProcessCpu,
    UdpCounters,
};

/// Counters read at the start of a trial.
#[derive(Debug, Clone)]
pub struct HostSnapshot {
    at: Instant,
    cpu: Option<CpuTimes>,
    process: Option<ProcessCpu>,
    udp: Option<UdpCounters>,
    dev: Option<InterfaceCounters>,
}

impl HostSnapshot {
    /// Read everything now; `interface` names the /proc/net/dev line to follow, if known.
    pub fn take(interface: Option<&str>) -> HostSnapshot {
        HostSnapshot {
            at: Instant::now(),
            cpu: read_cpu_times().ok(),
            process: read_process_cpu().ok(),
            udp: netio::read_udp_counters().ok(),
            dev: interface.and_then(|i| read_net_dev(i).ok()),
        }
    }

    /// Read again and return the differences since this snapshot.
    pub fn delta(&self) -> HostDelta {
        let now = HostSnapshot::take(self.dev.as_ref().map(|d| d.name.as_str()));
        let wall = now.at.saturating_duration_since(self.at);
        let hz = clock_ticks_per_second();
        HostDelta {
            wall_s: wall.as_secs_f64(),
            cpu: self.cpu.zip(now.cpu).map(|(a, b)| b.share_since(&a)),
            process: self.process.zip(now.process).map(|(a, b)| b.share_since(&a, wall, hz)),
            udp: self.udp.zip(now.udp).map(|(a, b)| b.delta(&a)),
            interface: self.dev.as_ref().zip(now.dev.as_ref()).map(|(a, b)| b.delta(a)),
        }
    }
}

pub use netio::counters::socket_drops;

/// The interface holding local address `ip` (getifaddrs(3)), e.g. "lo" for 127.0.0.1. An
/// unspecified address or one no interface holds gives `None`.
pub fn interface_of(ip: IpAddr) -> Option<String> {
    if ip.is_unspecified() {
        return None;
    }
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says which struct it is.
        let addr = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                    // s_addr is in network byte order: its bytes in memory are a.b.c.d.
                    Some(IpAddr::from(a.sin_addr.s_addr.to_ne_bytes()))
                }
                libc::AF_INET6 => {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                    Some(IpAddr::from(a.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if addr == Some(ip) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            found = Some(name.to_string_lossy().into_owned());
            break;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_address_is_on_lo_and_counters_read() {
        assert_eq!(interface_of("127.0.0.1".parse().unwrap()).as_deref(), Some("lo"));
        assert_eq!(interface_of("0.0.0.0".parse().unwrap()), None);
        let s = HostSnapshot::take(Some("lo"));
        let d = s.delta();
        assert!(d.udp.is_some() && d.cpu.is_some() && d.process.is_some());
        assert_eq!(d.interface.map(|i| i.name).as_deref(), Some("lo"));
    }
}
