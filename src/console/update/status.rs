//! How `update` tells the reviewer what happened: the status line, and the
//! report that storage trouble or a refusal outside a job becomes.
//!
//! Every mode's module says what it did through these two, so they sit
//! below all of them; nothing here reads the workspace.

use super::super::app::{App, Mode, Report, Status, Tone};
use crate::error::Error;

pub(super) fn set_status(app: &mut App, tone: Tone, text: impl Into<String>) {
    app.status = Some(Status {
        tone,
        text: text.into(),
        at: app.now,
    });
}

/// Drops a plain status line older than [`Status::PLAIN_EXPIRES`].
pub(super) fn expire(app: &mut App) {
    if app
        .status
        .as_ref()
        .is_some_and(|s| s.tone == Tone::Plain && app.now.since(s.at) >= Status::PLAIN_EXPIRES)
    {
        app.status = None;
    }
}

/// Storage trouble, or a refusal outside a job: a report, never a crash.
pub(super) fn fail(app: &mut App, error: &Error) {
    let (title, mut text) = match error.cause() {
        Error::Refused(r) => (
            format!("refused: {}", r.code()),
            format!("refused: {}: {r}", r.code()),
        ),
        other => ("storage error".to_string(), format!("error: {other}")),
    };
    if let Some(committed) = error.committed() {
        text = format!("{text}; {}", committed.sentence);
    }
    set_status(app, Tone::Bad, text.clone());
    app.mode = Mode::Report(Report {
        title,
        lines: vec![(Tone::Bad, text)],
        scroll: 0,
    });
}
