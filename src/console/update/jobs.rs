//! Confirmed mutations carried out: a job runs on one operation or on every
//! mark, and ends in one status line or one report.
//!
//! Each operation in a job is rechecked just before it runs against the
//! version the reviewer saw (the domain's [`policy::recheck`]), and then the
//! library checks every rule again inside its own transaction. A refusal is
//! an outcome of that one operation, not a failure of the job, so a bulk
//! run goes on past it and lists what was recorded and what was refused;
//! storage trouble stops the job. Afterwards the console refreshes, so the
//! report and the screen behind it show the workspace as it is now.
//!
//! A job over many operations (a bulk decision or close, a re-read), or one
//! that asks a registered adapter (a close, a decision's fresh read, a
//! dispatch), is carried out by the same code on a thread of its own (the
//! state's `Background`), since it may take minutes: the reviewer keeps
//! moving meanwhile, the status line shows its `Progress`, the queue's Esc
//! asks it to stop after the operation in hand, and the report comes when
//! it lands (`background` hands it back to [`finish`]), counting what was
//! recorded, refused and not attempted. A job on one operation that asks
//! only the built-in ledger runs in process.

use super::super::app::{
    App, Changed, Done, Job, Mode, Origin, Outcome, Progress, ReadState, Report, Target, Tone,
    Working,
};
use super::live::{changed_after, changed_since_refresh, refresh, Own};
use super::queue::shown;
use super::status::set_status;
use crate::dispatch::DispatchReport;
use crate::domain::policy::{self, Act, LatestRead};
use crate::domain::resolve::Planned;
use crate::domain::Policy;
use crate::domain::{CompensationRequest, Decision, Operation, Verdict};
use crate::error::{Committed, Error, Refusal, Result};
use crate::workspace::{
    Classified, ObserveReport, ObserveRequest, ReconcileRequest, ResolveReport, ResolveRequest,
    Workspace,
};
use std::sync::Arc;

// `Outcome` and `Done` are state (`app.rs`), since a job's result may come
// back through the background's channel; what they say is built here.
impl Outcome {
    fn done(op_id: &str, text: String) -> Outcome {
        Outcome {
            op_id: op_id.to_string(),
            lines: vec![(Tone::Good, text)],
            refusal: None,
        }
    }

    fn refused(op_id: &str, refusal: Refusal) -> Outcome {
        Outcome {
            op_id: op_id.to_string(),
            lines: refusal_lines(op_id, &refusal),
            refusal: Some(refusal),
        }
    }

    /// A refusal is an outcome; storage trouble stops the job.
    fn of<T>(op_id: &str, result: Result<T>, text: impl FnOnce(T) -> String) -> Result<Outcome> {
        match result {
            Ok(value) => Ok(Outcome::done(op_id, text(value))),
            Err(Error::Refused(refusal)) => Ok(Outcome::refused(op_id, refusal)),
            Err(other) => Err(other),
        }
    }
}

impl Done {
    fn of(what: &str, outcomes: Vec<Outcome>) -> Done {
        Done {
            what: what.to_string(),
            outcomes,
            closing: None,
            touched: Vec::new(),
            unmark: true,
            skipped: Vec::new(),
            changed: Vec::new(),
            summary: None,
            // Another handle's commits (a thread's) are outside ones.
            outside: true,
        }
    }
}

/// How many operations a job re-reads per call while it can be cancelled
/// between calls: the facade records each call's reads in one batch.
const REREAD_CHUNK: usize = 16;

