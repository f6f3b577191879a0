//! Runtimes (jive5ab's `runtime = NAME`): independent transfer contexts, each with its own
//! settings, disks, transfer and counts, so one daemon runs several transfers at once — a
//! correlator input host serving several stations, one `net2sfxc` socket each.
//!
//! A control connection is a [`Session`]: it works in the default runtime until it says
//! `runtime = NAME ;`. The error queue (`error?`, `status?` bit 0x2) is the daemon's, as
//! jive5ab's is. Each runtime's transfers publish to metric sources of their own, labelled
//! `runtime="NAME"` (the default runtime's carry no label, as before runtimes).

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use metrics::{Hub, HubError};
use vsis::runtime::{Creation, RuntimeCmd, DEFAULT_RUNTIME};
use vsis::status::ServeStatus;
use vsis::ReturnCode;

use crate::counts::CountsOutlet;
use crate::errors::ErrorQueue;
use crate::sessions::Kind;
use crate::{ok, refuse, Answer, Daemon, State};

/// Most runtimes besides the default one (each holds a data port and three metric sources).
pub const MAX_RUNTIMES: usize = 8;

/// Where one runtime's transfers hand their counts: `record` (also `net2file`, `net2sfxc`),
/// `net2net`, `fill2net`.
#[derive(Debug, Clone)]
pub(crate) struct Outlets {
    pub(crate) record: CountsOutlet,
    pub(crate) relay: CountsOutlet,
    pub(crate) fill: CountsOutlet,
}

impl Outlets {
    /// The outlets of runtime `name` on `hub` (no label for the default runtime).
    pub(crate) fn new(hub: &Hub, name: &str) -> Result<Outlets, HubError> {
        let labels = || {
            if name == DEFAULT_RUNTIME {
                Vec::new()
            } else {
                vec![("runtime", name.to_string())]
            }
        };
        Ok(Outlets {
            record: CountsOutlet::new(hub.source_labelled("record", labels())?),
            relay: CountsOutlet::new(hub.source_labelled("net2net", labels())?),
            fill: CountsOutlet::new(hub.source_labelled("fill2net", labels())?),
        })
    }

    /// The outlet a transfer of `kind` uses (`disk2file` publishes none).
    pub(crate) fn of(&self, kind: Kind) -> Option<&CountsOutlet> {
        match kind {
            Kind::Net2Net => Some(&self.relay),
            Kind::Fill2Net => Some(&self.fill),
            Kind::Record | Kind::Net2File | Kind::Net2Sfxc => Some(&self.record),
            Kind::Disk2File => None,
        }
    }

    /// Take the runtime's sources off the hub (it was deleted).
    fn remove_from(&self, hub: &Hub) {
        for o in [&self.record, &self.relay, &self.fill] {
            hub.remove(o.view());
        }
    }
}

/// Everything behind the daemon's lock.
pub(crate) struct Shared {
    /// Every runtime by name; the default one is always there.
    pub(crate) runtimes: BTreeMap<String, State>,
    /// Transient runtimes and the session that made each (deleted when it ends).
    owners: BTreeMap<String, u64>,
    /// Background errors until `error?` takes them (one queue, as jive5ab's).
    pub(crate) errors: ErrorQueue,
    pub(crate) counts: ServeStatus,
    next_session: u64,
}

impl Shared {
    /// The default runtime alone.
    pub(crate) fn new(default: State) -> Shared {
        Shared {
            runtimes: BTreeMap::from([(DEFAULT_RUNTIME.to_string(), default)]),
            owners: BTreeMap::new(),
            errors: ErrorQueue::default(),
            counts: ServeStatus {
                transfer: "no_transfer".into(),
                ..ServeStatus::default()
            },
            next_session: 1,
        }
    }

    /// Runtime `name` with the error queue, if it exists.
    pub(crate) fn here<'a>(&'a mut self, name: &'a str) -> Option<Here<'a>> {
        let Shared { runtimes, errors, .. } = self;
        runtimes.get_mut(name).map(|st| Here {
            st,
            errors,
            runtime: name,
        })
    }

    /// The default runtime.
    pub(crate) fn default_runtime(&self) -> &State {
        &self.runtimes[DEFAULT_RUNTIME]
    }
}

