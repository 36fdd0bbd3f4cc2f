//! A request becoming a confirmation: the road every mutation takes before
//! anything is written.
//!
//! A request is checked for availability first (the reason is shown when
//! it is not available), then the reviewer's name is asked for once, then
//! a [`Pending`] is built that says in words exactly what will happen and
//! holds exactly the values that will be submitted: the operations and the
//! versions the reviewer saw. A compensation first opens its form, filled
//! here with suggestions, and comes back through [`approval_pending`] when
//! the form is submitted; "keep one" first opens its picker of a
//! duplicate's matches ([`keep_input`]), and Enter there leads to its
//! confirmation, bound to what the picker saw. Only `y` on that dialog
//! hands the job to [`super::jobs`]; anything else writes nothing. The texts live here, next
//! to the values they describe, so the dialog cannot promise one thing and
//! the job do another.

use super::super::action::{Action, Request, Resume};
use super::super::app::{
    App, CompensationForm, Job, KeepPicker, Mode, Origin, Pending, Target, Tone,
};
use super::super::field::TextField;
use super::jobs;
use super::live::{changed_after, overtaken, refresh};
use super::quit;
use super::status::set_status;
use crate::domain::resolve::Planned;
use crate::domain::{duplicates, names, Approval, Decision, Operation, Verdict};
use crate::error::Result;
use crate::receiver::BUILTIN_NAME;

