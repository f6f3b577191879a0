//! Recorded scans read back, as jive5ab does on a FlexBuff: `scan_set` chooses a scan and a
//! byte range of it, `scan_check?` says what it holds, `data_check?` decodes where the range
//! starts, `disk2file` copies the range to a file, `reset = abort` stops that copy, `rtime?`
//! tells how long the set disks last at the mode's rate.
//!
//! A scan is found by its Field System label: the recording of that name and every data stream
//! of it (`<label>_ds*`), vbs or Mark6, whichever the set disks hold.

use std::sync::Arc;

use recording::read::check::{check_range, check_range_at_rate};
use recording::{Layout, Scan};
use scanfmt::check::ScanCheck;
use vsis::evlbi::cpp_double;
use vsis::playback::{Disk2File, Disk2FileEnd, OpenMode, Pointer, ScanCheckArgs, ScanSelect, ScanSet, VexTime};
use vsis::ReturnCode;

use crate::disk2file::{open_destination, Disk2FileJob};
use crate::{ok, refuse, Answer, Daemon, Running, State};

/// Sample size of the check that gives the data rate for time-based pointers (jive5ab: about
/// 1 MiB).
const RATE_SAMPLE: u64 = 1 << 20;

/// Where `scan_set` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanPointer {
    /// The scan (a label, or any recording name on the disks).
    pub name: String,
    /// First byte.
    pub start: u64,
    /// End (exclusive); 0 is the scan's end (as `record = off` and `scan_set =` leave it).
    pub end: u64,
}

impl ScanPointer {
    /// All of scan `name`.
    pub fn whole(name: &str) -> ScanPointer {
        ScanPointer {
            name: name.to_string(),
            start: 0,
            end: 0,
        }
    }
}

/// This session's recordings and what `scan_set` chose.
#[derive(Debug, Default)]
pub struct ScanSession {
    /// Recordings made since the daemon started, oldest first (jive5ab's list).
    pub recorded: Vec<String>,
    /// The scan and range set.
    pub pointer: Option<ScanPointer>,
    /// The last search string and the position of its last match in `recorded`.
    pub search: Option<(String, usize)>,
    /// Where the last `disk2file` wrote.
    pub last_dest: Option<String>,
    /// This session's recordings that lost frames on their way to disk (a disk dropped
    /// mid-scan): name and bytes the daemon took but no disk holds.
    pub not_written: Vec<(String, u64)>,
}

/// A time-based pointer needs the recorded data rate.
fn rate_of(check: &Option<ScanCheck>) -> Result<(u64, &ScanCheck), Answer> {
    check
        .as_ref()
        .and_then(|c| c.bytes_per_second().map(|r| (r, c)))
        .ok_or_else(|| {
            refuse(
                ReturnCode::Conflict,
                "could not deduce recorded data rate for time based scan_set",
            )
        })
}

/// The byte of the data at time `t` (fields not given are the data's first frame's), moved to
/// the next minute/hour/day when before the data starts, as jive5ab's `scan_set` does.
fn byte_at_time(t: &VexTime, c: &ScanCheck, rate: u64) -> Option<i64> {
    use chrono::{Datelike, NaiveDate, Timelike};
    let n = f64::from(c.frames_per_second?);
    let start = c.start.unix as f64 + f64::from(c.start.frame) / n;
    let d = chrono::DateTime::from_timestamp(c.start.unix, 0)?;
    let year = t.year.unwrap_or(d.year());
    let day = t.day.unwrap_or(d.ordinal());
    let hour = t.hour.unwrap_or(d.hour());
    let minute = t.minute.unwrap_or(d.minute());
    let second = t.second.unwrap_or(f64::from(d.second()));
    let midnight = NaiveDate::from_yo_opt(year, day)?
        .and_hms_opt(0, 0, 0)?
        .and_utc()
        .timestamp();
    let mut wanted = midnight as f64 + f64::from(hour) * 3600.0 + f64::from(minute) * 60.0 + second;
    if wanted < start {
        // The first field left out goes up by one: 30s → the next minute's second 30.
        const NEXT: [f64; 5] = [1.0, 60.0, 3600.0, 86_400.0, 365.0 * 86_400.0];
        wanted += NEXT[t.fields().min(4)];
    }
    if wanted < start {
        return None;
    }
    Some(c.start_offset as i64 + ((wanted - start) * rate as f64).round() as i64)
}

