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

use super::super::app::{App, Job, Mode, Origin, Report, Target, Tone};
use super::queue::{refresh, shown};
use super::{set_status, Result};
use crate::domain::policy::{self, Act};
use crate::domain::{CompensationRequest, Decision, Operation};
use crate::error::{Error, Refusal};
use crate::workspace::{Classified, ReconcileRequest};

/// What a job did to one operation.
struct Outcome {
    op_id: String,
    lines: Vec<(Tone, String)>,
    refusal: Option<Refusal>,
}

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

/// Carries out a confirmed job, as the reviewer signed it.
pub(super) fn run_job(app: &mut App, job: Job) -> Result<()> {
    let reviewer = app.reviewer.clone().unwrap_or_default();
    match job {
        Job::Close { targets } => run_close(app, &targets, &reviewer),
        Job::Decide {
            decision, targets, ..
        } => run_decide(app, decision, &targets, &reviewer),
        Job::Approve {
            original_op_id,
            effect_id,
            expected_version,
            compensation_op_id,
            action_kind,
            payload,
        } => {
            let result = app.ws.approve_compensation(&CompensationRequest {
                original_op_id: &original_op_id,
                effect_id: &effect_id,
                approver: &reviewer,
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
            finish_job(app, "approve compensation", vec![outcome])
        }
        Job::Dispatch { op_id, version } => run_dispatch(app, &op_id, version),
    }
}

/// Closing snapshots, one per target; a single one is then shown as the
/// snapshot on screen.
fn run_close(app: &mut App, targets: &[Target], reviewer: &str) -> Result<()> {
    let mut outcomes = Vec::new();
    let mut closing = None;
    for t in targets {
        let result = close_one(app, t, reviewer);
        outcomes.push(Outcome::of(&t.op_id, result, |classified| {
            let n = classified.snapshot.matches.len();
            let text = format!(
                "closed {} (authorized by {reviewer}): {} ({n} match{})",
                t.op_id,
                classified.verdict,
                if n == 1 { "" } else { "es" }
            );
            closing = Some(classified);
            text
        })?);
    }
    finish_job(app, "closing snapshot", outcomes)?;
    if let (Some(classified), [_]) = (closing, targets) {
        show_closing(app, classified, reviewer);
    }
    Ok(())
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
        detail.snapshot = shown(&detail.operation, classified, origin);
    }
}

/// One closing snapshot, only if the operation is still what the reviewer
/// saw (unknown, at that version), as `Workspace::reconcile` does.
fn close_one(app: &mut App, target: &Target, reviewer: &str) -> Result<Classified> {
    let current = app.ws.require(&target.op_id)?;
    recheck(app, Act::Close, &current, target.version)?;
    app.ws.snapshot(&target.op_id, Some(reviewer))
}

/// Decisions, one per target, each against the version it was seen at.
fn run_decide(app: &mut App, decision: Decision, targets: &[Target], reviewer: &str) -> Result<()> {
    let mut outcomes = Vec::new();
    for t in targets {
        let result = app.ws.reconcile(&ReconcileRequest {
            op_id: &t.op_id,
            reviewer,
            decision,
            expected_version: t.version,
            payload: Some(&t.payload),
            close_authorized_by: None,
        });
        outcomes.push(Outcome::of(&t.op_id, result, |recorded| {
            format!(
                "recorded {decision} for {} on {}: evidence #{}, now version {}",
                t.op_id, recorded.verdict, recorded.evidence_seq, recorded.operation.version
            )
        })?);
    }
    finish_job(app, &format!("record {decision}"), outcomes)
}

/// A dispatch from the version the reviewer saw; the library refuses a
/// blind retry and rechecks a compensation's approval.
fn run_dispatch(app: &mut App, op_id: &str, version: i64) -> Result<()> {
    let current = app.ws.require(op_id)?;
    let result = recheck(app, Act::Dispatch, &current, version)
        .and_then(|()| app.ws.dispatch(op_id, Default::default()));
    let outcome = Outcome::of(op_id, result, |report| match &report.effect_id {
        Some(effect) => format!(
            "dispatched {}: receipt for {effect}; now {} at version {}",
            report.op_id, report.state, report.version
        ),
        None => format!(
            "dispatched {}: no receipt (receiver exit {}); now {} at version {}: take \
             a snapshot",
            report.op_id,
            report
                .receiver_exit_code
                .map_or("by signal".to_string(), |c| c.to_string()),
            report.state,
            report.version
        ),
    })?;
    finish_job(app, "dispatch", vec![outcome])
}

/// The domain's recheck of an act against the version the reviewer saw; a
/// stale version names who made the latest recorded change.
fn recheck(app: &App, act: Act, current: &Operation, seen_version: i64) -> Result<()> {
    match policy::recheck(act, current, seen_version) {
        Err(Refusal::StaleVersion {
            expected,
            found,
            state,
            ..
        }) => {
            let changed_by = policy::last_changed_by(&app.ws.evidence(&current.op_id)?);
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
/// operation is now and who changed it.
fn refusal_lines(op_id: &str, refusal: &Refusal) -> Vec<(Tone, String)> {
    let mut lines = vec![(
        Tone::Bad,
        format!("refused {op_id}: {}: {refusal}", refusal.code()),
    )];
    match refusal {
        Refusal::StaleVersion {
            expected,
            found,
            state,
            ..
        } => lines.push((
            Tone::Plain,
            format!(
                "  you saw version {expected}; {op_id} is now {state} at version {found}, so \
                 nothing was recorded for it"
            ),
        )),
        Refusal::UnsupportedVerdict { verdict, .. } => {
            lines.push((Tone::Plain, format!("  {}", verdict.explanation())))
        }
        _ => {}
    }
    lines
}

/// After a job: refresh; one operation done reports in the status line, one
/// refused gets a refusal report, several get a report listing each. The
/// refused ones of a bulk job stay marked.
fn finish_job(app: &mut App, what: &str, outcomes: Vec<Outcome>) -> Result<()> {
    let bulk = outcomes.len() > 1;
    if bulk {
        app.marks.retain(|id, _| {
            outcomes
                .iter()
                .any(|o| o.refusal.is_some() && &o.op_id == id)
        });
    }
    refresh(app, Origin::Selected)?;
    if let ([only], false) = (outcomes.as_slice(), bulk) {
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
    let (tone, report) = job_report(what, &outcomes);
    set_status(app, tone, report.title.clone());
    app.mode = Mode::Report(report);
    Ok(())
}

/// The report of a job with a refusal in it, or of a bulk job: a summary
/// for a bulk job, each operation's lines, and what the reviewer should
/// know next.
fn job_report(what: &str, outcomes: &[Outcome]) -> (Tone, Report) {
    let refused: Vec<&Outcome> = outcomes.iter().filter(|o| o.refusal.is_some()).collect();
    let done = outcomes.len() - refused.len();
    let stale = refused
        .iter()
        .any(|o| matches!(o.refusal, Some(Refusal::StaleVersion { .. })));
    let bulk = outcomes.len() > 1;
    let mut lines = Vec::new();
    if bulk {
        lines.push((
            Tone::Plain,
            format!(
                "{done} recorded, {} refused, of {} marked operations; each was checked \
                 against its own version and verdict.",
                refused.len(),
                outcomes.len()
            ),
        ));
        lines.push((Tone::Plain, String::new()));
    }
    for outcome in outcomes {
        lines.extend(outcome.lines.iter().cloned());
    }
    lines.push((Tone::Plain, String::new()));
    lines.push((
        Tone::Plain,
        match (stale, bulk && !refused.is_empty()) {
            (true, _) => "The console has refreshed and shows the workspace as it is now; look \
                          at the evidence again before deciding."
                .to_string(),
            (false, true) => "The refused operations stay marked and unchanged.".to_string(),
            (false, false) if refused.is_empty() => String::new(),
            (false, false) => "Nothing was written.".to_string(),
        },
    ));
    let title = if bulk {
        format!("bulk {what}: {done} recorded, {} refused", refused.len())
    } else {
        let code = refused
            .first()
            .and_then(|o| o.refusal.as_ref())
            .map_or("", Refusal::code);
        format!("{what} refused: {code}")
    };
    let tone = if refused.is_empty() {
        Tone::Good
    } else {
        Tone::Bad
    };
    let report = Report {
        title,
        lines,
        scroll: 0,
    };
    (tone, report)
}