/// Carries out a confirmed job, as the reviewer signed it: in process when
/// it is one operation at the built-in ledger; off the key loop, with its
/// progress on screen and the queue's Esc to cancel it, when it acts on
/// many or asks an adapter (its report comes when it lands).
pub(super) fn run_job(app: &mut App, job: Job, since: i64) -> Result<()> {
    let reviewer = app.reviewer.clone().unwrap_or_default();
    let adapters = job.adapters();
    let signed = Signed {
        reviewer: reviewer.clone(),
        since,
    };
    if adapters.is_empty() && !job.is_bulk() {
        let outside = changed_since_refresh(app)?;
        let mut done = carry_out(&mut app.ws, job, &signed, &Progress::new(1))?;
        done.outside = outside;
        return finish(app, done);
    }
    let progress = Arc::new(Progress::new(job.op_ids().len()));
    let working = Working {
        text: working_text(&job, &adapters),
        op_ids: job.op_ids(),
        progress: Arc::clone(&progress),
    };
    app.background.job(progress, move |ws, progress| {
        carry_out(ws, job, &signed, progress)
    })?;
    set_status(
        app,
        Tone::Plain,
        format!("{}; keys keep working, Esc cancels", working.text),
    );
    app.working = Some(working);
    Ok(())
}

/// What a job that asks adapters is doing, in words.
fn working_text(job: &Job, adapters: &[&str]) -> String {
    let receivers = match adapters {
        [] => "the built-in ledger".to_string(),
        _ => format!(
            "receiver{} {}",
            if adapters.len() == 1 { "" } else { "s" },
            adapters.join(", ")
        ),
    };
    let which = |op_ids: Vec<String>| match op_ids.as_slice() {
        [one] => one.clone(),
        many => format!("{} operations", many.len()),
    };
    match job {
        Job::Close { .. } => format!("closing {} at {receivers}…", which(job.op_ids())),
        Job::Decide { decision, .. } => format!(
            "recording {decision} for {} (asking {receivers})…",
            which(job.op_ids())
        ),
        Job::Dispatch { op_id, .. } => format!("dispatching {op_id} to {receivers}…"),
        Job::Observe { .. } => format!("re-reading {} at {receivers}…", which(job.op_ids())),
        Job::Resolve { .. } => format!(
            "resolving {} by policy provable at {receivers}…",
            which(job.op_ids())
        ),
        Job::Approve { .. } => "approving…".to_string(),
        Job::Unmark => "dropping the marks…".to_string(),
        Job::Quit => "quitting…".to_string(),
    }
}

/// Who confirmed a job, and the journal position the dialog was bound to:
/// an operation with a newer entry changed after the dialog opened, and is
/// skipped, never acted on.
struct Signed {
    reviewer: String,
    since: i64,
}

/// Carries out a job on a workspace handle: the console's own, or one of
/// its own on a thread off the key loop.
fn carry_out(ws: &mut Workspace, job: Job, signed: &Signed, progress: &Progress) -> Result<Done> {
    let touched = job.touches();
    let mut done = carry_out_job(ws, job, signed, progress)?;
    done.touched = touched;
    Ok(done)
}

/// What [`carry_out`] does, job by job.
fn carry_out_job(
    ws: &mut Workspace,
    job: Job,
    signed: &Signed,
    progress: &Progress,
) -> Result<Done> {
    let reviewer = signed.reviewer.as_str();
    match job {
        Job::Close { targets } => close_all(ws, &targets, signed, progress),
        Job::Decide {
            decision,
            targets,
            keep,
            ..
        } => decide_all(ws, (decision, keep.as_deref()), &targets, signed, progress),
        Job::Approve {
            original_op_id,
            effect_id,
            expected_version,
            compensation_op_id,
            action_kind,
            payload,
            reason,
        } => {
            let result = ws.approve_compensation(&CompensationRequest {
                reason: reason.as_deref(),
                original_op_id: &original_op_id,
                effect_id: &effect_id,
                approver: reviewer,
                expected_version,
                compensation_op_id: &compensation_op_id,
                action_kind: &action_kind,
                payload: &payload,
            });
            let outcome = Outcome::of(&original_op_id, result, |a| {
                format!(
                    "approved {} for {}; it waits under 2 prepared, where d dispatches it",
                    a.compensation_op_id, a.effect_id
                )
            })?;
            Ok(Done::of("approve compensation", vec![outcome]))
        }
        Job::Dispatch { op_id, version, .. } => dispatch_one(ws, &op_id, version),
        Job::Observe { op_ids, scope, .. } => {
            observe_all(ws, (&op_ids, &scope), reviewer, progress)
        }
        Job::Resolve { list, scope } => resolve_all(ws, (&list, &scope), signed, progress),
        // Dropping marks writes nothing; the dialog does it (`confirm`).
        Job::Unmark => Ok(Done::of("drop the marks", Vec::new())),
        // Quitting writes nothing; the dialog asks the job to stop.
        Job::Quit => Ok(Done::of("quit", Vec::new())),
    }
}