/// Bytes `[from, to)` of `scan` may be copied: VDIF (the check `scan_check?` makes finds frames
/// in them) or Mark5B (its sync word twice, a frame apart), as jive5ab's `disk2file` copies
/// recordings. Anything else is refused with what it is: a 1 TiB sparse file named as a chunk
/// was copied whole before, filling the disk with zeros.
fn copyable(scan: &Scan, from: u64, to: u64) -> Result<(), Answer> {
    let name = scan.name();
    let unreadable = |e: std::io::Error| refuse(ReturnCode::Failed, format!("reading {name}: {e}"));
    if from >= to {
        // Nothing to copy.
        return Ok(());
    }
    if check_range(scan, from, to, 1_000_000).map_err(unreadable)?.is_some() {
        return Ok(());
    }
    let mut head = vec![0u8; usize::try_from((to - from).min(vdif::formats::IDENTIFY_BYTES as u64)).unwrap_or(0)];
    let mut got = 0;
    while got < head.len() {
        match scan.read_at(&mut head[got..], from + got as u64).map_err(unreadable)? {
            0 => break,
            n => got += n,
        }
    }
    head.truncate(got);
    let whole = (got as u64) == to - from;
    match vdif::formats::identify(&head, whole) {
        Some(vdif::formats::KnownFormat::Mark5b { .. }) => Ok(()),
        Some(other) => Err(refuse(
            ReturnCode::Failed,
            format!("bytes {from}-{to} of {name} are {other}, not VDIF or Mark5B, not copied"),
        )),
        None => Err(refuse(
            ReturnCode::Failed,
            format!(
                "bytes {from}-{to} of {name} hold no VDIF or Mark5B frames (checked as scan_check? does), not copied"
            ),
        )),
    }
}

impl Daemon {
    /// What `[start, end)` of scan `name` holds. The whole of a scan recorded as data streams
    /// (one recording per thread or station) is checked recording by recording and combined
    /// — its tracks all of theirs —, as the blocks of merged streams interleave in time.
    fn check(
        &self,
        st: &State,
        name: &str,
        scan: &Scan,
        (start, end): (u64, u64),
        sample: u64,
    ) -> std::io::Result<Option<ScanCheck>> {
        let disks = self.read_disks(st);
        let names = Scan::recordings_of_in(scan.layout(), name, &disks);
        if start == 0 && end >= scan.len() && names.len() > 1 {
            let mut parts = Vec::new();
            for n in &names {
                let Ok(one) = Scan::open_in(scan.layout(), n, &disks) else {
                    continue;
                };
                parts.extend(check_range(&one, 0, one.len(), sample)?);
            }
            return Ok(ScanCheck::combine(&parts));
        }
        check_range(scan, start, end, sample)
    }

    /// The set disks opened for reading, below the allowed directories and through no link, as
    /// the recorder opens them for writing: a disk swapped for a link since `set_disks` is not
    /// read (a recording outside the roots is never served by scan_check? or disk2file).
    fn read_disks(&self, st: &State) -> Vec<safedir::Dir> {
        st.disks
            .iter()
            .filter_map(|p| self.env.paths.open_dir(&p.display().to_string()).ok())
            .collect()
    }

