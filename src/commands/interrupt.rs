//! Ctrl-C for a long command: the first SIGINT is remembered, not obeyed
//! at once, so the command can stop between two requests with everything
//! it read recorded and say what it did not do. The handler only stores a
//! flag (all a signal handler may safely do), and resets itself: a second
//! Ctrl-C ends the process as SIGINT always does, and SQLite and
//! PostgreSQL roll the open transaction back.
//!
//! Installed by the commands that can stop early (`observe`, `resolve`,
//! through [`super::watch::TerminalWatch`]), never by the library: a test
//! or the console drives `Workspace::observe_watched` or
//! `Workspace::resolve_watched` with its own [`crate::workspace::Watch`].
//!
//! The console, whose Ctrl-C is a key in raw mode, installs [`Ended`]
//! instead: SIGTERM and SIGHUP, remembered the same way, so that a job it
//! runs stops between chunks and its report is printed before it exits.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

static ENDED: AtomicBool = AtomicBool::new(false);

/// The first SIGTERM or SIGHUP is remembered; the next one, of either
/// kind, ends the process as the signal always does (`SA_RESETHAND` alone
/// would let a SIGTERM after a SIGHUP be only remembered again).
extern "C" fn on_end(signal: libc::c_int) {
    if ENDED.swap(true, Ordering::SeqCst) {
        // SAFETY: `signal` and `raise` are async-signal-safe; the default
        // action of SIGTERM and SIGHUP ends the process.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
}

/// The first SIGTERM or SIGHUP of this process, once [`Ended::install`]ed.
pub struct Ended(());

impl Ended {
    /// Installs the handler for both signals, with the flags of
    /// [`Interrupt::install`]: a second one, of either kind, ends the
    /// process as it always does. Should `sigaction` fail, the signal
    /// keeps its default meaning.
    pub fn install() -> Ended {
        for signal in [libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: as in `Interrupt::install`; the handler only stores
            // to an atomic.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_end as *const () as libc::sighandler_t;
                action.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        Ended(())
    }

    /// Whether a SIGTERM or SIGHUP came since the handler was installed.
    pub fn received(&self) -> bool {
        ENDED.load(Ordering::SeqCst)
    }
}

/// The first Ctrl-C of this process, once [`Interrupt::install`]ed.
pub struct Interrupt(());

impl Interrupt {
    /// Installs the handler. `SA_RESTART` keeps the reads of an adapter's
    /// pipe and of the stores going through the signal; `SA_RESETHAND`
    /// makes the next SIGINT the default one. Should `sigaction` fail,
    /// Ctrl-C keeps its default meaning, which loses nothing committed.
    pub fn install() -> Interrupt {
        // SAFETY: a zeroed `sigaction` is a valid value of the C struct;
        // the handler is an `extern "C"` function that only stores to an
        // atomic, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_interrupt as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        }
        Interrupt(())
    }

    /// Whether Ctrl-C was pressed since the handler was installed.
    pub fn pressed(&self) -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
    }
}
