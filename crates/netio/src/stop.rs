//! Stop on SIGINT, SIGTERM or SIGHUP by setting a flag instead of dying: every long-running
//! command (a stream sender or recorder, the link emulator) must still tear down what it made and
//! write its summary.

// unsafe: sigaction(2): std installs no signal handlers.
#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

/// The last SIGINT/SIGTERM received (0: none). Written by the handler,
/// which may only do async-signal-safe things: an atomic store is one.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
}

/// Installs handlers so that SIGINT, SIGTERM and SIGHUP set a flag
/// ([`stop_signal`]) instead of killing the process: the caller
/// then stops its loops, cleans up and reports.
pub fn install_stop_signals() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: sigaction is plain data; zeroed is a valid empty mask and flags.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SA_RESTART: other threads' blocking calls resume instead of failing.
        act.sa_flags = libc::SA_RESTART;
        // SAFETY: `act` is initialised, the handler only does an atomic store,
        // and a null old-action pointer is allowed.
        let rc = unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The stop signal received since [`install_stop_signals`], if any.
pub fn stop_signal() -> Option<i32> {
    match STOP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
