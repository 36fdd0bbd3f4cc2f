//! The read-only commands: `ops`, `show` and `ledger`.
//!
//! Shaped like the flow commands (validated arguments with `run`, a result
//! with its text and `--json`), but nothing here writes: each opens the
//! workspace, makes one facade read, and hands the rows to the renderer.
//! The lists are rendered as they were read, one line per row, through the
//! buffered output, so a long ledger piped into `head` ends quietly.

use super::open::{open, Place};
use super::render::{observation_line, payload_line};
use super::{Failure, Out, Render};
use crate::cli::{
    identifier, receiver_name, EscalatedArg, LedgerArgs, OpsArgs, ShowArgs, StateFilterArg,
};
use crate::domain::duplicates::SurplusEffect;
use crate::domain::origin::Origin;
use crate::domain::sanitize::escape;
use crate::domain::time::age_text;
use crate::domain::{
    Acknowledgement, Approval, CallFailure, CloseEntry, Cursor, Effect, EscalationRecord,
    EvidenceRecord, FailureKind, Note, Observation, OpState, Operation, OpsQuery, QueueFilter,
    SortOrder, Timestamp, VerdictFilter,
};
use crate::workspace::{Location, OpDetail};
use serde::Serialize;
use std::time::Duration;
use unicode_width::UnicodeWidthStr;

/// `recon ops`: one page of operations under a filter and an order.
pub struct Ops {
    location: Location,
    filter: OwnedFilter,
    sort: SortOrder,
    after: Option<Cursor>,
    limit: usize,
}

/// The filters of `ops`, held until the workspace's clock turns
/// `--older-than` into an instant.
struct OwnedFilter {
    state: Option<OpState>,
    verdict: Option<VerdictFilter>,
    escalated: Option<bool>,
    contradicted: Option<bool>,
    surplus: Option<bool>,
    older_than: Option<Duration>,
    receiver: Option<String>,
}

impl Ops {
    pub fn validate(args: OpsArgs, place: Place) -> Result<Self, Failure> {
        let sort = SortOrder::from(args.sort);
        let after = args
            .after
            .as_deref()
            .map(|text| {
                Cursor::parse(text, sort).map_err(|why| Failure::Usage(format!("--after {why}")))
            })
            .transpose()?;
        Ok(Ops {
            location: place.required()?,
            filter: OwnedFilter {
                state: args.state.and_then(StateFilterArg::state),
                verdict: args.verdict.map(|v| v.0),
                escalated: args.escalated.map(EscalatedArg::wanted),
                contradicted: args.contradicted.map(EscalatedArg::wanted),
                surplus: args.surplus.map(EscalatedArg::wanted),
                older_than: args.older_than,
                receiver: args
                    .receiver
                    .as_deref()
                    .map(|name| receiver_name(name).map(str::to_string))
                    .transpose()?,
            },
            sort,
            after,
            limit: args.limit.unwrap_or(usize::MAX),
        })
    }

    pub fn run(self) -> Result<OpsPage, Failure> {
        let ws = open(&self.location, false)?;
        let now = ws.now();
        let query = OpsQuery {
            filter: QueueFilter {
                state: self.filter.state,
                verdict: self.filter.verdict,
                escalated: self.filter.escalated,
                contradicted: self.filter.contradicted,
                updated_before: self.filter.older_than.map(|age| now.minus(age)),
                receiver: self.filter.receiver.as_deref(),
                search: None,
                surplus: self.filter.surplus,
            },
            sort: self.sort,
            after: self.after,
            limit: self.limit,
        };
        let ops = ws.ops_page(&query)?;
        Ok(OpsPage {
            rows: ops
                .into_iter()
                .map(|operation| Listed {
                    cursor: Cursor::of(&operation, self.sort).encode(),
                    operation,
                })
                .collect(),
            now,
        })
    }
}

