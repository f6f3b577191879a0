//! Where the data paths hand their counts over ([`Publisher`]) and readers take the latest of
//! each ([`Hub::snapshot`]).

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use crate::history;
use crate::status::Status;

/// Most sources one process publishes (each command has one; the daemon one per transfer kind).
pub const MAX_SOURCES: usize = 32;

/// A source's own labels (name, value), on every sample it gives.
pub type Labels = Vec<(&'static str, String)>;

/// One named source of counts (a command, or one kind of transfer of the daemon), with labels
/// of its own on every sample (the daemon's `runtime`).
#[derive(Debug)]
struct Source {
    name: String,
    labels: Labels,
    latest: Mutex<Option<Arc<Status>>>,
}

impl Source {
    /// Its name in snapshots: the name, and each label's value after an `@`.
    fn key(&self) -> String {
        let mut k = self.name.clone();
        for (_, v) in &self.labels {
            k.push('@');
            k.push_str(v);
        }
        k
    }
}

/// Where a data path hands its counts over.
#[derive(Debug, Clone)]
pub struct Publisher(Arc<Source>);

impl Publisher {
    /// Hand `s` over without waiting: `false` (and `s` dropped) when a reader holds the slot
    /// at this instant; the next interval's counts replace it anyway.
    pub fn publish(&self, s: Status) -> bool {
        let s = Arc::new(s);
        match self.0.latest.try_lock() {
            Ok(mut slot) => {
                *slot = Some(s);
                true
            }
            Err(TryLockError::Poisoned(p)) => {
                *p.into_inner() = Some(s);
                true
            }
            Err(TryLockError::WouldBlock) => false,
        }
    }

    /// Hand `s` over, waiting for the slot (off the data path: a final report).
    pub fn publish_final(&self, s: Status) {
        *lock(&self.0.latest) = Some(Arc::new(s));
    }

    /// Forget what was published (the command is gone).
    pub fn clear(&self) {
        *lock(&self.0.latest) = None;
    }

    /// The source's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }
}

/// A slot's lock; a panicked holder leaves a plain value behind, still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Every source of one process.
#[derive(Debug)]
pub struct Hub {
    program: String,
    version: String,
    sources: Mutex<Vec<Arc<Source>>>,
    history: Mutex<history::History>,
}

/// Why a source could not be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// [`MAX_SOURCES`] sources exist already.
    #[error("at most {MAX_SOURCES} metric sources per process")]
    TooManySources,
}

impl Hub {
    /// A hub for `program` (e.g. `stream recv`) at `version`.
    pub fn new(program: &str, version: &str) -> Arc<Hub> {
        Arc::new(Hub {
            program: program.to_string(),
            version: version.to_string(),
            sources: Mutex::new(Vec::new()),
            history: Mutex::new(history::History::default()),
        })
    }

    /// The publisher of source `name` (the same slot each time for the same name).
    pub fn source(&self, name: &str) -> Result<Publisher, HubError> {
        self.source_labelled(name, Vec::new())
    }

    /// The publisher of source `name` whose samples carry `labels` too (e.g. the daemon's
    /// `runtime`); the same slot each time for the same name and labels.
    pub fn source_labelled(&self, name: &str, labels: Labels) -> Result<Publisher, HubError> {
        let mut all = lock(&self.sources);
        if let Some(s) = all.iter().find(|s| s.name == name && s.labels == labels) {
            return Ok(Publisher(s.clone()));
        }
        if all.len() >= MAX_SOURCES {
            return Err(HubError::TooManySources);
        }
        let s = Arc::new(Source {
            name: name.to_string(),
            labels,
            latest: Mutex::new(None),
        });
        all.push(s.clone());
        Ok(Publisher(s))
    }

    /// Take a source away (what published it is gone for good: a deleted runtime); its place
    /// is free for another.
    pub fn remove(&self, p: &Publisher) {
        lock(&self.sources).retain(|s| !Arc::ptr_eq(s, &p.0));
    }

    /// The latest counts of every source that has published, in the order they were added;
    /// a labelled source is named `name@value…`.
    pub fn snapshot(&self) -> Vec<(String, Arc<Status>)> {
        let all: Vec<Arc<Source>> = lock(&self.sources).clone();
        all.iter()
            .filter_map(|s| lock(&s.latest).clone().map(|st| (s.key(), st)))
            .collect()
    }

    /// [`Hub::snapshot`] with each source's name and labels apart (what the exposition needs).
    pub(crate) fn labelled_snapshot(&self) -> Vec<(String, Labels, Arc<Status>)> {
        let all: Vec<Arc<Source>> = lock(&self.sources).clone();
        all.iter()
            .filter_map(|s| lock(&s.latest).clone().map(|st| (s.name.clone(), s.labels.clone(), st)))
            .collect()
    }

    /// The program and version the hub was made for.
    pub fn program(&self) -> (&str, &str) {
        (&self.program, &self.version)
    }

    /// Add one history point per station from the latest counts, at `t_s` seconds.
    pub fn sample_history(&self, t_s: f64) {
        let snap = self.snapshot();
        lock(&self.history).sample(t_s, &snap);
    }

    /// The history, for the page.
    pub fn history(&self) -> Vec<history::Series> {
        lock(&self.history).series()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stream::results::RecvStatus;

    fn recv(frames: u64) -> Status {
        Status::StreamRecv(RecvStatus {
            frames_written: frames,
            ..RecvStatus::default()
        })
    }

    #[test]
    fn a_publisher_never_waits_for_a_reader() {
        let hub = Hub::new("test", "0");
        let p = hub.source("stream_recv").unwrap();
        assert!(p.publish(recv(1)));
        // A reader holding the slot: the publisher skips instead of waiting.
        let src = lock(&hub.sources)[0].clone();
        let held = src.latest.lock().unwrap();
        assert!(!p.publish(recv(2)));
        drop(held);
        let snap = hub.snapshot();
        assert!(matches!(&*snap[0].1, Status::StreamRecv(r) if r.frames_written == 1));
        assert!(p.publish(recv(3)));
        assert!(matches!(&*hub.snapshot()[0].1, Status::StreamRecv(r) if r.frames_written == 3));
        // Same name, same slot; the number of sources is bounded.
        assert!(Arc::ptr_eq(&hub.source("stream_recv").unwrap().0, &p.0));
        for i in 1..MAX_SOURCES {
            hub.source(&format!("s{i}")).unwrap();
        }
        assert_eq!(hub.source("one_more").unwrap_err(), HubError::TooManySources);
        p.clear();
        assert!(hub.snapshot().is_empty());
        // A removed source frees its place.
        let s1 = hub.source("s1").unwrap();
        hub.remove(&s1);
        let more = hub.source_labelled("one_more", vec![("runtime", "Ef".into())]).unwrap();
        assert!(more.publish(recv(4)));
        assert_eq!(hub.snapshot()[0].0, "one_more@Ef");
        // The same name without the label is another source (and the hub is full again).
        assert_eq!(hub.source("one_more").unwrap_err(), HubError::TooManySources);
    }
}
