//! /proc parsers against real text, the live files, and malformed input never panicking.

// unsafe: stat(2) of a socket (its inode in /proc/net/udp); std cannot ask.
#![allow(unsafe_code)]

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use netio::counters::{
    clock_ticks_per_second, parse_cpu_times, parse_net_dev, parse_net_dev_all, parse_process_cpu, read_cpu_times,
    read_net_dev, read_process_cpu, CountersError, CpuTimes, InterfaceCounters, ProcessCpu, ProcessStat, UdpCounters,
    UdpSocketEntry,
};
use proptest::prelude::*;

/// /proc/net/snmp of a Linux 6.x host (Ip/Icmp/Tcp lines shortened).
const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams OutRequests
Ip: 1 64 2281934 0 0 0 2289131
Icmp: InMsgs InErrors InCsumErrors OutMsgs
Icmp: 45 0 0 45
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens
Tcp: 1 200 120000 -1 1051
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 2262424 3 7884 2270410 7881 2 1 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
";

const STAT: &str = "\
cpu  615534 3 190669 2191993 5610 7 8248 2877 0 0
cpu0 287910 0 93505 1119368 990 0 4328 1420 0 0
cpu1 327624 3 97163 1072625 4619 7 3919 1457 0 0
intr 96412211 0 9 0 0
ctxt 190356712
btime 1760000000
processes 26091
";

/// A process whose command name is "evil ) (name" — field 2 holds ") (".
const PID_STAT: &str = "2614 (evil ) (name) R 2609 2609 25912 0 -1 4194304 98 0 0 0 77 33 0 0 20 0 1 0 1513757 \
3133440 382 18446744073709551615 94669450846208 94669450866089 140734536988144 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";

const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 18039464106 2272293    0    0    0     0          0         0 18039464106 2272293    0    0    0     0       0          0
  ifb0:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: 521302599   19624    1    2    0     0          0         0  1385161   15612    3    4    0     0       0          0
";

#[test]
fn parses_snmp_by_name() {
    let c = netio::parse_udp_counters(SNMP).unwrap();
    assert_eq!(
        c,
        UdpCounters {
            in_datagrams: 2_262_424,
            no_ports: 3,
            in_errors: 7884,
            out_datagrams: 2_270_410,
            rcvbuf_errors: 7881,
            sndbuf_errors: 2,
            in_csum_errors: 1,
        }
    );
    // By name, not position; missing fields read 0.
    let shuffled = "Udp: OutDatagrams InDatagrams\nUdp: 5 9\n";
    let c = netio::parse_udp_counters(shuffled).unwrap();
    assert_eq!((c.in_datagrams, c.out_datagrams, c.rcvbuf_errors), (9, 5, 0));
    assert!(matches!(
        netio::parse_udp_counters("Ip: a\nIp: 1\n"),
        Err(CountersError::Malformed { .. })
    ));
    assert!(netio::parse_udp_counters("Udp: InDatagrams\nUdp: lots\n").is_err());
    let later = UdpCounters {
        out_datagrams: 2_270_500,
        ..netio::parse_udp_counters(SNMP).unwrap()
    };
    assert_eq!(later.delta(&netio::parse_udp_counters(SNMP).unwrap()).out_datagrams, 90);
}

#[test]
fn parses_stat_and_shares() {
    let c = parse_cpu_times(STAT).unwrap();
    assert_eq!(
        c,
        CpuTimes {
            user: 615_534,
            nice: 3,
            system: 190_669,
            idle: 2_191_993,
            iowait: 5610,
            irq: 7,
            softirq: 8248,
            steal: 2877
        }
    );
    let later = CpuTimes {
        user: c.user + 50,
        system: c.system + 25,
        idle: c.idle + 25,
        ..c
    };
    let d = later.delta(&c);
    assert_eq!(d.total(), 100);
    let s = d.shares();
    assert!((s.user_pct - 50.0).abs() < 1e-9 && (s.system_pct - 25.0).abs() < 1e-9 && (s.idle_pct - 25.0).abs() < 1e-9);
    assert!((s.busy_pct() - 75.0).abs() < 1e-9);
    assert_eq!(later.share_since(&c), s);
    assert_eq!(c.delta(&c).shares().idle_pct, 0.0);
    assert!(parse_cpu_times("cpu 1 2 3\n").is_err());
    assert!(parse_cpu_times("cpu 1 2 x 4\n").is_err());
    assert!(parse_cpu_times("cpu0 1 2 3 4\n").is_err());
}