/// An operation as `ops --json` lists it: with the cursor that continues
/// the listing after it.
#[derive(Serialize)]
struct Listed {
    #[serde(flatten)]
    operation: Operation,
    cursor: String,
}

pub struct OpsPage {
    rows: Vec<Listed>,
    now: Timestamp,
}

/// The columns of `ops` text: the age (aligned right) and the last, which
/// is not padded.
const AGE: usize = 5;
const LAST: usize = 6;

impl OpsPage {
    /// One row's cells, as shown: op id, state, version, kind, action, age,
    /// and what was last seen (the last cell is not padded).
    fn cells(&self, op: &Operation) -> [String; 7] {
        let seen = op.triage.latest_observation.as_ref().map_or_else(
            || "never observed".to_string(),
            |o| {
                format!(
                    "{} {} ago",
                    o.verdict,
                    age_text(self.now.since(o.observed_at))
                )
            },
        );
        let escalated = match (&op.triage.escalated, &op.triage.contradicted) {
            (Some(_), Some(_)) => " ESCALATED CONTRADICTED",
            (Some(_), None) => " ESCALATED",
            (None, Some(_)) => " CONTRADICTED",
            (None, None) => "",
        };
        [
            escape(&op.op_id).into_owned(),
            op.state.to_string(),
            format!("v{}", op.version),
            op.kind.to_string(),
            escape(&op.action_kind).into_owned(),
            age_text(self.now.since(op.triage.updated_at)),
            format!("{seen}{escalated}"),
        ]
    }
}

impl Render for OpsPage {
    /// One line per operation, its columns padded to the widest cell of
    /// the page as a terminal shows it (an escaped id, a wide character),
    /// so the page reads as a table; the age is aligned right.
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let rows: Vec<[String; 7]> = self.rows.iter().map(|l| self.cells(&l.operation)).collect();
        let mut widths = [0usize; 7];
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.width());
            }
        }
        for row in &rows {
            let padded: Vec<String> = (row.iter().zip(widths).enumerate())
                .map(|(column, (cell, width))| {
                    let gap = " ".repeat(width - cell.width());
                    match column {
                        AGE => format!("{gap}{cell}"),
                        LAST => cell.clone(),
                        _ => format!("{cell}{gap}"),
                    }
                })
                .collect();
            out.line(padded.join(" "))?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.rows)
    }
}

/// `recon show`: one operation with its evidence and approvals.
pub struct Show {
    location: Location,
    op_id: String,
}

impl Show {
    pub fn validate(args: ShowArgs, place: Place) -> Result<Self, Failure> {
        identifier("op id", &args.op_id)?;
        Ok(Show {
            location: place.required()?,
            op_id: args.op_id,
        })
    }

    pub fn run(self) -> Result<Shown, Failure> {
        let ws = open(&self.location, false)?;
        Ok(Shown(ws.show(&self.op_id)?))
    }
}

pub struct Shown(OpDetail);

/// A name as typed, with the authenticated role the entry records beside
/// it (team mode) when it has one: `ann (role ann_ops)`. Both escaped.
fn named(name: &str, role: Option<&String>) -> String {
    match role {
        Some(role) => format!("{} (role {})", escape(name), escape(role)),
        None => escape(name).into_owned(),
    }
}

/// A record of `show --json` with `"role"` after its own fields: the
/// authenticated role its journal entry records (team mode), or null.
#[derive(Serialize)]
struct WithRole<'a, T> {
    #[serde(flatten)]
    record: &'a T,
    role: Option<&'a String>,
}

