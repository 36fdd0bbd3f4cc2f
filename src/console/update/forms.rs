//! Typed input: the search, the reviewer's name, and the compensation form.
//!
//! Each prompt keeps its whole state in its [`Mode`] (a [`TextField`] with
//! its cursor), so a key press is a small function from the old input to
//! the new one, and leaving a prompt drops it. The search is applied as it
//! is typed: each change of its text asks for the queue's first page of
//! matches off the key loop (a substring match reads rows until it has a
//! page), and the rows land on a later poll. The reviewer's name is checked as the command line checks it
//! and asked once; the request that needed it carries on afterwards. The
//! compensation form (opened by [`super::confirm`]) only gathers values:
//! submitting it leads to a confirmation, never straight to a write.

use super::super::action::{Action, Resume};
use super::super::app::{AnnotateForm, App, CompensationForm, Mode, Tone};
use super::super::field::TextField;
use super::confirm;
use super::queue;
use super::status::set_status;
use super::triage;
use crate::domain::normalize_name;
use crate::domain::sanitize;
use crate::error::{Refusal, Result};

/// A key in the search prompt. The queue follows the text as it is typed,
/// from its first row; Enter keeps the search and leaves the prompt, Esc
/// goes back to the search there was before it opened.
pub(super) fn search_input(
    app: &mut App,
    mut input: TextField,
    previous: Option<String>,
    action: Action,
) -> Result<()> {
    let before = input.text().to_string();
    match action {
        Action::Input(c) => input.insert(c),
        Action::Edit(edit) => input.edit(edit),
        Action::Cancel => {
            app.mode = Mode::Normal;
            return set_search(app, previous);
        }
        Action::Submit => {
            app.mode = Mode::Normal;
            set_search(app, searched(&input))?;
            let text = match &app.search {
                Some(s) => format!("search \"{s}\" in {}; Esc clears it", app.filter.label()),
                None => "search cleared".to_string(),
            };
            set_status(app, Tone::Plain, text);
            return Ok(());
        }
        _ => {}
    }
    let changed = input.text() != before;
    let typed = searched(&input);
    app.mode = Mode::Search { input, previous };
    // The prompt opens empty and leaves the queue as it was until the
    // text changes: a cursor move searches nothing new.
    if changed {
        set_search(app, typed)?;
    }
    Ok(())
}

/// The search a field holds: its text, trimmed; none when blank.
fn searched(input: &TextField) -> Option<String> {
    let text = input.text().trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Shows the queue under a search, from its first row, unless it already
/// shows that search.
fn set_search(app: &mut App, search: Option<String>) -> Result<()> {
    if app.search == search {
        return Ok(());
    }
    app.search = search;
    queue::start_search(app)
}

/// Checks a reviewer name as the command line does: blank is refused as
/// `empty_reviewer`, control characters and overlong names too.
pub fn check_reviewer(name: &str) -> std::result::Result<String, String> {
    let Some(name) = normalize_name(name) else {
        return Err(format!(
            "refused: {}: {}",
            Refusal::EmptyReviewer.code(),
            Refusal::EmptyReviewer
        ));
    };
    if name.chars().any(sanitize::is_unsafe) {
        return Err("the name contains control characters".to_string());
    }
    if name.chars().count() > 200 {
        return Err("the name is longer than 200 characters".to_string());
    }
    Ok(name.to_string())
}

/// A key in the reviewer prompt; an accepted name resumes the request that
/// asked for it.
pub(super) fn reviewer_input(
    app: &mut App,
    mut input: TextField,
    error: Option<String>,
    resume: Resume,
    action: Action,
) -> Result<()> {
    match action {
        Action::Input(c) => {
            input.insert(c);
            app.mode = Mode::Reviewer {
                input,
                error: None,
                resume,
            };
        }
        Action::Edit(edit) => {
            input.edit(edit);
            app.mode = Mode::Reviewer {
                input,
                error,
                resume,
            };
        }
        Action::Cancel => {
            app.mode = Mode::Normal;
            set_status(app, Tone::Plain, "cancelled; nothing was written");
        }
        Action::Submit => match check_reviewer(input.text()) {
            Ok(name) => {
                app.reviewer = Some(name.clone());
                app.mode = Mode::Normal;
                set_status(
                    app,
                    Tone::Plain,
                    format!("reviewing as {name}; the name is recorded with each change"),
                );
                return triage::start(app, resume);
            }
            Err(reason) => {
                app.mode = Mode::Reviewer {
                    input,
                    error: Some(reason),
                    resume,
                }
            }
        },
        _ => {
            app.mode = Mode::Reviewer {
                input,
                error,
                resume,
            }
        }
    }
    Ok(())
}

/// A key in the compensation form; Enter checks the fields and moves on to
/// the confirmation, or says what is wrong.
pub(super) fn form_input(app: &mut App, mut form: CompensationForm, action: Action) -> Result<()> {
    match action {
        Action::Input(c) => {
            form.fields[form.focus].insert(c);
            form.error = None;
        }
        Action::Edit(edit) => form.fields[form.focus].edit(edit),
        Action::NextField => form.focus = (form.focus + 1) % form.fields.len(),
        Action::PrevField => form.focus = (form.focus + form.fields.len() - 1) % form.fields.len(),
        Action::Cancel => {
            app.mode = Mode::Normal;
            set_status(app, Tone::Plain, "cancelled; nothing was written");
            return Ok(());
        }
        Action::Submit => {
            match confirm::approval_pending(app, &form) {
                Ok(pending) => confirm::open_dialog(app, pending),
                Err(reason) => {
                    form.error = Some(reason);
                    app.mode = Mode::Compensate(form);
                }
            }
            return Ok(());
        }
        _ => {}
    }
    app.mode = Mode::Compensate(form);
    Ok(())
}

/// A key in the note or escalation form; Enter records it as the
/// reviewer, Esc leaves without writing.
pub(super) fn annotate_input(app: &mut App, mut form: AnnotateForm, action: Action) -> Result<()> {
    match action {
        Action::Input(c) => {
            form.input.insert(c);
            form.error = None;
        }
        Action::Edit(edit) => form.input.edit(edit),
        Action::Cancel => {
            app.mode = Mode::Normal;
            set_status(app, Tone::Plain, "cancelled; nothing was written");
            return Ok(());
        }
        Action::Submit => return triage::submit(app, form),
        _ => {}
    }
    app.mode = Mode::Annotate(form);
    Ok(())
}
