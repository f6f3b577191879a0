//! The few TCP socket options a TCP test needs, through libc: TCP_INFO (parsed by
//! [`probe::tcp::TcpInfo::parse`]) and TCP_CONGESTION, plus the kernel's list of congestion
//! controls.

// unsafe: TCP socket options (TCP_INFO, congestion control, pacing): std offers none of them.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;

use probe::tcp::{TcpInfo, TCP_INFO_LEN};

/// Where the kernel lists the congestion controls it has (built in or loaded).
pub const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// The socket's TCP_INFO (getsockopt(IPPROTO_TCP, TCP_INFO)): the kernel writes as much of its
/// `struct tcp_info` as fits and says how much; older kernels leave later fields out.
pub fn tcp_info(sock: &impl AsRawFd) -> io::Result<TcpInfo> {
    let mut buf = [0u8; TCP_INFO_LEN];
    let mut len = TCP_INFO_LEN as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `buf` and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let got = (len as usize).min(TCP_INFO_LEN);
    TcpInfo::parse(&buf[..got]).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Set the socket's congestion control (setsockopt(IPPROTO_TCP, TCP_CONGESTION)). The kernel
/// answers ENOENT for a name it does not have.
pub fn set_congestion(sock: &impl AsRawFd, name: &str) -> io::Result<()> {
    // SAFETY: setsockopt reads `name.len()` bytes from the string's buffer.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The socket's congestion control (getsockopt(IPPROTO_TCP, TCP_CONGESTION)).
pub fn congestion(sock: &impl AsRawFd) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `buf` and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let b = &buf[..(len as usize).min(buf.len())];
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Ok(String::from_utf8_lossy(&b[..end]).into_owned())
}

/// The congestion controls this kernel offers (built in or loaded), from [`AVAILABLE_CC`].
pub fn available_congestion() -> Option<Vec<String>> {
    let text = std::fs::read_to_string(AVAILABLE_CC).ok()?;
    Some(text.split_whitespace().map(str::to_string).collect())
}

/// Whether this host can run a sender with congestion control `name`: it is set on a fresh
/// socket (root may thereby load a module, e.g. tcp_bbr). The error lists what the kernel offers.
pub fn check_congestion(name: &str) -> Result<(), crate::error::ProbeSessionError> {
    let unknown = |why: String| crate::error::ProbeSessionError::UnknownCongestionControl {
        name: name.to_string(),
        why,
        available: available_congestion().map_or_else(|| format!("(cannot read {AVAILABLE_CC})"), |v| v.join(" ")),
    };
    crate::control::check_cc_name(name).map_err(|e| unknown(e.to_string()))?;
    // SAFETY: socket(2) with constant arguments; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(netio::io_err("create a TCP socket")(io::Error::last_os_error()).into());
    }
    // SAFETY: `fd` is a new descriptor nobody else owns.
    let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    set_congestion(&owned, name).map_err(|e| unknown(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// The raw-bytes parse agrees with libc's `struct tcp_info` on the same socket: the offsets
    /// of probe::tcp are the kernel's.
    #[test]
    fn parsed_tcp_info_matches_libc_struct() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 100_000]).unwrap();
        let mut got = 0;
        let mut buf = [0u8; 65536];
        while got < 100_000 {
            got += s.read(&mut buf).unwrap();
        }
        // Wait (bounded) for the last ACK, so the counters stand still between the two readings.
        let mut ours = tcp_info(&c).unwrap();
        for _ in 0..400 {
            if ours.bytes_acked == Some(100_001) && ours.unacked == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            ours = tcp_info(&c).unwrap();
        }
        // SAFETY: getsockopt into a zeroed libc::tcp_info of its own size.
        let theirs = unsafe {
            let mut t: libc::tcp_info = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
            let rc = libc::getsockopt(
                c.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut t as *mut libc::tcp_info).cast(),
                &mut len,
            );
            assert_eq!(rc, 0);
            t
        };
        assert_eq!(ours.state, theirs.tcpi_state);
        assert_eq!(ours.ca_state, theirs.tcpi_ca_state);
        assert_eq!(ours.options, theirs.tcpi_options);
        assert_eq!(ours.snd_mss, theirs.tcpi_snd_mss);
        assert_eq!(ours.rcv_mss, theirs.tcpi_rcv_mss);
        assert_eq!(ours.pmtu, theirs.tcpi_pmtu);
        assert_eq!(ours.advmss, theirs.tcpi_advmss);
        assert_eq!(ours.snd_cwnd, theirs.tcpi_snd_cwnd);
        assert_eq!(ours.snd_ssthresh, theirs.tcpi_snd_ssthresh);
        assert_eq!(ours.total_retrans, theirs.tcpi_total_retrans);
        assert_eq!(ours.rcv_space, theirs.tcpi_rcv_space);
        assert_eq!(ours.pacing_rate, Some(theirs.tcpi_pacing_rate));
        assert_eq!(ours.bytes_acked, Some(theirs.tcpi_bytes_acked));
        assert_eq!(ours.segs_out, Some(theirs.tcpi_segs_out));
        assert_eq!(ours.min_rtt_us, Some(theirs.tcpi_min_rtt));
        assert_eq!(ours.data_segs_out, Some(theirs.tcpi_data_segs_out));
        // What was written and acknowledged: the kernel's bytes_acked counts the SYN too
        // (probe::tcp::app_bytes_acked takes it off).
        assert_eq!(ours.bytes_acked, Some(100_001));
        assert_eq!(ours.state, 1, "ESTABLISHED");
    }

    #[test]
    fn congestion_control_is_set_read_back_and_unknown_names_list_the_kernels() {
        let avail = available_congestion().expect("the kernel lists its congestion controls");
        assert!(avail.iter().any(|c| c == "reno"), "{avail:?}");
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_congestion(&c, "reno").unwrap();
        assert_eq!(congestion(&c).unwrap(), "reno");
        assert!(check_congestion("reno").is_ok());
        match check_congestion("no-such-cc") {
            Err(e @ crate::error::ProbeSessionError::UnknownCongestionControl { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("no-such-cc") && msg.contains("reno"), "{msg}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            check_congestion("Bad Name"),
            Err(crate::error::ProbeSessionError::UnknownCongestionControl { .. })
        ));
    }
}