/// `show --json`: the detail's lists in its order, each act of a person
/// with its role.
#[derive(Serialize)]
struct ShownJson<'a> {
    operation: &'a Operation,
    evidence: Vec<WithRole<'a, EvidenceRecord>>,
    approvals: Vec<WithRole<'a, Approval>>,
    observations: Vec<WithRole<'a, Observation>>,
    notes: Vec<WithRole<'a, Note>>,
    closes: Vec<WithRole<'a, CloseEntry>>,
    escalations: Vec<WithRole<'a, EscalationRecord>>,
    acknowledgements: Vec<WithRole<'a, Acknowledgement>>,
    failures: &'a [CallFailure],
    /// The MCP key and client (SPEC 13); absent for a command's operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<&'a Origin>,
    /// Each surplus effect of a kept duplicate and its compensation (SPEC 14).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    surplus: &'a [SurplusEffect],
}

impl Shown {
    /// The role the entry `seq` records, if any.
    fn role(&self, seq: i64) -> Option<&String> {
        self.0.roles.get(&seq)
    }

    /// A list's records, each with the role of its journal entry `seq`.
    fn with_roles<'a, T>(
        &'a self,
        records: &'a [T],
        seq: impl Fn(&T) -> i64,
    ) -> Vec<WithRole<'a, T>> {
        (records.iter())
            .map(|record| WithRole {
                record,
                role: self.role(seq(record)),
            })
            .collect()
    }

    fn operation_lines(&self, out: &mut Out) -> Result<(), Failure> {
        let op = &self.0.operation;
        out.line(format!(
            "{} ({} {}) {} at version {}",
            escape(&op.op_id),
            op.kind,
            escape(&op.action_kind),
            op.state,
            op.version
        ))?;
        out.line(format!("payload: {}", payload_line(&op.payload)))?;
        if let Some(origin) = &self.0.origin {
            out.line(origin_line(origin))?;
        }
        if let Some(effect) = &op.compensates_effect_id {
            out.line(format!("compensates: {}", escape(effect)))?;
        }
        if let Some(effect) = &op.confirmed_effect_id {
            out.line(format!("confirmed effect: {}", escape(effect)))?;
        }
        for s in &self.0.surplus {
            let compensation = match (&s.compensation_op_id, s.compensation_state) {
                (Some(id), Some(state)) => format!("compensated by {} ({state})", escape(id)),
                _ => "awaiting compensation (approve-compensation --reason duplicate)".into(),
            };
            out.line(format!(
                "surplus effect: {} {compensation}",
                escape(&s.effect_id)
            ))?;
        }
        let t = &op.triage;
        let dispatched = t
            .last_dispatched_at
            .map(|at| match t.dispatch_count {
                1 => format!(", dispatched once at {at}"),
                n => format!(", dispatched {n} times, last at {at}"),
            })
            .unwrap_or_default();
        out.line(format!(
            "created at {}, updated at {}{dispatched}",
            t.created_at, t.updated_at
        ))?;
        if let Some(e) = &t.escalated {
            out.line(format!(
                "ESCALATED by {} at {}: {}",
                escape(&e.by),
                e.at,
                escape(&e.reason)
            ))?;
        }
        Ok(())
    }

    /// The history of triage: observations, closes, notes, escalations.
    fn triage_lines(&self, out: &mut Out) -> Result<(), Failure> {
        let detail = &self.0;
        for o in &detail.observations {
            out.line(format!(
                "observation #{} at {} by {}: {}",
                o.seq,
                o.seen.observed_at,
                named(&o.seen.observed_by, self.role(o.seq)),
                observation_line(&o.seen)
            ))?;
        }
        for c in &detail.closes {
            out.line(format!(
                "closed at {} at receiver {}, authorized by {}",
                c.closed_at,
                escape(&c.receiver),
                named(&c.authorized_by, self.role(c.seq))
            ))?;
        }
        for n in &detail.notes {
            out.line(format!(
                "note #{} at {} by {}: {}",
                n.seq,
                n.at,
                named(&n.by, self.role(n.seq)),
                escape(&n.text)
            ))?;
        }
        for e in &detail.escalations {
            out.line(format!(
                "{} #{} at {} by {}: {}",
                e.action.as_str(),
                e.seq,
                e.at,
                named(&e.by, self.role(e.seq)),
                escape(&e.reason)
            ))?;
        }
        Ok(())
    }
}

