//! `record` and `net2file`: starting and stopping recordings, named as a FlexBuff names them.

use recording::write::{unique_label, FileMode};
use safedir::{DirError, EntryKind};
use scanfmt::name::ScanName;
use stream_session::live::sfxc::SfxcAddr;
use vsis::command::Net2Sfxc;
use vsis::command::{Net2File, Record, RecordFormat};
use vsis::playback::OpenMode;
use vsis::ReturnCode;

use crate::runtimes::Here;
use crate::scans::ScanPointer;
use crate::sessions::{self, Kind, Target};
use crate::{ok, refuse, Answer, Daemon, Running, State};

impl Daemon {
    pub(crate) fn record(&self, st: &mut Here<'_>, r: Record) -> Answer {
        match r {
            Record::Query => match &st.running {
                Running::Recording(rec) if rec.kind == Kind::Record => {
                    let bytes = st.bytes(Kind::Record).1;
                    ok(vec![
                        "on".into(),
                        st.session.recorded.len().to_string(),
                        rec.name.clone(),
                        bytes.to_string(),
                    ])
                }
                _ => ok(vec!["off".into()]),
            },
            Record::QueryMk6 => ok(vec![
                u8::from(st.settings.record_format == RecordFormat::Mk6).to_string()
            ]),
            Record::QueryNthread => ok(vec![
                st.settings.nthread.0.to_string(),
                st.settings.nthread.1.to_string(),
            ]),
            Record::Mk6(mk6) => match Self::idle(st) {
                Err(a) => a,
                Ok(()) => {
                    st.settings.record_format = if mk6 { RecordFormat::Mk6 } else { RecordFormat::Vbs };
                    ok(vec![])
                }
            },
            Record::Nthread { readers, writers } => {
                // jive5ab changes these at any time; they take effect at the next record=on.
                let n = &mut st.settings.nthread;
                *n = (readers.unwrap_or(n.0), writers.unwrap_or(n.1));
                ok(vec![])
            }
            Record::On { scan } => self.record_on(st, &scan),
            Record::Off => {
                let answer = self.stop(st, Kind::Record);
                // jive5ab's record=off sets the scan pointer to what was just recorded.
                if answer.0 == ReturnCode::Done {
                    if let Some(last) = st.session.recorded.last() {
                        st.session.pointer = Some(ScanPointer::whole(last));
                    }
                }
                answer
            }
        }
    }

    /// The set disks opened again for a recording, below the allowed directories and through
    /// no link: the writers use these handles, so no path is resolved after this check. A disk
    /// that is no longer one (swapped for a link, removed since `set_disks`) leaves the set and
    /// is said where the FS looks (status? bit 0x2, error?); the scan records on the others.
    fn open_disks(&self, st: &mut Here<'_>) -> Result<Vec<(std::path::PathBuf, safedir::Dir)>, Answer> {
        let now = crate::unix_seconds();
        let mut opened = Vec::new();
        let mut kept = Vec::new();
        for p in std::mem::take(&mut st.disks) {
            // One directory by its path, as set_disks matched it (not read as a pattern again).
            match self.env.paths.open_dir(&p.display().to_string()) {
                Ok(d) => {
                    opened.push((p.clone(), d));
                    kept.push(p);
                }
                Err(e) => st.errors.push(
                    1006,
                    format!("disk {} left out of the recording and the disk set: {e}", p.display()),
                    now,
                ),
            }
        }
        st.disks = kept;
        if opened.is_empty() {
            return Err(refuse(
                ReturnCode::Failed,
                "no usable disk (error? says why): set_disks = /path/disk0 : … ;",
            ));
        }
        Ok(opened)
    }

