//! What the Field System asks about the recorder and sets up once per session: `dts_id?`,
//! `os_rev?` (experiment start), `set_disks` (fb_config), `datastream` (the thread procedure).

use vsis::command::{DataStreamCmd, Setting};
use vsis::ReturnCode;

use crate::sessions::Kind;
use crate::{ok, refuse, Answer, Daemon, State};

/// Most bytes read of the small system files below (a host name, a kernel version).
const SMALL_FILE: u64 = 4096;

/// A small system file as text, read through the one bounded reader (`/etc/hardware_id`
/// could be anything a local user put there).
fn small_text(path: &str) -> std::io::Result<String> {
    safedir::read_regular_text(std::path::Path::new(path), SMALL_FILE).map_err(safedir::DirError::into_io)
}

/// The first line of `/proc/version` (what jive5ab's `os_rev?` answers).
pub(crate) fn os_rev() -> Answer {
    match small_text("/proc/version") {
        Ok(v) => ok(vec![v.lines().next().unwrap_or_default().to_string()]),
        Err(e) => refuse(ReturnCode::Failed, format!("failed to open /proc/version: {e}")),
    }
}

/// This host's name up to the first dot (jive5ab's serial number without /etc/hardware_id).
fn host_name() -> String {
    small_text("/etc/hardware_id")
        .or_else(|_| small_text("/proc/sys/kernel/hostname"))
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .map(|l| l.split('.').next().unwrap_or(l).trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "-".into())
}

impl Daemon {
    /// `dts_id?`: system type (`-`: no Mark5 hardware), software, media (1 disk, 2 while
    /// relaying), serial (the host's name), DIM and DOM ports, command set and design
    /// revisions (none) — jive5ab's fields on a FlexBuff.
    pub(crate) fn dts_id(&self, st: &State) -> Vec<String> {
        let realtime = matches!(st.running.kind(), Some(Kind::Net2Net | Kind::Fill2Net));
        vec![
            "-".into(),
            format!("evlbi {}", self.version),
            if realtime { "2" } else { "1" }.into(),
            host_name(),
            "0".into(),
            "0".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]
    }

    /// `set_disks`: directories the operator allowed (absolute, globs, or below the first
    /// root), none a link, none twice.
    pub(crate) fn set_disks(&self, st: &mut State, d: Setting<Vec<String>>) -> Answer {
        match d {
            Setting::Query => {
                let mut f = vec![st.disks.len().to_string()];
                f.extend(st.disks.iter().map(|p| p.display().to_string()));
                ok(f)
            }
            Setting::Set(entries) => {
                if let Err(a) = Self::idle(st) {
                    return a;
                }
                match self.env.paths.disks(&entries) {
                    Ok(disks) => {
                        st.disks = disks.into_iter().map(|(p, _)| p).collect();
                        ok(vec![st.disks.len().to_string()])
                    }
                    Err(e) => (ReturnCode::BadParameter, vec!["0".into(), e.to_string()]),
                }
            }
        }
    }

    /// `datastream`: jive5ab's data streams, by name.
    pub(crate) fn datastream(&self, st: &mut State, d: DataStreamCmd) -> Answer {
        let ds = &mut st.settings.datastreams;
        if let DataStreamCmd::Query(name) = d {
            return match name {
                None => {
                    let mut f = vec![ds.len().to_string()];
                    f.extend(ds.names().map(str::to_string));
                    ok(f)
                }
                Some(n) => match ds.criteria(&n) {
                    Some(c) => {
                        let mut f = vec![n.clone()];
                        f.extend(c.iter().cloned());
                        ok(f)
                    }
                    None => refuse(ReturnCode::BadParameter, format!("The stream '{n}' is not defined")),
                },
            };
        }
        if let Err(a) = Self::idle(st) {
            return a;
        }
        let ds = &mut st.settings.datastreams;
        let done = match d {
            DataStreamCmd::Add { name, criteria } => ds.add(&name, &criteria),
            DataStreamCmd::Remove(name) => ds.remove(&name),
            DataStreamCmd::Clear => {
                ds.clear();
                Ok(())
            }
            // Which frames went to which stream is decided afresh at every record=on.
            DataStreamCmd::Reset | DataStreamCmd::Query(_) => Ok(()),
        };
        match done {
            Ok(()) => ok(vec![]),
            Err(e @ scanfmt::datastream::DataStreamError::Exists(_))
            | Err(e @ scanfmt::datastream::DataStreamError::Unknown(_)) => refuse(ReturnCode::Failed, e.to_string()),
            Err(e) => refuse(ReturnCode::BadParameter, e.to_string()),
        }
    }
}