/// What [`each`] did: an outcome per target acted on, the targets skipped
/// because they changed after the dialog opened, and those a cancel left
/// unattempted.
struct Run {
    outcomes: Vec<Outcome>,
    changed: Vec<Changed>,
    skipped: Vec<String>,
}

impl Run {
    /// The job's `Done`, with what was skipped.
    fn done(self, what: &str) -> Done {
        let mut done = Done::of(what, self.outcomes);
        done.changed = self.changed;
        done.skipped = self.skipped;
        done
    }
}

/// Runs `one` on each target in turn, counting on `progress`, until the
/// reviewer cancels: the targets not reached are returned, unattempted.
/// Just before its turn each target is checked against the journal
/// position the dialog was bound to: one that changed after it is skipped
/// and reported, never acted on. Storage trouble stops the job, and says
/// what was recorded before it.
fn each(
    ws: &mut Workspace,
    (targets, since): (&[Target], i64),
    progress: &Progress,
    mut one: impl FnMut(&mut Workspace, &Target) -> Result<Outcome>,
) -> Result<Run> {
    let mut run = Run {
        outcomes: Vec::with_capacity(targets.len()),
        changed: Vec::new(),
        skipped: Vec::new(),
    };
    for (i, t) in targets.iter().enumerate() {
        if progress.cancelled() {
            run.skipped = targets[i..].iter().map(|t| t.op_id.clone()).collect();
            return Ok(run);
        }
        progress.begin(1);
        let outcome = match changed_after(ws, &t.op_id, since) {
            Ok(Some(changed)) => {
                run.changed.push(changed);
                progress.step(1);
                continue;
            }
            Ok(None) => one(ws, t),
            Err(error) => Err(error),
        };
        match outcome {
            Ok(outcome) => run.outcomes.push(outcome),
            Err(error) => return Err(error.after(committed_before(&run.outcomes, targets.len()))),
        }
        count_states(ws, progress);
        progress.step(1);
    }
    Ok(run)
}

/// Reads the state counts for the filter bar after a chunk of a job (one
/// row per state, kept by the store's triggers, so cheap). A read that
/// fails leaves the last counts shown: the job's own next write meets the
/// same trouble and reports it.
fn count_states(ws: &Workspace, progress: &Progress) {
    if let Ok(states) = ws.counts() {
        progress.counted(states);
    }
}

/// What a job had committed when storage trouble stopped it.
fn committed_before(outcomes: &[Outcome], total: usize) -> Committed {
    let recorded = outcomes.iter().filter(|o| o.refusal.is_none()).count();
    let refused = outcomes.len() - recorded;
    Committed {
        sentence: format!(
            "before it, {recorded} of the {total} operations were recorded and {refused} \
             refused; the other {} were not attempted",
            total - outcomes.len()
        ),
        json: serde_json::json!({ "recorded": recorded, "refused": refused }),
    }
}

