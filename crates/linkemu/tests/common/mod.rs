//! Helpers shared by the integration tests.

use std::time::{Duration, Instant};

use linkemu::{Admission, Link};

/// One packet offered to a link: when, what, how many bytes.
pub struct Arrival<P> {
    pub at: Instant,
    pub packet: P,
    pub len: usize,
}

/// What the driver saw: admissions in push order, deliveries with the exact
/// time they were polled (always their release time).
pub struct Trace<P> {
    pub admissions: Vec<Admission>,
    pub deliveries: Vec<(Instant, P)>,
}

/// Feeds time-ordered arrivals into `link`, polling at each release time
/// exactly (as an event-driven driver would), then drains the link.
pub fn drive<P: Clone>(link: &mut Link<P>, arrivals: impl IntoIterator<Item = Arrival<P>>) -> Trace<P> {
    let mut trace = Trace {
        admissions: Vec::new(),
        deliveries: Vec::new(),
    };
    for a in arrivals {
        drain_until(link, a.at, &mut trace.deliveries);
        trace.admissions.push(link.push(a.at, a.packet, a.len));
    }
    while let Some(r) = link.next_release() {
        drain_until(link, r, &mut trace.deliveries);
    }
    trace
}

fn drain_until<P>(link: &mut Link<P>, t: Instant, out: &mut Vec<(Instant, P)>) {
    while let Some(r) = link.next_release().filter(|r| *r <= t) {
        let p = link.poll(r).expect("next_release promised a packet");
        out.push((r, p));
    }
}

/// `n` packets of `len` bytes, numbered 0.., every `spacing` from `base`.
pub fn paced(base: Instant, n: u64, spacing: Duration, len: usize) -> impl Iterator<Item = Arrival<u64>> {
    (0..n).map(move |i| Arrival {
        at: base + spacing * u32::try_from(i).expect("test sizes fit u32"),
        packet: i,
        len,
    })
}

/// The value at quantile `q` of a sorted slice (nearest rank).
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Mean of durations.
pub fn mean(xs: &[Duration]) -> Duration {
    xs.iter().sum::<Duration>() / u32::try_from(xs.len()).expect("fits")
}