/// A key in a confirmation dialog: only `y` carries the act out. Every act
/// confirmed here is for good (a close bars the receiver forever, a decision
/// takes the operation out of `unknown` with an evidence row that is never
/// removed, an approval and a dispatch cannot be taken back), and Enter is
/// the key a reviewer presses out of habit right after the name prompt or
/// the compensation form, so Enter only says which key does it.
pub(super) fn confirm_input(app: &mut App, pending: Pending, action: Action) -> Result<()> {
    match action {
        Action::Confirm => {
            app.mode = Mode::Normal;
            if let Job::Quit = pending.job {
                quit::stop(app);
                return Ok(());
            }
            if let Job::Unmark = pending.job {
                let n = app.marks.len();
                app.marks.clear();
                set_status(app, Tone::Plain, format!("{n} mark{} dropped", plural(n)));
                return Ok(());
            }
            // One operation is checked here, just before anything is
            // written; a job over many checks each before its turn.
            if let [one] = pending.job.bound_ops().as_slice() {
                if let Some(changed) = changed_after(&app.ws, one, app.dialog_since)? {
                    refresh(app, Origin::Refreshed, None)?;
                    overtaken(app, &pending, &[changed], 0);
                    return Ok(());
                }
            }
            jobs::run_job(app, pending.job, app.dialog_since)
        }
        Action::Cancel => {
            app.mode = Mode::Normal;
            let text = match pending.job {
                Job::Unmark => format!("the {} marks stay", app.marks.len()),
                Job::Quit => "not quitting: the job goes on".to_string(),
                _ => "cancelled; nothing was written".to_string(),
            };
            set_status(app, Tone::Plain, text);
            Ok(())
        }
        Action::Submit => {
            let text = format!(
                "press y to {}; Enter does not confirm an act that cannot be undone (n or Esc \
                 cancels)",
                pending.yes
            );
            set_status(app, Tone::Warn, text);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Starts a request: unavailable ones say why in the status line; the
/// first one asks for the reviewer's name; a compensation opens its form;
/// every other one goes to its confirmation.
pub(super) fn start_request(app: &mut App, request: Request) -> Result<()> {
    if let Err(reason) = app.availability(request) {
        set_status(
            app,
            Tone::Warn,
            format!("{} is unavailable: {reason}", request.name()),
        );
        return Ok(());
    }
    let Some(reviewer) = app.reviewer.clone() else {
        app.mode = Mode::Reviewer {
            input: TextField::default(),
            error: None,
            resume: Resume::Request(request),
        };
        return Ok(());
    };
    let bulk = request.is_bulk() && !app.marks.is_empty();
    let targets = targets(app, bulk);
    let verdict_shown = app
        .selected_detail()
        .and_then(|d| d.shown())
        .map(|shown| shown.verdict);
    let pending = match request {
        Request::Close => close_pending(&reviewer, targets),
        Request::Decide(decision) => decide_pending(
            &reviewer,
            decision,
            targets,
            (!bulk).then_some(verdict_shown).flatten(),
        ),
        Request::Compensate => {
            if let Some(d) = app.selected_detail() {
                app.mode = Mode::Compensate(compensation_form(&d.operation, &d.approvals));
            }
            return Ok(());
        }
        Request::Keep => {
            let picker = app
                .selected_detail()
                .and_then(|d| d.shown().map(|shown| KeepPicker::of(d, shown)));
            if let Some(picker) = picker {
                app.mode = Mode::Keep(picker);
            }
            return Ok(());
        }
        Request::Dispatch => {
            let Some(d) = app.selected_detail() else {
                return Ok(());
            };
            dispatch_pending(&d.operation)
        }
    };
    open_dialog(app, pending);
    Ok(())
}

/// Opens a confirmation, bound to what the reviewer saw of its
/// operations: one operation's history as far as its detail on screen
/// goes, several as far as the screen was read. An entry naming one of them
/// after that closes the dialog (`live`), and is checked again just before
/// anything is written (here for one operation, per operation in a job).
pub(super) fn open_dialog(app: &mut App, pending: Pending) {
    let bound = pending.job.bound_ops();
    let detail = match bound.as_slice() {
        [one] => app
            .selected_detail()
            .filter(|d| d.operation.op_id == *one)
            .map(|d| d.latest_seq),
        _ => None,
    };
    app.dialog_since = detail.unwrap_or(app.seen.journal.length);
    app.dialog_seen = None;
    app.mode = Mode::Confirm(pending);
}

/// The operations a request acts on, as the reviewer saw them: every mark
/// for a bulk request, otherwise the selected operation.
fn targets(app: &App, bulk: bool) -> Vec<Target> {
    if bulk {
        return app
            .marks
            .iter()
            .map(|(op_id, m)| Target {
                op_id: op_id.clone(),
                version: m.version,
                state: m.state,
                payload: m.payload.clone(),
                receiver: m.receiver.clone(),
            })
            .collect();
    }
    match app.selected_detail() {
        Some(d) => vec![Target {
            op_id: d.operation.op_id.clone(),
            version: d.operation.version,
            state: d.operation.state,
            payload: d.operation.payload.clone(),
            receiver: d.operation.receiver.clone(),
        }],
        None => Vec::new(),
    }
}

fn close_pending(reviewer: &str, targets: Vec<Target>) -> Pending {
    let mut lines = Vec::new();
    if let [one] = targets.as_slice() {
        lines.push(format!(
            "Take a CLOSING snapshot of {}, authorized by {reviewer}.",
            one.op_id
        ));
    } else {
        lines.push(format!(
            "Take a CLOSING snapshot of each of these {} marked operations, authorized by {reviewer}:",
            targets.len()
        ));
        lines.extend(listed(&targets, |t| {
            format!("  {}  (marked at version {})", t.op_id, t.version)
        }));
    }
    lines.push(String::new());
    lines.extend(close_consequences(reviewer, &targets));
    Pending {
        title: "closing snapshot (receiver mutation)".to_string(),
        lines,
        yes: "close".to_string(),
        job: Job::Close { targets },
    }
}

/// What a close does, in words: at the built-in ledger, a tombstone in
/// receiver.sqlite; at an adapter, a close it is asked for.
fn close_consequences(reviewer: &str, targets: &[Target]) -> Vec<String> {
    let adapters = adapters_of(targets);
    if adapters.is_empty() {
        return vec![
            "This is a receiver mutation, not a read: it writes a durable close tombstone in \
             receiver.sqlite, and from then on the receiver refuses every write for the operation. \
             A request that is still in flight is refused instead of applied: closing can cancel \
             an original that has not landed yet. It cannot be undone."
                .to_string(),
            format!(
                "{reviewer} is recorded in the tombstone as the one who authorized it. An operation \
                 whose version changed since you saw it is not closed."
            ),
        ];
    }
    vec![
        format!(
            "This is a receiver mutation, not a read: receiver {} is asked to close the \
             operation for good, and from then on refuses every write for it. A request that is \
             still in flight is refused instead of applied: closing can cancel an original that \
             has not landed yet. It cannot be undone. A receiver that cannot close is not asked: \
             its operation is refused close_unsupported.",
            adapters.join(", ")
        ),
        format!(
            "{reviewer} is sent to the receiver as the one who authorized it. An operation whose \
             version changed since you saw it is not closed. The close runs in the background: \
             keys keep working, and the result shows when the receiver answers."
        ),
    ]
}

/// How many marked operations a confirmation lists by name; the count
/// above the list is always exact, and the result lists every one.
const LISTED: usize = 12;

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The queue's Esc with marks and nothing else to back out of: asks before
/// it drops them, since they may be the work of a long `v`.
pub(super) fn unmark_pending(marks: usize) -> Pending {
    Pending {
        title: "drop the marks".to_string(),
        lines: vec![format!(
            "Drop all {marks} mark{}? Nothing is written either way: c, n and x then act \
                 on the operation under the cursor again.",
            plural(marks)
        )],
        yes: format!("drop the {marks} mark{}", plural(marks)),
        job: Job::Unmark,
    }
}

/// The re-read key: what it will read and record, before it does.
pub(super) fn reread_pending(
    reviewer: &str,
    op_ids: Vec<String>,
    receivers: Vec<String>,
    scope: String,
) -> Pending {
    let n = op_ids.len();
    let mut lines = vec![format!(
        "Read each of {scope} again from its receiver, and record what it shows as {reviewer}'s \
         observation: {n} observation{}, one per operation:",
        plural(n)
    )];
    lines.extend(listed(&op_ids, |id| format!("  {id}")));
    lines.push(String::new());
    lines.push(
        "No operation's state or version changes; each observation stays in its operation's \
         history and sets its latest verdict. It runs in the background: keys keep working, and \
         Esc in the queue cancels it between reads."
            .to_string(),
    );
    Pending {
        title: "re-read and record".to_string(),
        lines,
        yes: format!("record {n} observation{}", plural(n)),
        job: Job::Observe {
            op_ids,
            receivers,
            scope,
        },
    }
}

/// The resolve key: the exact list it will close and decide by policy,
/// with its counts, before it does.
pub(super) fn resolve_pending(reviewer: &str, list: Vec<Planned>, scope: &str) -> Pending {
    let n = list.len();
    let mut receivers: Vec<&str> = list.iter().map(|op| op.receiver.as_str()).collect();
    receivers.sort_unstable();
    receivers.dedup();
    let mut lines = vec![format!(
        "Resolve by policy provable the {n} unknown operation{} the filter shows ({scope}), at \
         {} receiver{} ({}), authorized by {reviewer}: each still at the version listed is read, \
         closed at its receiver only if its closed snapshot would be unique_exact_match \
         (recorded confirmed) or terminal_absence (recorded not_applied), and recorded as the \
         policy's decision, run by {reviewer}:",
        plural(n),
        receivers.len(),
        plural(receivers.len()),
        receivers.join(", ")
    )];
    lines.extend(listed(&list, |op| {
        format!("  {} v{} at {}", op.op_id, op.version, op.receiver)
    }));
    lines.push(String::new());
    lines.push(
        "A close is for good: no effect can be written afterwards, which can cancel an original \
         still in flight. Every other verdict is left for people; operations changed in the \
         last 15 minutes, escalated ones and those whose receiver cannot close are skipped. It \
         runs in the background: keys keep working, and Esc in the queue cancels it between \
         chunks."
            .to_string(),
    );
    Pending {
        title: "resolve by policy provable".to_string(),
        lines,
        yes: format!("resolve {n} operation{}", plural(n)),
        job: Job::Resolve {
            list,
            scope: scope.to_string(),
        },
    }
}

/// The first [`LISTED`] items, one line each, then how many more.
fn listed<T>(targets: &[T], line: impl Fn(&T) -> String) -> Vec<String> {
    let mut lines: Vec<String> = targets.iter().take(LISTED).map(line).collect();
    if targets.len() > LISTED {
        lines.push(format!(
            "  … and {} more, each checked the same way",
            targets.len() - LISTED
        ));
    }
    lines
}

/// The registered adapters among the targets' receivers, by name.
fn adapters_of(targets: &[Target]) -> Vec<&str> {
    let mut names: Vec<&str> = targets
        .iter()
        .map(|t| t.receiver.as_str())
        .filter(|name| *name != BUILTIN_NAME)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

fn decide_pending(
    reviewer: &str,
    decision: Decision,
    targets: Vec<Target>,
    verdict_shown: Option<Verdict>,
) -> Pending {
    let mut lines = Vec::new();
    if let [one] = targets.as_slice() {
        lines.push(format!(
            "Record {decision} for {} as reviewer {reviewer}, against version {} ({}).",
            one.op_id, one.version, one.state
        ));
        lines.push(String::new());
        lines.push(format!(
            "recon takes a fresh non-closing snapshot{} and classifies it; the decision is \
             recorded only if {} is still unknown at version {} and the verdict supports \
             {decision}{}.",
            if one.receiver == BUILTIN_NAME {
                String::new()
            } else {
                format!(" from receiver {} (in the background)", one.receiver)
            },
            one.op_id,
            one.version,
            verdict_shown
                .map(|v| format!(" (the snapshot on screen says {v})"))
                .unwrap_or_default()
        ));
    } else {
        lines.push(format!(
            "Record {decision} for each of these {} marked operations as reviewer {reviewer}, \
             each against the version it had when you marked it:",
            targets.len()
        ));
        lines.extend(listed(&targets, |t| {
            format!("  {}  version {} ({})", t.op_id, t.version, t.state)
        }));
        lines.push(String::new());
        lines.push(format!(
            "Each gets its own fresh non-closing snapshot and verdict. One that is no longer \
             at its marked version, or whose verdict does not support {decision}, is refused \
             and left unchanged; the result lists what was recorded and what was refused."
        ));
    }
    lines.push(match decision {
        Decision::Confirmed => {
            "The snapshot is appended to the evidence log with your name, and the one matching \
             effect becomes the operation's confirmed effect."
                .to_string()
        }
        Decision::NotApplied => {
            "The snapshot is appended to the evidence log with your name. not_applied ends the \
             flow: nothing retries or replaces the operation."
                .to_string()
        }
    });
    Pending {
        title: format!("record {decision}"),
        lines,
        yes: format!("record {decision}"),
        job: Job::Decide {
            decision,
            targets,
            verdict_shown,
            keep: None,
        },
    }
}

/// A key in the "keep one" picker: the cursor moves over the matches,
/// Enter asks to keep the one under it (a confirmation, bound to the
/// operation's history as far as the picker saw it), Esc leaves.
pub(super) fn keep_input(app: &mut App, picker: KeepPicker, action: Action) -> Result<()> {
    match action {
        Action::Down => app.mode = Mode::Keep(picker.moved(1)),
        Action::Up => app.mode = Mode::Keep(picker.moved(-1)),
        Action::Cancel => {
            app.mode = Mode::Normal;
            set_status(app, Tone::Plain, "cancelled; nothing was written");
        }
        Action::Submit => {
            let Some(pending) = keep_pending(app, &picker) else {
                app.mode = Mode::Normal;
                set_status(
                    app,
                    Tone::Warn,
                    "keep one is unavailable: no match is listed",
                );
                return Ok(());
            };
            open_dialog(app, pending);
            // Bound to what the picker was built from, not to a detail
            // refreshed since: a change after it opened writes nothing.
            app.dialog_since = picker.since;
        }
        _ => app.mode = Mode::Keep(picker),
    }
    Ok(())
}

/// The confirmation of keeping the picker's chosen match: exactly what is
/// recorded, with the version the reviewer saw.
fn keep_pending(app: &App, picker: &KeepPicker) -> Option<Pending> {
    let reviewer = app.reviewer.clone()?;
    let (kept, surplus) = picker.chosen()?;
    let target = Target {
        op_id: picker.op_id.clone(),
        version: picker.version,
        state: crate::domain::OpState::Unknown,
        payload: picker.payload.clone(),
        receiver: picker.receiver.clone(),
    };
    let lines = vec![
        format!(
            "Record confirmed for {} as reviewer {reviewer}, against version {}, keeping \
             effect {kept}.",
            picker.op_id, picker.version
        ),
        format!(
            "Surplus, each to compensate afterwards: {}.",
            surplus.join(", ")
        ),
        String::new(),
        format!(
            "recon takes a fresh snapshot and records it only if {} is still unknown at \
             version {}, the read is still closed, complete and authoritative, every match \
             is an exact copy of the operation and {kept} is among them. The snapshot is \
             appended to the evidence log with your name; a approves each surplus \
             effect's compensation (reason duplicate) afterwards.",
            picker.op_id, picker.version
        ),
    ];
    Some(Pending {
        title: "keep one (record confirmed)".to_string(),
        lines,
        yes: format!("keep {kept}"),
        job: Job::Decide {
            decision: Decision::Confirmed,
            targets: vec![target],
            verdict_shown: Some(Verdict::DuplicateMatches),
            keep: Some(kept.to_string()),
        },
    })
}

pub(super) fn approval_pending(
    app: &App,
    form: &CompensationForm,
) -> std::result::Result<Pending, String> {
    let Some(reviewer) = app.reviewer.clone() else {
        return Err("no reviewer name".to_string());
    };
    let op_id =
        names::identifier("the compensation op id", form.fields[0].text().trim())?.to_string();
    let action = names::identifier("the action kind", form.fields[1].text().trim())?.to_string();
    let payload = crate::domain::parse_payload(form.fields[2].text())
        .map_err(|why| format!("the payload {why}"))?;
    let which = match &form.reason {
        Some(reason) => format!("surplus effect {} (reason {reason})", form.effect_id),
        None => format!("effect {}", form.effect_id),
    };
    let lines = vec![
        format!(
            "Approve compensation {op_id} for {which} of {} (confirmed at version {}), \
             approved by {reviewer}:",
            form.original_op_id, form.expected_version
        ),
        format!("  action:  {action}"),
        format!("  payload: {payload}"),
        String::new(),
        format!(
            "The approval and the new compensation operation {op_id} (prepared, compensating \
             exactly {}) commit in one transaction. Nothing is sent yet: dispatch {op_id} \
             with d, which checks the approval again first.",
            form.effect_id
        ),
    ];
    Ok(Pending {
        title: "approve compensation".to_string(),
        lines,
        yes: "approve".to_string(),
        job: Job::Approve {
            original_op_id: form.original_op_id.clone(),
            effect_id: form.effect_id.clone(),
            expected_version: form.expected_version,
            compensation_op_id: op_id,
            action_kind: action,
            payload,
            reason: form.reason.clone(),
        },
    })
}

/// The approval form for a confirmed original, filled with suggestions the
/// reviewer can edit: for the first surplus effect of a kept duplicate no
/// approval names yet (reason `duplicate`, SPEC 14), else for the
/// confirmed effect.
fn compensation_form(op: &Operation, approvals: &[Approval]) -> CompensationForm {
    let surplus = duplicates::awaiting(op, approvals).into_iter().next();
    let (effect, reason, op_id) = match surplus {
        Some(effect) => (
            effect.clone(),
            Some(duplicates::SURPLUS_REASON.to_string()),
            format!("{}-undo-{effect}", op.op_id),
        ),
        None => (
            op.confirmed_effect_id.clone().unwrap_or_default(),
            None,
            format!("{}-undo", op.op_id),
        ),
    };
    CompensationForm {
        original_op_id: op.op_id.clone(),
        effect_id: effect.clone(),
        expected_version: op.version,
        reason,
        fields: [
            TextField::new(op_id),
            TextField::new(format!("undo_{}", op.action_kind)),
            TextField::new(
                serde_json::json!({
                    "original_op_id": op.op_id,
                    "undo_effect_id": effect,
                })
                .to_string(),
            ),
        ],
        focus: 0,
        error: None,
    }
}

fn dispatch_pending(op: &Operation) -> Pending {
    let mut lines =
        vec![
            format!(
                "Dispatch {} ({}) now, from version {} ({}).",
                op.op_id, op.action_kind, op.version, op.state
            ),
            String::new(),
            format!(
            "recon first commits {} as unknown (version {}) with a dispatch log row, then runs \
             {}. A receipt confirms it; without one it stays unknown for review. This happens \
             once: a second dispatch is refused as blind_retry.",
            op.op_id,
            op.version + 1,
            if op.receiver == BUILTIN_NAME {
                "the receiver child (recon receiver apply)".to_string()
            } else {
                format!("receiver {}'s adapter (apply), in the background", op.receiver)
            }
        ),
        ];
    if let Some(effect) = &op.compensates_effect_id {
        lines.push(format!(
            "It compensates {effect}; its approval and the original's version are checked \
             again before the receiver runs."
        ));
    }
    Pending {
        title: "dispatch".to_string(),
        lines,
        yes: "dispatch".to_string(),
        job: Job::Dispatch {
            op_id: op.op_id.clone(),
            version: op.version,
            receiver: op.receiver.clone(),
        },
    }
}