/// Reads each operation's receiver again and records what it saw as the
/// reviewer's observation (in batches, by the facade); the marks stay.
/// A batch at a time, so that a cancel stops it after the batch in hand.
fn observe_all(
    ws: &mut Workspace,
    (op_ids, scope): (&[String], &str),
    reviewer: &str,
    progress: &Progress,
) -> Result<Done> {
    let mut outcomes = Vec::new();
    let mut skipped = Vec::new();
    for (i, chunk) in op_ids.chunks(REREAD_CHUNK).enumerate() {
        if progress.cancelled() {
            skipped = op_ids[i * REREAD_CHUNK..].to_vec();
            break;
        }
        progress.begin(chunk.len());
        let result = ws.observe(&ObserveRequest {
            op_ids: chunk,
            by: reviewer,
            ..ObserveRequest::default()
        });
        match result {
            Ok(report) => outcomes.extend(reread_outcomes(report, reviewer, outcomes.len())?),
            Err(Error::Refused(refusal)) => {
                let op_id = chunk.first().cloned().unwrap_or_default();
                outcomes.push(Outcome::refused(&op_id, refusal));
            }
            Err(other) => return Err(other.after(committed_before(&outcomes, op_ids.len()))),
        }
        count_states(ws, progress);
        progress.step(chunk.len());
    }
    let recorded = outcomes.iter().filter(|o| o.refusal.is_none()).count();
    let summary = format!(
        "Recorded {recorded} observation{} as {reviewer}'s, each what the receiver showed for \
         one of {scope}; {} could not be read.",
        if recorded == 1 { "" } else { "s" },
        outcomes.len() - recorded
    );
    let mut done = Done::of("re-read", outcomes);
    done.unmark = false;
    done.skipped = skipped;
    done.summary = Some(summary);
    Ok(done)
}

/// How many listed operations a resolve takes per call, so that a cancel
/// stops it after the chunk in hand.
const RESOLVE_CHUNK: usize = 64;

/// Resolves the authorized list by the policy `provable`, a chunk at a
/// time, with the reviewer as who runs it and who authorized the closes.
/// Each decision recorded is an outcome; a refused one too (it stays as
/// it was); what was left, skipped or failed is counted in the summary.
/// The marks stay.
fn resolve_all(
    ws: &mut Workspace,
    (list, scope): (&[Planned], &str),
    signed: &Signed,
    progress: &Progress,
) -> Result<Done> {
    let reviewer = signed.reviewer.as_str();
    let request = ResolveRequest {
        policy: Policy::Provable,
        by: reviewer,
        authorized_by: reviewer,
        older_than: std::time::Duration::from_secs(15 * 60),
        dry_run: false,
        planned: false,
    };
    let mut outcomes = Vec::new();
    let mut skipped = Vec::new();
    let mut changed = Vec::new();
    let mut total = ResolveReport::default();
    for (i, chunk) in list.chunks(RESOLVE_CHUNK).enumerate() {
        if progress.cancelled() {
            skipped = (list[i * RESOLVE_CHUNK..].iter())
                .map(|op| op.op_id.clone())
                .collect();
            break;
        }
        progress.begin(chunk.len());
        // Each chunk is checked against the dialog first: an operation
        // changed since is skipped and reported, never resolved.
        let mut unchanged = Vec::with_capacity(chunk.len());
        for op in chunk {
            match changed_after(ws, &op.op_id, signed.since) {
                Ok(Some(c)) => changed.push(c),
                Ok(None) => unchanged.push(op.clone()),
                Err(e) => return Err(e.after(committed_before(&outcomes, list.len()))),
            }
        }
        let report = ws
            .resolve(&unchanged, &request)
            .map_err(|e| e.after(committed_before(&outcomes, list.len())))?;
        outcomes.extend(resolve_outcomes(&mut total, report));
        count_states(ws, progress);
        progress.step(chunk.len());
    }
    let counts = |map: &std::collections::BTreeMap<String, u64>| -> String {
        let parts: Vec<String> = map.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    };
    let summary = format!(
        "By policy provable, run by {reviewer} over {scope}: recorded {} confirmed and {} \
         not_applied, each on its own closing snapshot; left for people: {}; skipped: {}; \
         failed: {}.",
        total.confirmed,
        total.not_applied,
        counts(&total.left),
        counts(&total.skipped),
        total.failed
    );
    let mut done = Done::of("resolve by policy provable", outcomes);
    done.unmark = false;
    done.skipped = skipped;
    done.changed = changed;
    done.summary = Some(summary);
    Ok(done)
}