/// A failed call's exit, in words: a program in a session answers and
/// keeps running, so an answer it gave (`ok: false`, garbage) has no exit.
fn exit_said(kind: FailureKind, code: Option<i32>) -> String {
    match (code, kind) {
        (Some(code), _) => code.to_string(),
        (None, FailureKind::SpawnFailed) => "none (never ran)".to_string(),
        (None, FailureKind::Timeout) => "none (killed)".to_string(),
        (None, FailureKind::Crash) => "none (killed or never ran)".to_string(),
        (None, _) => "none (it answered and kept running, in a session)".to_string(),
    }
}

impl Render for Shown {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        self.operation_lines(out)?;
        for f in &self.0.failures {
            out.line(format!(
                "failed {} #{} at {} ({}): {}: {}; exit {}",
                f.verb,
                f.seq,
                f.at,
                escape(&f.receiver),
                f.kind.as_str(),
                escape(&f.detail),
                exit_said(f.kind, f.exit_code)
            ))?;
            // Every line kept (up to 4 KiB, as JSON has it), not only the
            // last: a traceback's cause is rarely its last line.
            let said = f
                .stderr
                .lines()
                .map(str::trim_end)
                .filter(|l| !l.trim().is_empty());
            for (i, line) in said.enumerate() {
                let lead = if i == 0 { "  stderr: " } else { "          " };
                out.line(format!("{lead}{}", escape(line)))?;
            }
        }
        for e in &self.0.evidence {
            // A policy's decision says so: the policy decided, the reviewer
            // named is who ran it.
            let source = match e.policy {
                Some(policy) => format!("policy {policy}"),
                None => e.source.to_string(),
            };
            out.line(format!(
                "evidence #{}: {} by {} -> {} (verdict {}), v{} -> v{}",
                e.seq,
                source,
                named(
                    e.reviewer.as_deref().unwrap_or("the receiver"),
                    self.role(e.journal_seq)
                ),
                e.decision,
                e.verdict.map_or("none", |v| v.as_str()),
                e.from_version,
                e.to_version
            ))?;
        }
        let approval_roles = (self.0.approval_roles.iter()).chain(std::iter::repeat(&None));
        for (a, role) in self.0.approvals.iter().zip(approval_roles) {
            out.line(format!(
                "approval: {} compensates {} of {} (approved by {} at v{})",
                escape(&a.compensation_op_id),
                escape(&a.effect_id),
                escape(&a.original_op_id),
                named(&a.approver, role.as_ref()),
                a.approved_version
            ))?;
        }
        self.triage_lines(out)
    }

    /// The detail as stored, each act of a person with `"role"` beside
    /// its name. Every field is named, so a field the detail gains is a
    /// compile error here until it is shown.
    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        let OpDetail {
            operation,
            evidence,
            approvals,
            observations,
            notes,
            closes,
            escalations,
            acknowledgements,
            failures,
            roles: _,
            approval_roles,
            origin,
            surplus,
        } = &self.0;
        let approval_roles =
            (approval_roles.iter().map(Option::as_ref)).chain(std::iter::repeat(None));
        out.json(&ShownJson {
            operation,
            evidence: self.with_roles(evidence, |e| e.journal_seq),
            approvals: (approvals.iter().zip(approval_roles))
                .map(|(record, role)| WithRole { record, role })
                .collect(),
            observations: self.with_roles(observations, |o| o.seq),
            notes: self.with_roles(notes, |n| n.seq),
            closes: self.with_roles(closes, |c| c.seq),
            escalations: self.with_roles(escalations, |e| e.seq),
            acknowledgements: self.with_roles(acknowledgements, |a| a.seq),
            failures,
            origin: origin.as_ref(),
            surplus,
        })
    }
}

/// `recon ledger`: the receiver's effects in write order.
pub struct Ledger {
    location: Location,
    op_id: Option<String>,
}

