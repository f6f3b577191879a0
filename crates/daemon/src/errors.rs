//! Errors that happened in the background (a transfer that failed by itself, a `disk2file` that
//! could not finish), kept until the Field System asks: `status?` shows bit 0x2 and the oldest
//! one while any is queued, `error?` takes the oldest off (jive5ab's `errorqueue.cc`; the FS's
//! `fb_status` asks `error?` while the bit is set).

use std::collections::VecDeque;

/// Most errors kept (the oldest are dropped beyond it, counted in the one that stays).
const MAX_ERRORS: usize = 64;

/// One queued error: the same number and message again counts as an occurrence.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedError {
    /// Error number (jive5ab: -1 for a failed data path).
    pub number: i32,
    /// What happened.
    pub message: String,
    /// When it first happened, seconds since 1970.
    pub first: f64,
    /// When it last happened.
    pub last: f64,
    /// How often.
    pub occurrences: u64,
}

/// The queue.
#[derive(Debug, Default)]
pub struct ErrorQueue {
    queue: VecDeque<QueuedError>,
}

impl ErrorQueue {
    /// Queue an error that happened at `now` (seconds since 1970).
    pub fn push(&mut self, number: i32, message: String, now: f64) {
        if let Some(e) = self
            .queue
            .iter_mut()
            .find(|e| e.number == number && e.message == message)
        {
            e.last = now;
            e.occurrences += 1;
            return;
        }
        if self.queue.len() >= MAX_ERRORS {
            self.queue.pop_front();
        }
        self.queue.push_back(QueuedError {
            number,
            message,
            first: now,
            last: now,
            occurrences: 1,
        });
    }

    /// The oldest, left queued (`status?`).
    pub fn peek(&self) -> Option<&QueuedError> {
        self.queue.front()
    }

    /// The oldest, taken off (`error?`).
    pub fn pop(&mut self) -> Option<QueuedError> {
        self.queue.pop_front()
    }

    /// Whether any is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// `error?`'s fields: number, message, first time, last time and count (the last two only
/// when it happened more than once); all empty when nothing is queued.
pub fn error_fields(e: Option<&QueuedError>) -> Vec<String> {
    let Some(e) = e else {
        return vec![String::new(); 5];
    };
    let again = e.occurrences > 1;
    vec![
        e.number.to_string(),
        e.message.clone(),
        vex_timestamp(e.first),
        if again { vex_timestamp(e.last) } else { String::new() },
        if again {
            e.occurrences.to_string()
        } else {
            String::new()
        },
    ]
}

/// A time as jive5ab prints an error's: `2026y331d03h15m06.5442s`.
pub fn vex_timestamp(t: f64) -> String {
    let secs = t.floor();
    vsis::playback::vex_time(secs as i64, Some(t - secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_queue_oldest_first_and_repeat_as_occurrences() {
        let mut q = ErrorQueue::default();
        assert_eq!(error_fields(q.peek()), vec!["", "", "", "", ""]);
        q.push(-1, "record failed: disk full".into(), 1_795_744_603.25);
        q.push(-1, "record failed: disk full".into(), 1_795_744_605.5);
        q.push(-1, "disk2file failed".into(), 1_795_744_606.0);
        let f = error_fields(q.peek());
        assert_eq!(f[0], "-1");
        assert_eq!(f[2], "2026y331d01h56m43.2500s");
        assert_eq!((f[3].as_str(), f[4].as_str()), ("2026y331d01h56m45.5000s", "2"));
        assert_eq!(q.pop().unwrap().message, "record failed: disk full");
        assert_eq!(error_fields(q.peek())[4], "");
        q.pop();
        assert!(q.is_empty());
        for i in 0..100 {
            q.push(i, "x".into(), 0.0);
        }
        assert_eq!(q.peek().unwrap().number, 36, "bounded: the oldest dropped");
    }
}