/// One chunk's decisions as outcomes (a refused decision as a refusal),
/// its counts added to `total`.
fn resolve_outcomes(total: &mut ResolveReport, report: ResolveReport) -> Vec<Outcome> {
    total.confirmed += report.confirmed;
    total.not_applied += report.not_applied;
    total.failed += report.failed;
    for (map, more) in [
        (&mut total.left, report.left),
        (&mut total.skipped, report.skipped),
    ] {
        for (key, n) in more {
            *map.entry(key).or_default() += n;
        }
    }
    let mut outcomes: Vec<Outcome> = (report.operations.iter())
        .filter(|r| r.outcome == "confirmed" || r.outcome == "not_applied")
        .map(|r| {
            let verdict = r.verdict.map(|v| v.as_str()).unwrap_or_default();
            let text = format!(
                "recorded {} for {} on {verdict}, by policy",
                r.outcome, r.op_id
            );
            Outcome::done(&r.op_id, text)
        })
        .collect();
    for (op_id, error) in report.failures {
        if let Error::Refused(refusal) = error {
            outcomes.push(Outcome::refused(&op_id, refusal));
        }
    }
    outcomes
}

/// What a re-read recorded, one outcome per operation. An operation
/// refused its read is an outcome; one whose receiver gave no usable
/// answer fails the job, saying what the others recorded (the facade read
/// and recorded every other one all the same).
fn reread_outcomes(report: ObserveReport, reviewer: &str, before: usize) -> Result<Vec<Outcome>> {
    let recorded = before + report.observed.len();
    let mut outcomes: Vec<Outcome> = report
        .observed
        .iter()
        .map(|o| {
            Outcome::done(
                &o.op_id,
                format!(
                    "observed {}: {} ({} match{}), recorded as {reviewer}'s",
                    o.op_id,
                    o.verdict,
                    o.matches,
                    if o.matches == 1 { "" } else { "es" }
                ),
            )
        })
        .collect();
    for unread in report.unread {
        match unread.error {
            Error::Refused(refusal) => outcomes.push(Outcome::refused(&unread.op_id, refusal)),
            error => {
                return Err(error.after(Committed {
                    sentence: format!(
                        "{} was not read; {recorded} observation(s) were recorded",
                        unread.op_id
                    ),
                    json: serde_json::json!({ "observations": recorded }),
                }))
            }
        }
    }
    Ok(outcomes)
}

/// After a job, in process or landed: its report, and a single closing
/// snapshot shown as the snapshot on screen.
pub(super) fn finish(app: &mut App, done: Done) -> Result<()> {
    finish_job(app, &done)?;
    if let Some((classified, reviewer)) = done.closing {
        show_closing(app, classified, &reviewer);
    }
    Ok(())
}

/// Closing snapshots, one per target; a single one is then shown as the
/// snapshot on screen.
fn close_all(
    ws: &mut Workspace,
    targets: &[Target],
    signed: &Signed,
    progress: &Progress,
) -> Result<Done> {
    let reviewer = signed.reviewer.as_str();
    let mut closing = None;
    let run = each(ws, (targets, signed.since), progress, |ws, t| {
        let result = close_one(ws, t, reviewer);
        Outcome::of(&t.op_id, result, |classified| {
            let n = classified.snapshot.matches.len();
            let text = format!(
                "closed {} (authorized by {reviewer}): {} ({n} match{})",
                t.op_id,
                classified.verdict,
                if n == 1 { "" } else { "es" }
            );
            closing = Some(classified);
            text
        })
    })?;
    let mut done = run.done("closing snapshot");
    if let (Some(classified), [_]) = (closing, targets) {
        done.closing = Some((classified, reviewer.to_string()));
    }
    Ok(done)
}

/// A single close: the closing snapshot itself replaces the read on
/// screen, labelled so.
fn show_closing(app: &mut App, classified: Classified, reviewer: &str) {
    let origin = Origin::Closing {
        authorized_by: reviewer.to_string(),
    };
    if let Some(detail) = app
        .detail
        .as_mut()
        .filter(|d| d.operation.op_id == classified.operation.op_id)
    {
        detail.read = ReadState::Shown(shown(&detail.operation, classified, origin));
    }
}