    /// `record = on : LABEL`: a FlexBuff recording over the set disks (or Mark6, or VDIF files
    /// in the first disk), renamed with a letter when the label is taken — and then said so.
    fn record_on(&self, st: &mut Here<'_>, label: &ScanName) -> Answer {
        if let Err(a) = Self::idle(st) {
            return a;
        }
        if st.disks.is_empty() {
            return refuse(ReturnCode::Conflict, "no disks: set_disks = /path/disk0 : … ;");
        }
        let layout = match st.settings.record_format {
            RecordFormat::Vbs => Some(scanfmt::Layout::Vbs),
            RecordFormat::Mk6 => Some(scanfmt::Layout::Mk6),
            RecordFormat::Vdif => None,
        };
        let target = match layout {
            Some(layout) => {
                let Some(name) = unique_label(label, &st.disks) else {
                    return refuse(
                        ReturnCode::Failed,
                        " - more than 52 recordings with the same scan name is not possible",
                    );
                };
                let opened = match self.open_disks(st) {
                    Ok(d) => d,
                    Err(a) => return a,
                };
                sessions::scan_target(&name, layout, opened, &st.settings).map(|t| (name.to_string(), t))
            }
            None => self.vdif_directory(st, label),
        };
        let (name, target) = match target {
            Ok(t) => t,
            Err(e) => return crate::refuse_start(&e),
        };
        match sessions::start_recording(
            Kind::Record,
            &name,
            target,
            &st.settings,
            &self.env,
            st.outlets.record.clone(),
        ) {
            Ok(rec) => {
                st.session.recorded.push(name.clone());
                st.running = Running::Recording(rec);
                st.last = Some(Kind::Record);
                st.tstat = None;
                // The reply names the recording only when it is not the label (jive5ab).
                ok(if name == label.as_str() { vec![] } else { vec![name] })
            }
            Err(e) => crate::refuse_start(&e),
        }
    }

