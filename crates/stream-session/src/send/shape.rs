//! How an input is sent, decided from what its inspection found and without touching a file:
//! its station and threads, its frame rate (the file's, else the one a bit rate gives, by
//! vdif's integer rule), the data rate it is paced at, whether it can loop, whether it can be
//! sent from memory, and whether a simulated backend's boards can carry it.

use stream::sender::StationSpec;
use vdif::inspect::InspectReport;

use crate::InputProblem;

/// What the inspection of one input found that decides how it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// Station id of the first frame.
    pub station_id: Option<vdif::StationId>,
    /// Thread ids, sorted.
    pub thread_ids: Vec<u16>,
    /// Frame bytes, header included.
    pub frame_len: Option<usize>,
    /// Header bytes.
    pub header_len: Option<usize>,
    /// Frames found (all threads).
    pub frames: u64,
    /// Frames per second per thread, when the file (or `--fps`) showed it.
    pub frames_per_second: Option<vdif::FrameRate>,
    /// The lowest and the highest frame number of any thread.
    pub frame_numbers: (u32, u32),
    /// UTC of the start of the earliest frame's second.
    pub first_second_utc: Option<String>,
    /// Extended data version of the first frame.
    pub edv: Option<u8>,
}

impl Found {
    /// What `rep` says.
    pub fn of(rep: &InspectReport) -> Found {
        let lowest = rep.per_thread.iter().map(|t| t.earliest.1).min().unwrap_or(0);
        let highest = rep.per_thread.iter().map(|t| t.latest.1).max().unwrap_or(0);
        Found {
            station_id: rep.station_id,
            thread_ids: rep.threads.clone(),
            frame_len: rep.frame_bytes,
            header_len: rep.header_bytes,
            frames: rep.frames,
            frames_per_second: rep.frames_per_second,
            frame_numbers: (lowest, highest),
            first_second_utc: rep.first_second_utc.clone(),
            edv: rep.edv,
        }
    }
}

/// How one input is sent: the station the sender streams (its threads numbered 0..threads, its
/// rate that of all of them), and the seconds of one pass when looping (0 when not).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shape {
    /// The station, as the sender state machine takes it.
    pub station: StationSpec,
    /// Seconds of one pass when looping; 0 when not.
    pub loop_seconds: u32,
}

/// The shape of input `name` that `found` describes: paced at `rate_bps` when given (else at
/// the rate its frames give), looped when `looping` (a file of whole seconds only).
pub(crate) fn shape(
    found: &Found,
    name: &str,
    rate: Option<vdif::BitRate>,
    looping: bool,
) -> Result<Shape, InputProblem> {
    let (Some(station_id), Some(frame_len), Some(header_len)) = (found.station_id, found.frame_len, found.header_len)
    else {
        return Err(InputProblem::NoFrames);
    };
    let threads = u16::try_from(found.thread_ids.len()).unwrap_or(u16::MAX);
    // The receiver places frames by thread id: they must be 0..n.
    if found.thread_ids.iter().enumerate().any(|(i, t)| usize::from(*t) != i) {
        let ids = found.thread_ids.clone();
        return Err(InputProblem::ThreadIds { ids, threads });
    }
    let data_len = frame_len.saturating_sub(header_len);
    // The file's rate (--fps, the header, its seconds), else the one the bit rate gives.
    let from_rate =
        |r: vdif::BitRate| vdif::FrameRate::from_bit_rate(r.get(), data_len as u64, u32::from(threads)).ok();
    let fps = match (found.frames_per_second, rate.and_then(from_rate)) {
        (Some(f), _) | (None, Some(f)) => f,
        _ => {
            return Err(unknown_frame_rate(
                found,
                data_len as u64 * 8 * u64::from(threads.max(1)),
            ))
        }
    };
    // The station's pace, in integers (a frame of no data paces at the lowest rate: it carries
    // no bits).
    let rate_bps = rate.unwrap_or_else(|| {
        vdif::BitRate::new(fps.bit_rate(data_len as u64, u32::from(threads))).unwrap_or(vdif::BitRate::MIN)
    });
    let per_thread = found.frames / u64::from(threads.max(1));
    let loop_seconds = if looping {
        if per_thread == 0 || !per_thread.is_multiple_of(u64::from(fps)) {
            return Err(InputProblem::LoopNeedsWholeSeconds { per_thread, fps });
        }
        u32::try_from(per_thread / u64::from(fps)).unwrap_or(u32::MAX)
    } else {
        0
    };
    let station = StationSpec {
        name: name.to_string(),
        station_id,
        threads,
        frame_len,
        data_len,
        fps,
        rate_bps,
    };
    Ok(Shape { station, loop_seconds })
}