    /// Scan `name` on the set disks, vbs or Mark6 (exactly one of them).
    /// (`scan_set`'s name was checked where it entered, `vsis::playback::ScanSelect::Name`; the
    /// reader checks every name it opens again before a path is made of it.)
    fn open_scan(&self, st: &State, name: &str) -> Result<Arc<Scan>, Answer> {
        let disks = self.read_disks(st);
        let vbs = Scan::open_with_streams_in(Layout::Vbs, name, &disks);
        let mk6 = Scan::open_with_streams_in(Layout::Mk6, name, &disks);
        match (vbs, mk6) {
            (Ok(s), Err(_)) | (Err(_), Ok(s)) => Ok(Arc::new(s)),
            (Ok(_), Ok(_)) => Err(refuse(
                ReturnCode::Failed,
                format!("'{name}' exists in both Mk6/VBS formats"),
            )),
            (Err(_), Err(_)) => Err(refuse(
                ReturnCode::Failed,
                format!("'{name}' does not exist in Mk6/VBS format"),
            )),
        }
    }

    /// Which of this session's scans (or which name) a `scan_set` means.
    fn select(st: &mut State, sel: ScanSelect) -> Result<String, Answer> {
        let list = &st.session.recorded;
        let current = st
            .session
            .pointer
            .as_ref()
            .and_then(|p| list.iter().position(|n| *n == p.name));
        let none = || refuse(ReturnCode::Conflict, "there are no scans recorded in this session");
        Ok(match sel {
            ScanSelect::Last => list.last().ok_or_else(none)?.clone(),
            ScanSelect::Next | ScanSelect::Previous => {
                let i = current
                    .ok_or_else(|| refuse(ReturnCode::Conflict, "there is no recorded scan to increment from"))?;
                let j = if sel == ScanSelect::Next {
                    (i + 1) % list.len()
                } else {
                    (i + list.len() - 1) % list.len()
                };
                list[j].clone()
            }
            ScanSelect::Number(n) if n >= 1 && n <= list.len() as u64 => list[n as usize - 1].clone(),
            ScanSelect::Number(n) => Self::search(st, &n.to_string(), 0),
            ScanSelect::SearchAgain => {
                let (text, at) = st
                    .session
                    .search
                    .clone()
                    .ok_or_else(|| refuse(ReturnCode::Failed, "no search string given yet"))?;
                Self::search(st, &text, at + 1)
            }
            ScanSelect::Name(text) => Self::search(st, text.as_str(), 0),
        })
    }

    /// The first of this session's scans from `from` on (cycling) whose name holds `text`
    /// (case-insensitive); `text` itself, a recording name, when none does.
    fn search(st: &mut State, text: &str, from: usize) -> String {
        let list = &st.session.recorded;
        let want = text.to_ascii_uppercase();
        let n = list.len();
        let hit = (0..n)
            .map(|k| (from + k) % n.max(1))
            .find(|&i| list[i].to_ascii_uppercase().contains(&want));
        st.session.search = Some((text.to_string(), hit.unwrap_or(0)));
        hit.map_or_else(|| text.to_string(), |i| list[i].clone())
    }