    /// A new directory for `record_format = vdif`: `<first disk>/<label>`, a letter appended
    /// when taken (jive5ab's letters, [`scanfmt::name::label_candidates`]), made without a race
    /// and never through a link.
    fn vdif_directory(&self, st: &State, label: &ScanName) -> Result<(String, Target), sessions::StartError> {
        let first = &st.disks[0];
        let disk = self.env.paths.open_dir(&first.display().to_string())?;
        for name in scanfmt::name::label_candidates(label) {
            match disk.create_subdir(name.as_str()) {
                Ok(d) => return Ok((name.to_string(), Target::Files(d))),
                Err(DirError::Exists(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(sessions::StartError::NamesTaken {
            label: label.to_string(),
            disk: first.display().to_string(),
        })
    }

    pub(crate) fn net2file(&self, st: &mut Here<'_>, n: Net2File) -> Answer {
        match n {
            Net2File::Query => match &st.running {
                Running::Recording(r) if r.kind == Kind::Net2File => {
                    ok(vec!["active".into(), st.bytes(Kind::Net2File).1.to_string()])
                }
                _ => ok(vec!["inactive".into(), "0".into()]),
            },
            Net2File::Open { path, mode } => {
                if let Err(a) = Self::idle(st) {
                    return a;
                }
                let default_dir = st.disks.first().cloned().unwrap_or_default();
                let (dir, name) = match self.env.paths.file(&path, &default_dir) {
                    Ok(f) => f,
                    Err(e) => return refuse(ReturnCode::BadParameter, e.to_string()),
                };
                // jive5ab's reply: the file's size now (what an append starts from).
                let size = match dir.stat(&name) {
                    Ok(Some(s)) if s.kind == EntryKind::File && mode == OpenMode::Append => s.len,
                    Ok(Some(_)) if mode == OpenMode::New => {
                        return refuse(
                            ReturnCode::Failed,
                            format!("{}: File exists", dir.display(&name).display()),
                        )
                    }
                    _ => 0,
                };
                let mode = match mode {
                    OpenMode::New => FileMode::New,
                    OpenMode::Write => FileMode::Truncate,
                    OpenMode::Append | OpenMode::Resume => FileMode::Append,
                };
                let target = Target::OneFile(dir, name.clone(), mode);
                match sessions::start_recording(
                    Kind::Net2File,
                    &name,
                    target,
                    &st.settings,
                    &self.env,
                    st.outlets.record.clone(),
                ) {
                    Ok(rec) => {
                        st.running = Running::Recording(rec);
                        st.last = Some(Kind::Net2File);
                        st.tstat = None;
                        ok(vec![size.to_string()])
                    }
                    Err(e) => crate::refuse_start(&e),
                }
            }
            Net2File::Close => self.stop(st, Kind::Net2File),
        }
    }

    /// `net2sfxc`: the data port's stream to SFXC's `mk5://` reader on a socket (a path below
    /// the allowed directories, or a TCP port), as jive5ab serves a correlator input host.
    pub(crate) fn net2sfxc(&self, st: &mut Here<'_>, n: Net2Sfxc) -> Answer {
        match n {
            Net2Sfxc::Query => match &st.running {
                Running::Recording(r) if r.kind == Kind::Net2Sfxc => {
                    let live = live_status(st);
                    let reader = if live.as_ref().is_some_and(|l| l.connected) {
                        "connected"
                    } else {
                        "waiting"
                    };
                    let l = live.unwrap_or_default();
                    ok(vec![
                        "active".into(),
                        l.bytes_sent.to_string(),
                        r.name.clone(),
                        reader.into(),
                        format!("dropped {}", l.dropped_slow_reader),
                    ])
                }
                _ => ok(vec!["inactive".into(), "0".into()]),
            },
            Net2Sfxc::Open { target } => {
                if let Err(a) = Self::idle(st) {
                    return a;
                }
                let default_dir = st.disks.first().cloned().unwrap_or_default();
                let (addr, name) = match self.sfxc_addr(&target, &default_dir) {
                    Ok(a) => a,
                    Err(e) => return refuse(ReturnCode::BadParameter, e),
                };
                let live = stream_session::live::LiveTarget::Sfxc { addr, station: None };
                match sessions::start_recording(
                    Kind::Net2Sfxc,
                    &name,
                    Target::Live(live),
                    &st.settings,
                    &self.env,
                    st.outlets.record.clone(),
                ) {
                    Ok(rec) => {
                        st.running = Running::Recording(rec);
                        st.last = Some(Kind::Net2Sfxc);
                        st.tstat = None;
                        ok(vec![])
                    }
                    Err(e) => crate::refuse_start(&e),
                }
            }
            Net2Sfxc::Close => self.stop(st, Kind::Net2Sfxc),
        }
    }

    /// Where `net2sfxc = open : TARGET` serves: a TCP port (jive5ab's reading of a number: every
    /// interface), or a unix socket below the allowed directories; and its name for replies (the
    /// path, or the port: VSI-S fields hold no ':').
    fn sfxc_addr(&self, target: &str, default_dir: &std::path::Path) -> Result<(SfxcAddr, String), String> {
        if let Ok(port) = target.parse::<u16>() {
            if port == 0 {
                return Err("port 0: give the port SFXC connects to".into());
            }
            let a = std::net::SocketAddr::from(([0, 0, 0, 0], port));
            return Ok((SfxcAddr::Tcp(a), port.to_string()));
        }
        let (dir, name) = self.env.paths.file(target, default_dir).map_err(|e| e.to_string())?;
        let shown = dir.display(&name).display().to_string();
        Ok((
            SfxcAddr::Unix {
                dir: std::sync::Arc::new(dir),
                name,
            },
            shown,
        ))
    }
}

/// A runtime's live output's counts, from its receiver's latest.
fn live_status(st: &State) -> Option<stream::results::LiveOutputStatus> {
    match &*st.outlets.record.latest()? {
        crate::counts::TransferCounts::Recv(s) => s.live.first().cloned(),
        _ => None,
    }
}
