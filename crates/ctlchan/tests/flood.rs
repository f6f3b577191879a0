//! A flood of idle connections against the accept loop, over real sockets: a client that speaks
//! after thinking is never closed by connections that never speak. Before the loop held idle
//! connections without a thread (at most 64 waiting, the oldest closed first), a flood of
//! 1600 connections a second closed every client that spoke after 50 ms (0 of 20 served).

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use ctlchan::serve::{serve, Limits, ServeStats, Ticket};
use testkit::flood::Flood;

/// Wants "key\n" within the deadline, then answers "ok\n".
fn handler(s: TcpStream, _peer: SocketAddr, t: &Ticket<'_>, _tx: &mpsc::Sender<()>) {
    let _ = s.set_read_timeout(Some(t.remaining().max(Duration::from_millis(1))));
    let mut r = BufReader::new(&s);
    let mut line = String::new();
    if r.read_line(&mut line).is_err() || line != "key\n" || t.authenticated().is_err() {
        return;
    }
    let _ = (&s).write_all(b"ok\n");
}

struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<ServeStats>,
}

impl Server {
    fn start(limits: Limits) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || serve(&l, &flag, &limits, None, &handler, &mut |_| {}).unwrap());
        Server { addr, stop, thread }
    }

    fn stop(self) -> ServeStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// Connect from `from`, think, send the key; whether "ok" came back.
fn client(addr: SocketAddr, from: IpAddr, think: Duration) -> Result<(), String> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).map_err(|e| e.to_string())?;
    s.bind(&SocketAddr::new(from, 0).into()).map_err(|e| e.to_string())?;
    s.connect_timeout(&addr.into(), Duration::from_secs(10))
        .map_err(|e| format!("connect: {e}"))?;
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    std::thread::sleep(think);
    (&s).write_all(b"key\n").map_err(|e| format!("write: {e}"))?;
    let mut line = String::new();
    BufReader::new(&s)
        .read_line(&mut line)
        .map_err(|e| format!("read: {e}"))?;
    if line == "ok\n" {
        Ok(())
    } else {
        Err(format!("closed without an answer ({line:?})"))
    }
}

fn limits(max_idle: usize) -> Limits {
    Limits {
        max_pending: 64,
        // VSI-S's first-request timeout: a flood's connections are not closed for their age.
        handshake_timeout: Duration::from_secs(60),
        max_active: 16,
        max_idle,
    }
}

/// 3000 connections a second from the client's own address, 1024 idle places: a client
/// speaking 100 ms after its connect is served 20 times of 20 (1024 places last 0.34 s).
#[test]
fn a_client_thinking_100_ms_is_served_under_3000_idle_connections_a_second_from_its_address() {
    let server = Server::start(limits(1024));
    let lo: IpAddr = "127.0.0.1".parse().unwrap();
    let flood = Flood::start(server.addr, lo, 3000, Duration::from_secs(3), Duration::from_secs(20));
    // Let the idle places fill first.
    std::thread::sleep(Duration::from_millis(500));
    let outcomes: Vec<_> = (0..20)
        .map(|_| client(server.addr, lo, Duration::from_millis(100)))
        .collect();
    let report = flood.finish();
    let stats = server.stop();
    let served = outcomes.iter().filter(|o| o.is_ok()).count();
    eprintln!(
        "served {served} of 20; flood {report:?} ({:.0}/s); {stats:?}",
        report.rate()
    );
    assert_eq!(
        served,
        20,
        "{outcomes:?}\nflood {report:?}, {:.0}/s\n{stats:?}",
        report.rate()
    );
    // The flood did fill the places: connections were closed for newer ones all along.
    assert!(stats.evicted > 1000, "flood {report:?}\n{stats:?}");
    assert_eq!(stats.sessions, 20, "{stats:?}");
}

/// 3000 connections a second from 127.0.0.2 against clients on 127.0.0.1 that think for 2 s,
/// six times longer than the idle places last under that flood: the flood only ever closes its
/// own connections.
#[test]
fn a_flood_from_another_address_never_closes_a_clients_connection() {
    let server = Server::start(limits(1024));
    let (lo, other): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
    let flood = Flood::start(
        server.addr,
        other,
        3000,
        Duration::from_secs(3),
        Duration::from_secs(20),
    );
    std::thread::sleep(Duration::from_millis(500));
    let clients: Vec<_> = (0..5)
        .map(|_| {
            let addr = server.addr;
            std::thread::spawn(move || client(addr, lo, Duration::from_secs(2)))
        })
        .collect();
    let outcomes: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let report = flood.finish();
    let stats = server.stop();
    let served = outcomes.iter().filter(|o| o.is_ok()).count();
    eprintln!(
        "served {served} of 5; flood {report:?} ({:.0}/s); {stats:?}",
        report.rate()
    );
    assert!(
        outcomes.iter().all(Result::is_ok),
        "{outcomes:?}\nflood {report:?}, {:.0}/s\n{stats:?}",
        report.rate()
    );
    assert!(stats.evicted > 1000, "flood {report:?}\n{stats:?}");
}