impl Ledger {
    pub fn validate(args: LedgerArgs, place: Place) -> Result<Self, Failure> {
        if let Some(op_id) = &args.op_id {
            identifier("op id", op_id)?;
        }
        Ok(Ledger {
            location: Location::Workspace(place.required_directory("ledger")?),
            op_id: args.op_id,
        })
    }

    /// The built-in ledger's effects, and a note when the receivers that
    /// matter here are adapters, whose effects this command cannot list.
    pub fn run(self) -> Result<Effects, Failure> {
        let ws = open(&self.location, false)?;
        let effects = ws.ledger(self.op_id.as_deref())?;
        let note = match self.op_id.as_deref() {
            Some(op_id) => ws
                .operation(op_id)?
                .and_then(|op| ws.registration_of(&op).ok())
                .filter(|r| !r.builtin)
                .map(|r| {
                    format!(
                        "operation {} routes to receiver {}, an adapter: its effects are in \
                         that receiver's own store, not in recon's ledger; `recon snapshot {}` \
                         reads them (or use the tool behind the adapter)",
                        escape(op_id),
                        escape(&r.name),
                        escape(op_id)
                    )
                }),
            None => {
                let adapters: Vec<String> = (ws.receivers()?.into_iter())
                    .filter(|r| !r.builtin)
                    .map(|r| escape(&r.name).into_owned())
                    .collect();
                let whose = match adapters.as_slice() {
                    [] => None,
                    [one] => Some(format!(
                        "receiver {one}, an adapter that keeps them in its own store"
                    )),
                    many => Some(format!(
                        "receivers {}, adapters that keep them in their own stores",
                        many.join(", ")
                    )),
                };
                whose.map(|whose| {
                    format!(
                        "not listed here: the effects of {whose}; `recon snapshot ID` reads an \
                         operation's (or use the tool behind the adapter)"
                    )
                })
            }
        };
        Ok(Effects { effects, note })
    }
}

/// The built-in ledger's effects, and why some effects are not among
/// them.
pub struct Effects {
    effects: Vec<Effect>,
    note: Option<String>,
}

impl Render for Effects {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        for e in &self.effects {
            let compensates = e
                .compensates_effect_id
                .as_deref()
                .map(|c| format!(" (compensates {})", escape(c)))
                .unwrap_or_default();
            out.line(format!(
                "{} {} {}{compensates} {}",
                escape(&e.effect_id),
                escape(&e.op_id),
                escape(&e.action_kind),
                payload_line(&e.payload)
            ))?;
        }
        self.note_line(out)
    }

    /// The list stays exactly the ledger's effects (SPEC 6); the note goes
    /// to stderr beside it.
    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.effects)?;
        self.note_line(out)
    }
}

impl Effects {
    /// The note, on stderr, so that the listing on stdout stays a list;
    /// after the listing, which is flushed first.
    fn note_line(&self, out: &mut Out) -> Result<(), Failure> {
        if let Some(note) = &self.note {
            out.flush()?;
            out.stderr_line(&format!("note: {note}"));
        }
        Ok(())
    }
}

/// How `show` names an operation that came through MCP: its key and the
/// client's name, each escaped (both are the agent's text).
fn origin_line(origin: &Origin) -> String {
    let client = (origin.client.as_deref()).map_or("no name given".into(), escape);
    format!(
        "via {}: key {}, client {client}",
        escape(&origin.door),
        escape(&origin.key)
    )
}

#[cfg(test)]
mod tests {
    use super::named;

    #[test]
    fn a_role_beside_a_name_is_escaped_as_the_name_is() {
        let role = "rita\u{1b}[2J".to_string();
        assert_eq!(named("Rita Q", Some(&role)), "Rita Q (role rita\\x1b[2J)");
        assert_eq!(named("Rita\u{7}", None), "Rita\\x07");
    }
}