/// One runtime's state and the daemon's error queue: what a statement works on.
pub(crate) struct Here<'a> {
    st: &'a mut State,
    pub(crate) errors: &'a mut ErrorQueue,
    /// The runtime's name (in messages of errors its transfers leave).
    pub(crate) runtime: &'a str,
}

impl Deref for Here<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        self.st
    }
}

impl DerefMut for Here<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.st
    }
}

/// A control connection's place: the runtime it works in, and who it is (the owner of the
/// transient runtimes it makes).
#[derive(Debug)]
pub struct Session {
    id: u64,
    runtime: String,
}

impl Session {
    /// The runtime it works in.
    pub fn runtime(&self) -> &str {
        &self.runtime
    }
}

impl Daemon {
    /// A new control connection, working in the default runtime.
    pub fn session(&self) -> Session {
        let mut g = self.lock();
        let id = g.next_session;
        g.next_session += 1;
        Session {
            id,
            runtime: DEFAULT_RUNTIME.into(),
        }
    }

    /// A control connection closed: the transient runtimes it made are deleted (their
    /// transfers stopped), as jive5ab does.
    pub fn end_session(&self, session: Session) {
        let mut g = self.lock();
        let owned: Vec<String> = g
            .owners
            .iter()
            .filter(|(_, id)| **id == session.id)
            .map(|(n, _)| n.clone())
            .collect();
        for name in owned {
            self.delete(&mut g, &name);
        }
        self.publish(&g);
    }

    /// `runtime`: which runtime `session` works in, made or deleted as asked (jive5ab's replies).
    pub(crate) fn runtime(&self, g: &mut Shared, session: &mut Session, cmd: RuntimeCmd) -> Answer {
        match cmd {
            RuntimeCmd::Query => {
                let mut f = vec![session.runtime.clone(), g.runtimes.len().to_string()];
                f.extend(g.runtimes.keys().filter(|n| **n != session.runtime).cloned());
                ok(f)
            }
            RuntimeCmd::Select { name, creation } => {
                let exists = g.runtimes.contains_key(&name);
                match (creation, exists) {
                    (Creation::Exists, false) => {
                        return refuse(ReturnCode::Conflict, format!("'{name}' doesn't exist"))
                    }
                    (Creation::New | Creation::Transient, true) => {
                        return refuse(ReturnCode::Conflict, format!("'{name}' already exists"))
                    }
                    (_, false) => {
                        if let Err(a) = self.create(g, &name) {
                            return a;
                        }
                        if creation == Creation::Transient {
                            g.owners.insert(name.clone(), session.id);
                        }
                    }
                    (_, true) => {}
                }
                session.runtime = name;
                ok(vec![session.runtime.clone()])
            }
            RuntimeCmd::Delete(name) => {
                if name == DEFAULT_RUNTIME {
                    return refuse(ReturnCode::Conflict, "cannot delete the default runtime");
                }
                if !g.runtimes.contains_key(&name) {
                    return refuse(ReturnCode::Conflict, format!("no active runtime '{name}'"));
                }
                self.delete(g, &name);
                if session.runtime == name {
                    session.runtime = DEFAULT_RUNTIME.into();
                }
                ok(vec![session.runtime.clone()])
            }
        }
    }

    /// A new runtime: default settings, the default disks, metric sources of its own.
    fn create(&self, g: &mut Shared, name: &str) -> Result<(), Answer> {
        if g.runtimes.len() > MAX_RUNTIMES {
            return Err(refuse(
                ReturnCode::Failed,
                format!("at most {MAX_RUNTIMES} runtimes besides the default: delete one first"),
            ));
        }
        let outlets = Outlets::new(&self.hub, name).map_err(|e| refuse(ReturnCode::Failed, e.to_string()))?;
        g.runtimes
            .insert(name.to_string(), State::new(self.env.paths.default_disks(), outlets));
        Ok(())
    }

    /// Delete runtime `name` (not the default): its transfer stopped (a failure said in the
    /// error queue), its metric sources taken away.
    fn delete(&self, g: &mut Shared, name: &str) {
        if let Some(mut h) = g.here(name) {
            if let Err(e) = self.stop_running(&mut h) {
                let kind = "transfer";
                h.errors.push(
                    -1,
                    format!("{kind} of deleted runtime {name} failed: {e}"),
                    crate::unix_seconds(),
                );
            }
        }
        g.owners.remove(name);
        if let Some(st) = g.runtimes.remove(name) {
            st.outlets.remove_from(&self.hub);
        }
    }
}