/// Why the frame rate of a file cannot be known, and what to pass: its frames all lie in one
/// second (the frame numbers count up to an unknown total) and its headers state no sample
/// rate (only EDV 1 and 3 do, VDIF 1.1.1 §3 and the VLBA EDV 3 note). A file that crosses a
/// second shows its rate in the frame numbers and never comes here.
fn unknown_frame_rate(found: &Found, bits_per_frame: u64) -> InputProblem {
    let (lowest, highest) = found.frame_numbers;
    InputProblem::FrameRateUnknown {
        lowest,
        highest,
        second: found.first_second_utc.clone().unwrap_or_else(|| "?".into()),
        edv: found.edv.map_or("?".into(), |e| e.to_string()),
        at_least: u64::from(highest) + 1,
        bits_per_frame,
    }
}

/// Whether `len` bytes held in memory are the found frames back to back (the scanner counted
/// anything else as garbage), so they can be sent from there; otherwise a reader thread skips
/// what is not a frame.
pub(crate) fn whole_frames(found: &Found, len: usize) -> bool {
    found
        .frame_len
        .and_then(|f| found.frames.checked_mul(f as u64))
        .is_some_and(|bytes| bytes == len as u64)
}

/// Whether `senders` boards can carry an input of `shape`: each board sends at least one
/// thread, and K > 1 boards send from memory.
pub(crate) fn check_boards(shape: &Shape, senders: usize, in_memory: bool) -> Result<(), InputProblem> {
    if senders <= 1 {
        return Ok(());
    }
    let threads = shape.station.threads;
    if usize::from(threads) < senders {
        return Err(InputProblem::ThreadsForSenders { threads, senders });
    }
    if !in_memory {
        return Err(InputProblem::BoardsNeedMemory);
    }
    Ok(())
}

/// The VDIF thread ids board `board` of `senders` carries of a station with `threads` threads:
/// contiguous blocks whose sizes differ by at most one (4 threads over 2 boards: 0-1 and 2-3).
pub fn board_threads(threads: u16, senders: usize, board: usize) -> Vec<u16> {
    let (t, k) = (usize::from(threads), senders.max(1));
    let (lo, hi) = (board * t / k, (board + 1) * t / k);
    (lo..hi.min(t)).filter_map(|x| u16::try_from(x).ok()).collect()
}

