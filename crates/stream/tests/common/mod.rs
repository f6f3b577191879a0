//! What the virtual-time tests share: the receiver as a simulation endpoint.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use linkemu::sim::Endpoint;
use stream::{FrameSink, Receiver};

/// Where the simulated datagrams come from, as the receiver sees it.
pub const FROM: &str = "192.0.2.1:5000";

/// The receiver as a simulation endpoint, ticking every millisecond like its socket loop: it
/// expires what is due and sends the NAKs it has.
pub struct SimReceiver<S: FrameSink> {
    pub receiver: Receiver,
    pub sink: S,
    next_tick: Instant,
    naks: VecDeque<Vec<u8>>,
}

impl<S: FrameSink> SimReceiver<S> {
    /// `receiver` writing to `sink`, its first tick at `start`.
    pub fn new(receiver: Receiver, sink: S, start: Instant) -> Self {
        SimReceiver {
            receiver,
            sink,
            next_tick: start,
            naks: VecDeque::new(),
        }
    }
}

impl<S: FrameSink> Endpoint for SimReceiver<S> {
    fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        let from: SocketAddr = FROM.parse().expect("address");
        self.receiver
            .handle_datagram(now, from, datagram, false, &mut self.sink);
    }
    fn poll_transmit(&mut self, _now: Instant) -> Option<Vec<u8>> {
        self.naks.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Some(self.next_tick)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.receiver.expire(now);
        for (_, nak) in self.receiver.poll_naks(now) {
            let mut b = Vec::new();
            nak.encode(&mut b);
            self.naks.push_back(b);
        }
        self.next_tick = now + Duration::from_millis(1);
    }
}
