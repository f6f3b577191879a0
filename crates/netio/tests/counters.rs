//! /proc parsers against real text, and the live files.

use netio::counters::{CpuTimes, ProcessCpu, UdpCounters};
use proptest::prelude::*;

const SNMP: &str = "Ip: Forwarding DefaultTTL InReceives\nIp: 1 64 100\n\
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
Udp: 123456 7 89 654321 80 3 1 0 0\nUdpLite: InDatagrams NoPorts\nUdpLite: 0 0\n";

#[test]
fn parses_snmp_by_name() {
    let c = UdpCounters::parse(SNMP).unwrap();
    assert_eq!(c.in_datagrams, 123_456);
    assert_eq!(c.no_ports, 7);
    assert_eq!(c.in_errors, 89);
    assert_eq!(c.out_datagrams, 654_321);
    assert_eq!(c.rcvbuf_errors, 80);
    assert_eq!(c.sndbuf_errors, 3);
    assert_eq!(c.in_csum_errors, 1);
    assert!(UdpCounters::parse("Ip: a\nIp: 1\n").is_err());
}

#[test]
fn parses_stat_lines() {
    let stat = "cpu  100 5 50 1000 10 1 2 3 0 0\ncpu0 50 2 25 500 5 0 1 1 0 0\nintr 1\n";
    let c = CpuTimes::parse(stat).unwrap();
    assert_eq!(
        (c.user, c.nice, c.system, c.idle, c.softirq, c.steal),
        (100, 5, 50, 1000, 2, 3)
    );
    let later = CpuTimes {
        user: 200,
        idle: 1100,
        ..c
    };
    let s = later.share_since(&c);
    assert!((s.user - 50.0).abs() < 1e-9 && (s.idle - 50.0).abs() < 1e-9);
    // A command name with spaces and parentheses.
    let pstat = "4242 (evil ) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 77 33 0 0 20 0 1 0 100 1000 10";
    let p = ProcessCpu::parse(pstat).unwrap();
    assert_eq!((p.utime, p.stime), (77, 33));
}

#[test]
fn live_counters_move_with_real_traffic() {
    let before = UdpCounters::read().unwrap();
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..100 {
        tx.send_to(b"counted", rx.local_addr().unwrap()).unwrap();
    }
    let after = UdpCounters::read().unwrap();
    assert!(after.delta(&before).out_datagrams >= 100);
    CpuTimes::read().unwrap();
    ProcessCpu::read().unwrap();
}

proptest! {
    #[test]
    fn parsers_never_panic(s in ".{0,300}") {
        let _ = UdpCounters::parse(&s);
        let _ = CpuTimes::parse(&s);
        let _ = ProcessCpu::parse(&s);
    }
}