/// One closing snapshot, only if the operation is still what the reviewer
/// saw (unknown, at that version), as `Workspace::reconcile` does. A
/// receiver that cannot close is refused by the library before it is
/// asked anything.
fn close_one(ws: &mut Workspace, target: &Target, reviewer: &str) -> Result<Classified> {
    let current = ws.require(&target.op_id)?;
    recheck(ws, Act::Close, &current, target.version)?;
    ws.snapshot(&target.op_id, Some(reviewer))
}

/// Decisions, one per target, each against the version it was seen at.
fn decide_all(
    ws: &mut Workspace,
    (decision, keep): (Decision, Option<&str>),
    targets: &[Target],
    signed: &Signed,
    progress: &Progress,
) -> Result<Done> {
    let reviewer = signed.reviewer.as_str();
    let run = each(ws, (targets, signed.since), progress, |ws, t| {
        let result = ws.reconcile(&ReconcileRequest {
            keep,
            op_id: &t.op_id,
            reviewer,
            decision,
            expected_version: t.version,
            payload: Some(&t.payload),
            close_authorized_by: None,
        });
        let verdict = match &result {
            Err(Error::Refused(Refusal::UnsupportedVerdict { verdict, .. })) => Some(*verdict),
            _ => None,
        };
        let mut outcome = Outcome::of(&t.op_id, result, |recorded| {
            let kept = match keep {
                Some(kept) => format!(
                    " keeping {kept} ({} surplus to compensate: a)",
                    recorded.operation.surplus_effect_ids.len()
                ),
                None => String::new(),
            };
            format!(
                "recorded {decision} for {}{kept} on {}: evidence #{}, now version {}",
                t.op_id, recorded.verdict, recorded.evidence_seq, recorded.operation.version
            )
        })?;
        if let Some(meaning) = verdict.and_then(|v| explanation_at(ws, &t.op_id, v)) {
            outcome.lines.push((Tone::Plain, format!("  {meaning}")));
        }
        Ok(outcome)
    })?;
    Ok(run.done(&format!("record {decision}")))
}

/// What a verdict that refused a decision means for the operation, as the
/// policy says it for its receiver: whether the read was taken after a
/// close, and what the receiver declared. `None` when either cannot be
/// read (the refusal stands on its own).
fn explanation_at(ws: &Workspace, op_id: &str, verdict: Verdict) -> Option<&'static str> {
    let operation = ws.require(op_id).ok()?;
    let receiver = ws.registration_of(&operation).ok()?;
    let read = LatestRead {
        verdict,
        closed: !ws.closes(op_id).ok()?.is_empty(),
    };
    Some(policy::explanation(read, &receiver.describe))
}

/// A dispatch from the version the reviewer saw; the library refuses a
/// blind retry and rechecks a compensation's approval.
fn dispatch_one(ws: &mut Workspace, op_id: &str, version: i64) -> Result<Done> {
    let current = ws.require(op_id)?;
    let result = recheck(ws, Act::Dispatch, &current, version)
        .and_then(|()| ws.dispatch(op_id, Default::default()));
    let outcome = Outcome::of(op_id, result, |report| match &report.effect_id {
        Some(effect) => format!(
            "dispatched {}: receipt for {effect}; now {} at version {}",
            report.op_id, report.state, report.version
        ),
        None => format!(
            "dispatched {}: no receipt ({}); now {} at version {}: take a snapshot",
            report.op_id,
            no_receipt_why(&report),
            report.state,
            report.version
        ),
    })?;
    Ok(Done::of("dispatch", vec![outcome]))
}

/// Why a dispatch brought no receipt: the built-in ledger's exit code, as
/// its drills speak of it, or what the adapter's answer lacked.
fn no_receipt_why(report: &DispatchReport) -> String {
    let exit = report
        .receiver_exit_code
        .map_or("by signal".to_string(), |c| c.to_string());
    match &report.adapter_failure {
        Some(failure) if report.receiver != crate::receiver::BUILTIN_NAME => format!(
            "receiver {}: {}: {}",
            report.receiver,
            failure.kind.as_str(),
            failure.detail
        ),
        _ => format!("receiver exit {exit}"),
    }
}

