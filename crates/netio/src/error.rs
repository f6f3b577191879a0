//! The error of a local operation on a socket or file, shared by every session crate.
//!
//! It says what was being done ("binding UDP 0.0.0.0:46227", "writing scan.vdif") and keeps the
//! OS error as its source, so a report prints each once: `writing scan.vdif: No space left on
//! device` (anyhow's `{:#}`, or [`error_chain`] where a message goes to a peer or a result).

use std::error::Error;
use std::io;

/// A local operation on a socket or file that failed.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct IoError {
    /// What was being done.
    pub what: String,
    /// Why it failed.
    #[source]
    pub source: io::Error,
}

/// For `map_err`: wrap an [`io::Error`] with what was being done.
pub fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> IoError {
    let what = what.into();
    move |source| IoError { what, source }
}

/// An error and its causes, "outer: inner: innermost" (what `{:#}` prints for anyhow errors):
/// for messages that leave the process (to a peer, into a result) rather than through anyhow.
pub fn error_chain(e: &(dyn Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    // Bounded: error chains are short; 16 links is more than any here.
    for _ in 0..16 {
        let Some(c) = cur else { break };
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_names_the_operation_then_the_os_error_once() {
        let e = io_err("writing scan.vdif")(io::Error::from_raw_os_error(28));
        assert_eq!(e.to_string(), "writing scan.vdif");
        let chain = error_chain(&e);
        assert!(
            chain.starts_with("writing scan.vdif: No space left on device"),
            "{chain}"
        );
        assert_eq!(chain.matches("No space").count(), 1, "{chain}");
    }
}