/// The share of a station's `rate` (over `threads` threads) of the board carrying `share`
/// (a block of [`board_threads`]): the rate up to the block's end less the rate up to its start,
/// in integers, so the boards' shares add up to the station's rate exactly.
pub fn board_rate(rate: vdif::BitRate, threads: u16, share: &[u16]) -> vdif::BitRate {
    let lo = share.first().map_or(0, |&t| u128::from(t));
    let hi = lo + share.len() as u128;
    let upto = |n: u128| u128::from(rate.get()) * n / u128::from(threads.max(1));
    vdif::BitRate::new(u64::try_from(upto(hi) - upto(lo)).unwrap_or(u64::MAX)).unwrap_or(vdif::BitRate::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads of 8032-byte frames (8000 bytes of data), `per_thread` frames each.
    fn found(per_thread: u64, fps: Option<u32>) -> Found {
        let fps = fps.map(|n| vdif::FrameRate::new(n).unwrap());
        Found {
            station_id: Some(vdif::StationId(0x4566)),
            thread_ids: vec![0, 1],
            frame_len: Some(8032),
            header_len: Some(32),
            frames: 2 * per_thread,
            frames_per_second: fps,
            frame_numbers: (0, 799),
            first_second_utc: Some("2026-01-01T00:00:00Z".into()),
            edv: Some(0),
        }
    }

    fn shape_of(f: &Found, rate_bps: Option<f64>, looping: bool) -> Result<Shape, InputProblem> {
        let rate = rate_bps.map(|r| vdif::BitRate::new(r as u64).expect("a test's rate"));
        shape(f, "Ef.vdif", rate, looping)
    }

    #[test]
    fn the_files_rate_paces_it_unless_a_rate_is_given() {
        let s = shape_of(&found(8000, Some(8000)), None, false).unwrap();
        let st = &s.station;
        assert_eq!(
            (st.station_id, st.threads, st.data_len, st.fps.get()),
            (vdif::StationId(0x4566), 2, 8000, 8000)
        );
        assert_eq!(st.name, "Ef.vdif");
        // 8000 frames/s × 8000 B × 8 bits × 2 threads.
        assert_eq!(st.rate_bps.get(), 1_024_000_000);
        assert_eq!(s.loop_seconds, 0);
        // A given rate paces it; the file's own frame rate stays its rate.
        let s = shape_of(&found(8000, Some(8000)), Some(2.048e9), false).unwrap();
        assert_eq!((s.station.fps.get(), s.station.rate_bps.get()), (8000, 2_048_000_000));
    }

    #[test]
    fn a_rate_gives_the_frame_rate_a_file_does_not_show() {
        let s = shape_of(&found(800, None), Some(512e6), false).unwrap();
        // 512e6 / (8000 × 8 × 2) = 4000.
        assert_eq!(s.station.fps.get(), 4000);
        // Not a whole number of frames: no rate, and the numbers to pass one.
        match shape_of(&found(800, None), Some(512_000_001.0), false) {
            Err(InputProblem::FrameRateUnknown {
                lowest: 0,
                highest: 799,
                at_least: 800,
                bits_per_frame: 128_000,
                edv,
                ..
            }) => assert_eq!(edv, "0"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            shape_of(&found(800, None), None, false),
            Err(InputProblem::FrameRateUnknown { .. })
        ));
    }

    #[test]
    fn only_whole_seconds_loop() {
        assert_eq!(
            shape_of(&found(16_000, Some(8000)), None, true).unwrap().loop_seconds,
            2
        );
        assert!(matches!(
            shape_of(&found(12_000, Some(8000)), None, true),
            Err(InputProblem::LoopNeedsWholeSeconds {
                per_thread: 12_000,
                fps
            }) if fps.get() == 8000
        ));
        assert!(matches!(
            shape_of(&found(0, Some(8000)), None, true),
            Err(InputProblem::LoopNeedsWholeSeconds { per_thread: 0, .. })
        ));
    }

    #[test]
    fn threads_are_numbered_from_zero_and_frames_must_be_found() {
        let mut f = found(8000, Some(8000));
        f.thread_ids = vec![0, 2];
        assert!(matches!(
            shape_of(&f, None, false),
            Err(InputProblem::ThreadIds { threads: 2, .. })
        ));
        f.station_id = None;
        assert!(matches!(shape_of(&f, None, false), Err(InputProblem::NoFrames)));
    }

    #[test]
    fn memory_holds_the_frames_back_to_back_only() {
        let f = found(10, Some(8000));
        assert!(whole_frames(&f, 20 * 8032));
        assert!(!whole_frames(&f, 20 * 8032 + 1));
        assert!(!whole_frames(&Found { frame_len: None, ..f }, 0));
    }

    #[test]
    fn boards_need_a_thread_each_and_the_data_in_memory() {
        let s = shape_of(&found(8000, Some(8000)), None, false).unwrap();
        assert!(check_boards(&s, 1, false).is_ok());
        assert!(check_boards(&s, 2, true).is_ok());
        assert!(matches!(
            check_boards(&s, 3, true),
            Err(InputProblem::ThreadsForSenders { threads: 2, senders: 3 })
        ));
        assert!(matches!(
            check_boards(&s, 2, false),
            Err(InputProblem::BoardsNeedMemory)
        ));
    }

    #[test]
    fn threads_are_split_in_contiguous_blocks_differing_by_at_most_one() {
        let blocks = |t, k| (0..k).map(|b| board_threads(t, k, b)).collect::<Vec<_>>();
        assert_eq!(blocks(4, 2), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(blocks(4, 3), vec![vec![0], vec![1], vec![2, 3]]);
        assert_eq!(blocks(1, 1), vec![vec![0]]);
        for t in 1..=16u16 {
            for k in 1..=usize::from(t) {
                let all: Vec<u16> = blocks(t, k).concat();
                assert_eq!(all, (0..t).collect::<Vec<_>>(), "{t} threads over {k}");
                let sizes: Vec<usize> = blocks(t, k).iter().map(Vec::len).collect();
                let (lo, hi) = (sizes.iter().min(), sizes.iter().max());
                assert!(lo.zip(hi).is_some_and(|(l, h)| h - l <= 1 && *l >= 1), "{sizes:?}");
            }
        }
    }

    /// The boards' shares of a station's rate add up to it exactly, each in proportion to its
    /// threads (within 1 b/s): 512 Mb/s over 3 threads on 2 boards is 170666666 + 341333334.
    #[test]
    fn the_boards_shares_of_a_rate_add_up_to_it_exactly() {
        let r = |bps| vdif::BitRate::new(bps).unwrap();
        let shares = |rate, t, k| {
            (0..k)
                .map(|b| board_rate(r(rate), t, &board_threads(t, k, b)).get())
                .collect::<Vec<_>>()
        };
        assert_eq!(shares(512_000_000, 3, 2), [170_666_666, 341_333_334]);
        assert_eq!(shares(2_048_000_000, 4, 2), [1_024_000_000, 1_024_000_000]);
        for (rate, t, k) in [
            (512_000_000, 3, 3),
            (1_000_000_007, 7, 4),
            (4_096_000_000, 16, 5),
            (7, 5, 5),
        ] {
            let s = shares(rate, t, k);
            assert_eq!(
                s.iter().sum::<u64>(),
                rate,
                "{rate} over {t} threads, {k} boards: {s:?}"
            );
            for (b, got) in s.iter().enumerate() {
                let m = board_threads(t, k, b).len() as f64;
                let exact = rate as f64 * m / f64::from(t);
                assert!((*got as f64 - exact).abs() <= 1.0, "{got} vs {exact}");
            }
        }
    }
}