/// The domain's recheck of an act against the version the reviewer saw; a
/// stale version names who made the latest recorded change.
fn recheck(ws: &Workspace, act: Act, current: &Operation, seen_version: i64) -> Result<()> {
    match policy::recheck(act, current, seen_version) {
        Err(Refusal::StaleVersion {
            expected,
            found,
            state,
            ..
        }) => {
            let changed_by = policy::last_changed_by(&ws.evidence(&current.op_id)?);
            Err(Refusal::StaleVersion {
                expected,
                found,
                state,
                changed_by,
            }
            .into())
        }
        other => Ok(other?),
    }
}

/// A refusal in words, with its code; a stale version also says what the
/// operation is now and who changed it. (What a verdict that refused a
/// decision means depends on the receiver: [`decide_all`] adds it.)
fn refusal_lines(op_id: &str, refusal: &Refusal) -> Vec<(Tone, String)> {
    let mut lines = vec![(
        Tone::Bad,
        format!("refused {op_id}: {}: {refusal}", refusal.code()),
    )];
    if let Refusal::StaleVersion {
        expected,
        found,
        state,
        ..
    } = refusal
    {
        lines.push((
            Tone::Plain,
            format!(
                "  you saw version {expected}; {op_id} is now {state} at version {found}, so \
                 nothing was recorded for it"
            ),
        ));
    }
    lines
}

/// After a job: refresh; one operation done reports in the status line, one
/// refused gets a refusal report, several get a report listing each. The
/// refused ones of a bulk job, and those a cancel left unattempted, stay
/// marked.
fn finish_job(app: &mut App, done: &Done) -> Result<()> {
    let (outcomes, touched) = (&done.outcomes, &done.touched);
    let bulk = outcomes.len() + done.skipped.len() + done.changed.len() > 1;
    if bulk && done.unmark {
        let recorded: std::collections::HashSet<&str> = outcomes
            .iter()
            .filter(|o| o.refusal.is_none())
            .map(|o| o.op_id.as_str())
            .collect();
        app.marks.retain(|id, _| !recorded.contains(id.as_str()));
    }
    let own = Own {
        touched,
        outside: done.outside,
    };
    refresh(app, Origin::Selected, Some(own))?;
    if let ([only], false, [], []) = (
        outcomes.as_slice(),
        bulk,
        done.skipped.as_slice(),
        done.changed.as_slice(),
    ) {
        if only.refusal.is_none() {
            let text = only
                .lines
                .first()
                .map(|(_, t)| t.clone())
                .unwrap_or_default();
            set_status(app, Tone::Good, text);
            return Ok(());
        }
    }
    let (tone, report) = job_report(done, bulk);
    set_status(app, tone, report.title.clone());
    app.mode = Mode::Report(report);
    Ok(())
}