    pub(crate) fn scan_set(&self, st: &mut State, s: ScanSet) -> Answer {
        let (sel, start_p, end_p) = match s {
            ScanSet::Query => {
                let Some(p) = &st.session.pointer else {
                    return ok(vec!["-1".into(), String::new(), "0".into(), "0".into()]);
                };
                let index = st
                    .session
                    .recorded
                    .iter()
                    .position(|n| *n == p.name)
                    .map_or(-1, |i| i as i64);
                return ok(vec![
                    index.to_string(),
                    p.name.clone(),
                    p.start.to_string(),
                    p.end.to_string(),
                ]);
            }
            ScanSet::LastWhole => (ScanSelect::Last, None, None),
            ScanSet::Set { scan, start, end } => (scan, Some(start), Some(end)),
        };
        if let Err(a) = Self::idle(st) {
            return a;
        }
        let name = match Self::select(st, sel) {
            Ok(n) => n,
            Err(a) => return a,
        };
        let scan = match self.open_scan(st, &name) {
            Ok(s) => s,
            Err(a) => return a,
        };
        let (Some(start_p), Some(end_p)) = (start_p, end_p) else {
            // `scan_set = ;`: the scan, whole, as jive5ab leaves it (0 : 0).
            st.session.pointer = Some(ScanPointer::whole(&name));
            return ok(vec![]);
        };
        let len = scan.len() as i64;
        let mut check = None;
        let mut checked = false;
        let (mut start, mut end) = (0i64, len);
        for (p, is_start) in [(start_p, true), (end_p, false)] {
            let needs_rate = matches!(p, Pointer::PlusTime(_) | Pointer::MinusTime(_) | Pointer::At(_));
            if needs_rate && !checked {
                check = self
                    .check(st, &name, &scan, (0, scan.len()), RATE_SAMPLE)
                    .ok()
                    .flatten();
                checked = true;
            }
            let v = match p {
                Pointer::Default => continue,
                Pointer::Start => 0,
                Pointer::Centre => len / 2,
                Pointer::NearEnd => len - 1_000_000,
                Pointer::JustAfterStart => 65_536,
                Pointer::PlusBytes(n) => start.saturating_add(n),
                Pointer::MinusBytes(n) => end.saturating_sub(n),
                Pointer::PlusTime(t) | Pointer::MinusTime(t) => {
                    let (rate, _) = match rate_of(&check) {
                        Ok(r) => r,
                        Err(a) => return a,
                    };
                    let bytes = (t.as_duration() * rate as f64).round() as i64;
                    if matches!(p, Pointer::PlusTime(_)) {
                        start.saturating_add(bytes)
                    } else {
                        end.saturating_sub(bytes)
                    }
                }
                Pointer::At(t) => {
                    let (rate, c) = match rate_of(&check) {
                        Ok(r) => r,
                        Err(a) => return a,
                    };
                    match byte_at_time(&t, c, rate) {
                        Some(b) => b,
                        None => return refuse(ReturnCode::BadParameter, "a time outside the data"),
                    }
                }
            };
            if is_start {
                start = v;
            } else {
                end = v;
            }
        }
        // jive5ab refuses only a start before the scan or an end after it, and takes a start
        // past the end (`+40000000` on a 32 MB scan, `: 23h17m20s : 23h17m14s`) with 0; every
        // read of that range is then empty or reversed. Refused here with jive5ab's words and
        // the numbers, the pointer left as it was.
        if !(0 <= start && start < end && end <= len) {
            return refuse(
                ReturnCode::BadParameter,
                format!(
                    "scan pointer offset(s) are out of bound (start {start}, end {end} of a {len}-byte scan, \
                     0 <= start < end <= {len} needed)"
                ),
            );
        }
        st.session.pointer = Some(ScanPointer {
            name,
            start: start as u64,
            end: end as u64,
        });
        ok(vec![])
    }

    /// The scan and range `scan_set` (or `record = off`) left; the end made explicit. A range
    /// the scan no longer holds (it was recorded again shorter since) is refused, never read.
    fn pointed(&self, st: &State, missing: &str) -> Result<(Arc<Scan>, ScanPointer, u64), Answer> {
        let p = st
            .session
            .pointer
            .clone()
            .ok_or_else(|| refuse(ReturnCode::BadParameter, missing))?;
        let scan = self.open_scan(st, &p.name)?;
        let end = if p.end == 0 { scan.len() } else { p.end.min(scan.len()) };
        if p.start >= end {
            return Err(refuse(
                ReturnCode::Conflict,
                format!(
                    "the scan pointer ({}-{}) is past the data of {} ({} bytes), scan_set again",
                    p.start,
                    p.end,
                    p.name,
                    scan.len()
                ),
            ));
        }
        Ok((scan, p, end))
    }