#[test]
fn parses_pid_stat_after_the_last_paren() {
    let p = parse_process_cpu(PID_STAT).unwrap();
    assert_eq!((p.utime, p.stime), (77, 33));
    assert!(parse_process_cpu("1 (x) R 1 2 3").is_err());
    assert!(parse_process_cpu("no parens at all").is_err());
    let later = ProcessCpu {
        utime: 77 + clock_ticks_per_second(),
        stime: 33,
        cutime: p.cutime,
        cstime: p.cstime + clock_ticks_per_second() / 2,
    };
    // One second of user CPU over two seconds of wall time: 50 % of one core.
    let hz = clock_ticks_per_second();
    let share = later.share_since(&p, Duration::from_secs(2), hz);
    assert!((share.user_pct - 50.0).abs() < 1e-9 && share.system_pct == 0.0);
    assert!((share.total_pct() - 50.0).abs() < 1e-9);
    // Half a second of a waited-for child's system CPU over two seconds: 25 %, apart from ours.
    let kids = later.children_share_since(&p, Duration::from_secs(2), hz);
    assert!(kids.user_pct == 0.0 && (kids.system_pct - 25.0).abs() < 1e-9);
}

#[test]
fn parses_net_dev() {
    let eth = parse_net_dev(NET_DEV, "eth0").unwrap();
    assert_eq!(
        eth,
        InterfaceCounters {
            name: "eth0".into(),
            rx_bytes: 521_302_599,
            rx_packets: 19_624,
            rx_errs: 1,
            rx_drop: 2,
            tx_bytes: 1_385_161,
            tx_packets: 15_612,
            tx_errs: 3,
            tx_drop: 4,
        }
    );
    assert_eq!(parse_net_dev(NET_DEV, "lo").unwrap().rx_bytes, 18_039_464_106);
    assert_eq!(parse_net_dev_all(NET_DEV).unwrap().len(), 3);
    assert!(matches!(
        parse_net_dev(NET_DEV, "eth9"),
        Err(CountersError::NoInterface { .. })
    ));
    assert!(parse_net_dev("lo: 1 2 3\n", "lo").is_err());
    let later = InterfaceCounters {
        rx_packets: eth.rx_packets + 7,
        ..eth.clone()
    };
    assert_eq!(later.delta(&eth).rx_packets, 7);
}

/// /proc/net/udp as Linux 6.x writes it (trailing spaces on the header included).
const NET_UDP: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            \n\
  123: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000   101        0 21212 2 0000000000000000 0         \n\
 4011: 0100007F:9C4A 0100007F:D431 01 00000000:0001B200 00:00000000 00000000     0        0 987654 2 ffff8c0a3b4e0000 1234     \n";

#[test]
fn parses_udp_socket_table_and_pid_nice() {
    let t = UdpSocketEntry::parse(NET_UDP).unwrap();
    assert_eq!(
        t,
        vec![
            UdpSocketEntry {
                local_port: 53,
                rx_queue: 0,
                inode: 21212,
                drops: 0
            },
            UdpSocketEntry {
                local_port: 0x9c4a,
                rx_queue: 0x1b200,
                inode: 987_654,
                drops: 1234
            },
        ]
    );
    assert!(UdpSocketEntry::parse("").is_err());
    assert!(UdpSocketEntry::parse("sl local_address inode\n").is_err());
    let cut = NET_UDP
        .lines()
        .take(2)
        .collect::<Vec<_>>()
        .join("\n")
        .replace(" 0         ", "");
    assert!(UdpSocketEntry::parse(&cut).is_err(), "{cut}");
    let s = ProcessStat::parse(PID_STAT).unwrap();
    assert_eq!((s.utime, s.stime, s.nice), (77, 33, 0));
    let niced = PID_STAT.replace(" 20 0 1 0 ", " 39 19 1 0 ");
    assert_eq!(ProcessStat::parse(&niced).unwrap().nice, 19);
    let negative = PID_STAT.replace(" 20 0 1 0 ", " 0 -20 1 0 ");
    assert_eq!(ProcessStat::parse(&negative).unwrap().nice, -20);
    assert!(ProcessStat::parse("1 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13").is_err());
}