/// The report of a job with a refusal in it, of a bulk job, or of a
/// cancelled one: a summary that counts what was written and what was
/// not, each operation's lines, and what the reviewer should know next.
fn job_report(done: &Done, bulk: bool) -> (Tone, Report) {
    let (what, outcomes, skipped) = (&done.what, &done.outcomes, &done.skipped);
    let refused: Vec<&Outcome> = outcomes.iter().filter(|o| o.refusal.is_some()).collect();
    let recorded = outcomes.len() - refused.len();
    let stale = refused
        .iter()
        .any(|o| matches!(o.refusal, Some(Refusal::StaleVersion { .. })));
    let mut lines = Vec::new();
    if bulk {
        lines.extend(bulk_summary(done, refused.len()));
    }
    lines.extend(changed_lines(&done.changed));
    for outcome in outcomes {
        lines.extend(outcome.lines.iter().cloned());
    }
    lines.push((Tone::Plain, String::new()));
    lines.push((
        Tone::Plain,
        match (stale, bulk && !(refused.is_empty() && skipped.is_empty())) {
            (true, _) => "The console has refreshed and shows the workspace as it is now (an \
                          operation that changed since it was marked loses its mark); look at \
                          the evidence again before deciding."
                .to_string(),
            (false, true) if done.unmark && skipped.is_empty() => {
                "The refused operations stay marked and unchanged.".to_string()
            }
            (false, true) if done.unmark => {
                "The refused and unattempted operations stay marked and unchanged.".to_string()
            }
            (false, true) => "The marks stay.".to_string(),
            (false, false) if refused.is_empty() && recorded > 0 => String::new(),
            (false, false) => "Nothing was written.".to_string(),
        },
    ));
    let cancelled = if skipped.is_empty() {
        String::new()
    } else {
        format!(", {} not attempted (cancelled)", skipped.len())
    };
    let changed = match done.changed.len() {
        0 => String::new(),
        n => format!(", {n} skipped (changed since the dialog)"),
    };
    let title = if bulk {
        format!(
            "bulk {what}: {recorded} recorded, {} refused{changed}{cancelled}",
            refused.len()
        )
    } else if let Some(first) = done.changed.first() {
        format!("{what} closed, nothing written: {}", first.short())
    } else if !skipped.is_empty() {
        format!("{what} cancelled: nothing was written")
    } else {
        let code = refused
            .first()
            .and_then(|o| o.refusal.as_ref())
            .map_or("", Refusal::code);
        format!("{what} refused: {code}")
    };
    let tone = match (
        refused.is_empty(),
        skipped.is_empty() && done.changed.is_empty(),
    ) {
        (true, true) => Tone::Good,
        (true, false) => Tone::Warn,
        (false, _) => Tone::Bad,
    };
    let report = Report {
        title,
        lines,
        scroll: 0,
    };
    (tone, report)
}

/// The operations a job skipped because they changed after its dialog
/// opened: what changed and who changed it, the first few by name.
fn changed_lines(changed: &[Changed]) -> Vec<(Tone, String)> {
    if changed.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![(
        Tone::Warn,
        format!(
            "Skipped {} operation{} that changed after the dialog opened: nothing was written \
             for {}:",
            changed.len(),
            if changed.len() == 1 { "" } else { "s" },
            if changed.len() == 1 { "it" } else { "them" }
        ),
    )];
    lines.extend((changed.iter().take(12)).map(|c| (Tone::Plain, format!("  {}", c.describe()))));
    if changed.len() > 12 {
        lines.push((Tone::Plain, format!("  … and {} more", changed.len() - 12)));
    }
    lines
}

/// The first lines of a bulk report: what was written, what was refused
/// (by code) and what a cancel left unattempted, in whole sentences.
fn bulk_summary(done: &Done, refused: usize) -> Vec<(Tone, String)> {
    let (outcomes, skipped) = (&done.outcomes, &done.skipped);
    let recorded = outcomes.len() - refused;
    let total = outcomes.len() + skipped.len() + done.changed.len();
    let mut lines = vec![(
        Tone::Plain,
        match &done.summary {
            Some(summary) => summary.clone(),
            None => format!(
                "{recorded} recorded, {refused} refused, of {total} marked operations; each was \
                 checked against its own version and verdict."
            ),
        },
    )];
    if !skipped.is_empty() {
        lines.push((
            Tone::Warn,
            format!(
                "Cancelled after {} of {total}: the {} not attempted were left unchanged, \
                 nothing was written for them; the {recorded} recorded stay recorded.",
                total - skipped.len(),
                skipped.len()
            ),
        ));
    }
    if refused > 0 {
        let mut codes: std::collections::BTreeMap<&str, usize> = Default::default();
        for o in outcomes {
            if let Some(r) = &o.refusal {
                *codes.entry(r.code()).or_default() += 1;
            }
        }
        let codes: Vec<String> = codes.iter().map(|(c, n)| format!("{c} {n}")).collect();
        lines.push((Tone::Bad, format!("refused by code: {}", codes.join(", "))));
    }
    lines.push((Tone::Plain, String::new()));
    lines
}