    pub(crate) fn scan_check(&self, st: &mut State, a: ScanCheckArgs) -> Answer {
        let (scan, p, end) = match self.pointed(st, "no scan name given") {
            Ok(x) => x,
            Err(a) => return a,
        };
        let have = end.saturating_sub(p.start);
        if have < a.bytes {
            return refuse(
                ReturnCode::Conflict,
                format!("scan too short to check, need {}bytes have {have}", a.bytes),
            );
        }
        let mut f = vec!["?".to_string(), p.name.clone()];
        match self.check(st, &p.name, &scan, (p.start, end), a.bytes) {
            Ok(Some(mut c)) => {
                // The whole of a scan this session recorded: what reached the daemon but no
                // disk is missing, whether or not the data shows the gap (at the end it cannot).
                let lost = st.session.not_written.iter().find(|(n, _)| *n == p.name).map(|x| x.1);
                if let (Some(lost), true) = (lost, p.start == 0 && end == scan.len()) {
                    let lost = i64::try_from(lost).unwrap_or(i64::MAX);
                    c.missing_bytes = Some(c.missing_bytes.map_or(lost, |m| m.max(lost)));
                }
                f.extend(vsis::playback::scan_check_fields(&c));
            }
            Ok(None) => f.push("?".into()),
            Err(e) => return refuse(ReturnCode::Failed, format!("reading {}: {e}", p.name)),
        }
        ok(f)
    }

    /// `data_check?`: what the data at the scan pointer's start is — format, the first frame's
    /// time, date code (none for VDIF), frame number, frame period, data rate (Mb/s, all
    /// threads, payload), where in the first megabyte the frame starts, and the bytes missing
    /// in the range (jive5ab's Mark 5 fields; its FlexBuff command set has no data_check).
    pub(crate) fn data_check(&self, st: &mut State) -> Answer {
        let (scan, p, end) = match self.pointed(st, "no scan name given") {
            Ok(x) => x,
            Err(a) => return a,
        };
        // A short range (the FS's last megabyte) shows no second boundary: the rate comes from
        // the whole scan.
        let whole = self
            .check(st, &p.name, &scan, (0, scan.len()), RATE_SAMPLE)
            .ok()
            .flatten();
        let fps = whole.and_then(|c| c.frames_per_second);
        let c = match check_range_at_rate(&scan, p.start, end, 1_000_000, fps) {
            Ok(Some(c)) => c,
            Ok(None) => return ok(vec!["?".into()]),
            Err(e) => return refuse(ReturnCode::Failed, format!("reading {}: {e}", p.name)),
        };
        let mut f = vec!["VDIF".to_string()];
        let fraction = c.frames_per_second.map(|n| f64::from(c.start.frame) / f64::from(n));
        f.push(vsis::playback::vex_time(c.start.unix, fraction));
        f.push(String::new());
        f.push(c.start.frame.to_string());
        let offset = (c.start_offset - p.start).to_string();
        match (c.frames_per_second, c.track_rate_bps) {
            (Some(n), Some(r)) => {
                let mbps = r as f64 * f64::from(c.tracks) / 1e6;
                f.push(format!("{}s", cpp_double(1.0 / f64::from(n))));
                f.push(cpp_double(mbps));
                f.push(offset);
                f.push(c.missing_bytes.map_or("?".into(), |m| m.to_string()));
            }
            _ => f.extend(["?".into(), "?".into(), offset, "?".into()]),
        }
        ok(f)
    }