#[test]
fn a_full_receive_buffer_shows_in_the_sockets_drops() {
    use std::os::fd::AsRawFd;
    // A receive buffer of the kernel's minimum, never read: all but the first few datagrams of
    // 200 are dropped at the socket, and /proc/net/udp says how many.
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    netio::size_buffers(&rx, netio::BufferRequest::new(1024, 0)).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..200 {
        tx.send_to(&[0u8; 1400], rx.local_addr().unwrap()).unwrap();
    }
    // SAFETY: fstat into a zeroed stat of our own open socket.
    let inode = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        assert_eq!(libc::fstat(rx.as_raw_fd(), &mut st), 0);
        st.st_ino
    };
    let mut buf = [0u8; 2000];
    rx.set_nonblocking(true).unwrap();
    // Loopback delivery may be deferred to the softirq thread: drain and re-read until every
    // datagram is accounted for (bounded).
    let mut queued = 0u64;
    let mut e = UdpSocketEntry::default();
    for _ in 0..200 {
        while rx.recv(&mut buf).is_ok() {
            queued += 1;
        }
        e = UdpSocketEntry::read(inode)
            .unwrap()
            .expect("our socket is in the table");
        if queued + e.drops >= 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(e.local_port, rx.local_addr().unwrap().port());
    // Every datagram was either queued or dropped at the socket (loopback loses nothing else).
    assert_eq!(queued + e.drops, 200, "{e:?}");
    assert!(e.drops > 0 && queued > 0, "{e:?}, {queued} queued");
    let me = ProcessStat::read(std::process::id()).unwrap();
    assert!(me.nice >= -20 && me.nice <= 19);
}

#[test]
fn live_counters_move_with_real_traffic() {
    const N: u64 = 500;
    let before = netio::read_udp_counters().unwrap();
    let lo_before = read_net_dev("lo").unwrap();
    let cpu_before = read_cpu_times().unwrap();
    let me_before = read_process_cpu().unwrap();
    let t0 = Instant::now();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..N {
        tx.send_to(b"counted", rx.local_addr().unwrap()).unwrap();
    }
    let after = netio::read_udp_counters().unwrap();
    assert!(after.delta(&before).out_datagrams >= N, "{:?}", after.delta(&before));
    let lo = read_net_dev("lo").unwrap().delta(&lo_before);
    assert!(lo.tx_packets >= N, "{lo:?}");
    let share = read_cpu_times().unwrap().share_since(&cpu_before);
    assert!(share.busy_pct() >= 0.0 && share.busy_pct() <= 100.0 + 1e-9);
    let me = read_process_cpu()
        .unwrap()
        .share_since(&me_before, t0.elapsed(), clock_ticks_per_second())
        .total_pct();
    assert!(me.is_finite() && me >= 0.0);
}

proptest! {
    #[test]
    fn parsers_never_panic(s in "\\PC{0,400}") {
        let _ = netio::parse_udp_counters(&s);
        let _ = parse_cpu_times(&s);
        let _ = parse_process_cpu(&s);
        let _ = parse_net_dev_all(&s);
        let _ = UdpSocketEntry::parse(&s);
        let _ = ProcessStat::parse(&s);
    }

    #[test]
    fn parsers_never_panic_on_near_miss_text(
        s in "((Udp: |cpu |cpu0 |lo: |eth0:| face \\||\\(|\\)|[0-9]{1,25}|[a-zA-Z]{1,8}|-1| |\\|)){0,60}(\n((Udp: |cpu |lo: |[0-9]{1,22}| |\\|)){0,40}){0,4}"
    ) {
        let _ = netio::parse_udp_counters(&s);
        let _ = parse_cpu_times(&s);
        let _ = parse_process_cpu(&s);
        let _ = parse_net_dev_all(&s);
        let _ = parse_net_dev(&s, "lo");
    }
}
