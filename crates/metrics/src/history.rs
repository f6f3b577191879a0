//! Rate and loss per station, one point per sample (a second), the last [`POINTS`]: what the
//! live page plots. Derived from the totals of successive snapshots; a total that goes down (a
//! new transfer started) restarts the station's differences.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::Serialize;

use crate::status::Status;

/// Points kept per station: ten minutes at one a second.
pub const POINTS: usize = 600;
/// Stations (over all sources) tracked; further ones are not plotted.
pub const MAX_SERIES: usize = 64;

/// One point of a station's history.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Seconds since the metrics server started.
    pub t: f64,
    /// Frame bits per second over the last sample interval.
    pub rate_bps: f64,
    /// Frames lost over lost plus received in that interval.
    pub loss: f64,
}

/// One station's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    /// The source (command or transfer kind).
    pub source: String,
    /// The station.
    pub station: String,
    /// Its points, oldest first.
    pub points: Vec<Point>,
}

/// A station's totals at one sample: bytes, frames received, frames lost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Totals {
    bytes: u64,
    frames: u64,
    lost: u64,
}

#[derive(Debug)]
struct Track {
    source: String,
    station: String,
    last: Option<(f64, Totals)>,
    points: VecDeque<Point>,
}

/// Every station's recent points.
#[derive(Debug, Default)]
pub struct History {
    tracks: Vec<Track>,
}

impl History {
    /// Add a point per station of `snapshot` at `t` seconds.
    pub fn sample(&mut self, t: f64, snapshot: &[(String, Arc<Status>)]) {
        for (source, status) in snapshot {
            for (station, now) in station_totals(status) {
                let i = match self
                    .tracks
                    .iter()
                    .position(|k| k.source == *source && k.station == station)
                {
                    Some(i) => i,
                    None if self.tracks.len() < MAX_SERIES => {
                        self.tracks.push(Track {
                            source: source.clone(),
                            station,
                            last: None,
                            points: VecDeque::with_capacity(POINTS),
                        });
                        self.tracks.len() - 1
                    }
                    None => continue,
                };
                let track = &mut self.tracks[i];
                if let Some((t0, before)) = track.last {
                    let dt = t - t0;
                    let grew = now.bytes >= before.bytes && now.frames >= before.frames && now.lost >= before.lost;
                    if dt > 0.0 && grew {
                        let (frames, lost) = (now.frames - before.frames, now.lost - before.lost);
                        if track.points.len() == POINTS {
                            track.points.pop_front();
                        }
                        track.points.push_back(Point {
                            t,
                            rate_bps: (now.bytes - before.bytes) as f64 * 8.0 / dt,
                            loss: if frames + lost == 0 {
                                0.0
                            } else {
                                lost as f64 / (frames + lost) as f64
                            },
                        });
                    }
                }
                track.last = Some((t, now));
            }
        }
    }

    /// Every station's points.
    pub fn series(&self) -> Vec<Series> {
        self.tracks
            .iter()
            .map(|k| Series {
                source: k.source.clone(),
                station: k.station.clone(),
                points: k.points.iter().copied().collect(),
            })
            .collect()
    }
}

/// Per station of a stream status: its totals (stations listed twice are added up).
fn station_totals(status: &Status) -> Vec<(String, Totals)> {
    let mut out: Vec<(String, Totals)> = Vec::new();
    let mut add = |name: &str, t: Totals| match out.iter_mut().find(|(n, _)| n == name) {
        Some((_, s)) => {
            s.bytes += t.bytes;
            s.frames += t.frames;
            s.lost += t.lost;
        }
        None => out.push((name.to_string(), t)),
    };
    match status {
        Status::StreamRecv(s) => {
            for st in &s.stations {
                let w = &st.window;
                add(
                    &st.station,
                    Totals {
                        bytes: w.placed * st.frame_len as u64,
                        frames: w.placed,
                        lost: st.frames_lost(),
                    },
                );
            }
        }
        Status::StreamRelay(s) => {
            for st in &s.stations {
                add(
                    &st.station,
                    Totals {
                        bytes: st.frames_in * st.frame_len as u64,
                        frames: st.frames_in,
                        lost: st.lost_in_input + st.overflow_dropped,
                    },
                );
            }
        }
        Status::StreamSend(s) => {
            for st in &s.stations {
                add(
                    &st.station,
                    Totals {
                        bytes: st.bytes_sent,
                        frames: st.frames_sent - st.injected_drops.min(st.frames_sent),
                        lost: st.injected_drops,
                    },
                );
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stream::results::{SendStatus, SentStation};

    fn sent(frames: u64, dropped: u64) -> Arc<Status> {
        let empty = serde_json::to_value(histogram::HistSummary::default()).unwrap();
        let st: SentStation = serde_json::from_value(serde_json::json!({
            "file": "g", "station": "Ef", "stream": 0, "frames_per_second": 8000, "threads": 1, "frame_len": 8032,
            "rate_bps": 512e6, "spacing_us": 125.0, "frames_sent": frames, "bytes_sent": frames * 8040,
            "injected_drops": dropped, "achieved_rate_bps": 0.0, "loops": 0, "source_underruns": 0,
            "garbage_bytes": 0, "departure_gap_ns": empty, "lateness_ns": empty, "slips": 0
        }))
        .unwrap();
        Arc::new(Status::StreamSend(SendStatus {
            stations: vec![st],
            ..SendStatus::default()
        }))
    }

    #[test]
    fn points_are_differences_of_totals_and_bounded() {
        let mut h = History::default();
        let src = |s| vec![("stream_send".to_string(), s)];
        h.sample(0.0, &src(sent(0, 0)));
        h.sample(1.0, &src(sent(8000, 80)));
        h.sample(2.0, &src(sent(16_000, 80)));
        let s = h.series();
        assert_eq!(s.len(), 1);
        let p = &s[0].points;
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].rate_bps, 8000.0 * 8040.0 * 8.0);
        assert!((p[0].loss - 0.01).abs() < 1e-12);
        assert_eq!(p[1].loss, 0.0);
        // A restart (totals fell) gives no point, then differences from the new base.
        h.sample(3.0, &src(sent(100, 0)));
        h.sample(4.0, &src(sent(200, 0)));
        assert_eq!(h.series()[0].points.len(), 3);
        for i in 0..(2 * POINTS) {
            h.sample(5.0 + i as f64, &src(sent(300 + i as u64, 0)));
        }
        assert_eq!(h.series()[0].points.len(), POINTS);
    }
}