    pub(crate) fn disk2file(&self, st: &mut State, d: Disk2File) -> Answer {
        let Disk2File::Start { file, start, end, mode } = d else {
            return match &st.running {
                Running::Disk2File(j) => ok(vec![
                    "active".into(),
                    j.dest.clone(),
                    j.start.to_string(),
                    j.current().to_string(),
                    j.end.to_string(),
                    j.mode.into(),
                ]),
                _ => {
                    let mut f = vec!["inactive".to_string()];
                    f.extend(st.session.last_dest.clone());
                    ok(f)
                }
            };
        };
        if let Err(a) = Self::idle(st) {
            return a;
        }
        let (scan, p, scan_end) = match self.pointed(st, " no scan was set using scan_set=") {
            Ok(x) => x,
            Err((_, why)) => return (ReturnCode::Conflict, why),
        };
        let mut from = start.unwrap_or(p.start);
        let to = match end {
            Disk2FileEnd::Default => scan_end,
            Disk2FileEnd::At(v) => v,
            Disk2FileEnd::After(n) => from.saturating_add(n),
        };
        if from > to || to > scan.len() {
            return refuse(
                ReturnCode::BadParameter,
                format!("range {from}-{to} is outside the scan (0-{})", scan.len()),
            );
        }
        let dest = if file.is_empty() {
            format!("{}.m5a", p.name)
        } else {
            file
        };
        let default_dir = self
            .env
            .paths
            .first_root()
            .map(|r| r.to_path_buf())
            .or_else(|| st.disks.first().cloned())
            .unwrap_or_default();
        let (dir, name) = match self.env.paths.file(&dest, &default_dir) {
            Ok(f) => f,
            Err(e) => return refuse(ReturnCode::BadParameter, e.to_string()),
        };
        if let Err(a) = copyable(&scan, from, to) {
            return a;
        }
        let out = match open_destination(&dir, &name, mode, &scan) {
            Ok(d) => d,
            Err(e) => return refuse(ReturnCode::Failed, e.to_string()),
        };
        // jive5ab answers 1 alone; what `w` or `a` did to a file that held data is said too.
        let said = match (mode, out.had) {
            (_, 0) => vec![],
            (OpenMode::Write, n) => vec!["w".into(), format!("replacing the {n} bytes {dest} held")],
            (OpenMode::Resume, n) => vec!["a".into(), format!("resuming after the {n} bytes {dest} holds")],
            (_, n) => vec!["a".into(), format!("appending to the {n} bytes {dest} holds")],
        };
        if mode == OpenMode::Resume {
            // Resume where the file's length says the last copy stopped.
            from = from.saturating_add(out.had).min(to);
        }
        match Disk2FileJob::start(scan, out.file, dest, (from, to), mode.name()) {
            Ok(j) => {
                st.running = Running::Disk2File(j);
                st.tstat = None;
                (ReturnCode::Initiated, said)
            }
            Err(e) => refuse(ReturnCode::Failed, format!("cannot start the copy: {e}")),
        }
    }

    /// `reset = abort`: stop a running `disk2file` (the file keeps what was copied).
    pub(crate) fn reset(&self, st: &mut crate::runtimes::Here<'_>, _what: &str) -> Answer {
        if !matches!(st.running, Running::Disk2File(_)) {
            return refuse(ReturnCode::Conflict, "nothing running to abort");
        }
        match self.stop_running(st) {
            Ok(()) => ok(vec![]),
            Err(e) => refuse(ReturnCode::Failed, e.to_string()),
        }
    }

    /// `rtime?`: time left over the free space of the set disks — each file system counted
    /// once (jive5ab adds up directories, so four directories on one disk count it four
    /// times) — at the rate they fill at: a running recording's measured rate after its first
    /// second, the mode's (headers included) otherwise; the free space, its share, the
    /// format, tracks, and that rate; then, beyond jive5ab's fields, each disk's free space as
    /// `PATH=GB` (the fields the Field System reads come first and are unchanged).
    pub(crate) fn rtime(&self, st: &mut State) -> Answer {
        let set = crate::space::look(&st.disks);
        let (free, total) = (set.free, set.total);
        let per_disk = set.disks.iter().map(crate::space::free_field);
        let gb = format!("{}GB", cpp_double(free as f64 / 1e9));
        let pct = format!(
            "{}%",
            cpp_double(if total > 0 {
                free as f64 * 100.0 / total as f64
            } else {
                0.0
            })
        );
        let (Some(m), Some(rate)) = (&st.settings.mode, st.fill_rate()) else {
            let mut f = vec![
                "<unknown> (no mode set yet)".into(),
                gb,
                pct,
                "<unknown>".into(),
                "0".into(),
                "0".into(),
                "<unknown> Mbps".into(),
            ];
            f.extend(per_disk);
            return ok(f);
        };
        let mut f = vec![
            format!("{}s", cpp_double(crate::space::time_left_s(&set, rate))),
            gb,
            pct,
            "VDIF".into(),
            m.tracks().to_string(),
            "0MHz".into(),
            format!("{}Mbps", cpp_double(rate.bps / 1e6)),
        ];
        f.extend(per_disk);
        ok(f)
    }
}
