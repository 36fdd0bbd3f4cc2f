//! Quitting while a job runs: never at once. A job over many operations
//! may be minutes into its work, and a quit that dropped it would leave
//! the reviewer without a word of what it recorded. So `q` or Ctrl-C asks
//! first; on yes the job is asked to stop between chunks (after the
//! operation in hand), and the console quits when it lands, keeping its
//! report to print on the normal screen once the terminal is restored
//! (`background` lands it). A SIGTERM or SIGHUP does the same without
//! asking. With no job running, `q` quits as it always did.

use super::super::app::{App, Job, Mode, Pending, Tone};
use super::status::set_status;

/// `q` or Ctrl-C.
pub(super) fn quit(app: &mut App) {
    let Some(working) = &app.working else {
        app.should_quit = true;
        return;
    };
    if app.quitting {
        let text = format!(
            "quitting: {} stops after the operation in hand, then recon quits and prints its \
             report",
            working.text
        );
        set_status(app, Tone::Warn, text);
        return;
    }
    let (done, total) = working.progress.counts();
    let pending = Pending {
        title: "quit while a job runs".to_string(),
        lines: vec![
            format!("{} is running: {done} of {total} done.", working.text),
            String::new(),
            "Quit now? The job stops after the operation in hand: what it recorded stays \
             recorded, nothing more is written, and once the console has closed its report \
             (recorded, refused, skipped, not attempted) is printed in the terminal."
                .to_string(),
        ],
        yes: "stop the job and quit".to_string(),
        job: Job::Quit,
    };
    app.dialog_seen = None;
    app.mode = Mode::Confirm(pending);
}

/// Yes to the question, or a signal: the job is asked to stop between
/// chunks, and the console quits when it lands; with none running, at once.
pub(super) fn stop(app: &mut App) {
    let Some(working) = &app.working else {
        app.should_quit = true;
        return;
    };
    working.progress.cancel();
    let text = format!(
        "quitting: {} stops after the operation in hand; its report is printed when recon \
         has quit",
        working.text
    );
    app.quitting = true;
    set_status(app, Tone::Warn, text);
}

/// A job landed while quitting: its report (the one on screen, the one
/// held for later, or the status line that said it) is kept to print, and
/// the console quits.
pub(super) fn landed(app: &mut App) {
    if !app.quitting {
        return;
    }
    let report = match std::mem::replace(&mut app.mode, Mode::Normal) {
        Mode::Report(report) => Some(report),
        _ => app.held_report.take(),
    };
    app.exit_report = report.or_else(|| {
        app.status.as_ref().map(|s| super::super::app::Report {
            title: s.text.clone(),
            lines: Vec::new(),
            scroll: 0,
        })
    });
    app.should_quit = true;
}
