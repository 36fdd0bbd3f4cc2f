//! `recon metrics` (SPEC 15): the outbox's counts as the Prometheus text
//! exposition (format 0.0.4), on stdout or written whole to a file for a
//! node exporter's textfile collector; `--json` gives the same families as
//! one JSON document.
//!
//! The exposition is written here, by hand, rather than through the
//! `prometheus-client` crate. That crate is built for a long-lived process
//! that registers metrics once and updates them in place (atomics behind
//! each series, a registry, label sets as derived types); here every value
//! comes from one query and is printed once, so its registry would be
//! filled only to be serialized, and dynamic labels (receiver names) would
//! need its `Family` of string pairs. It writes OpenMetrics only, naming a
//! counter's family without `_total` (`# TYPE recon_failed_calls
//! counter`), where SPEC 15 names the families as the 0.0.4 format that a
//! node exporter's textfile collector parses (`recon_failed_calls_total`),
//! and it brings a proc-macro crate and its own dependencies into a build
//! that two cores share. What it would have guarded (the escaping of label
//! values and help text, and the line grammar) is a few lines below, and
//! the tests read the output with an independent parser (Python's
//! `prometheus_client`).

use super::open::{open_journal, Place};
use super::output::{cannot_write, write_file_with};
use super::{Failure, Out, Render};
use crate::cli::MetricsArgs;
use crate::domain::metrics::OutboxTally;
use crate::domain::{Decision, EvidenceSource, OpState, Timestamp};
use crate::faults::{crash_point, CrashPoint};
use crate::workspace::Location;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// `recon metrics`: read the outbox's counts, print or write them.
pub struct Metrics {
    location: Location,
    output: Option<PathBuf>,
}

impl Metrics {
    pub fn validate(args: MetricsArgs, place: Place) -> Result<Self, Failure> {
        Ok(Metrics {
            location: place.required()?,
            output: args.output,
        })
    }

    pub fn run(self) -> Result<Exposition, Failure> {
        let journal = open_journal(&self.location)?;
        let tally = journal.tally()?;
        let families = families(&tally, journal.now());
        if let Some(path) = &self.output {
            let text = exposition(&families);
            write_file_with(path, |w| {
                // A kill here leaves half of the text in the temporary
                // file and the target as it was: the drill's boundary.
                let (first, rest) = text.split_at(text.len() / 2);
                let fail = |e: std::io::Error| cannot_write(path, &e);
                w.write_all(first.as_bytes()).map_err(fail)?;
                w.flush().map_err(fail)?;
                crash_point(CrashPoint::MetricsMidWrite);
                w.write_all(rest.as_bytes()).map_err(fail)
            })?;
        }
        Ok(Exposition {
            families,
            written: self.output.is_some(),
        })
    }
}

/// The families, printed unless they were written to a file.
pub struct Exposition {
    families: Vec<Family>,
    written: bool,
}

impl Render for Exposition {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        if self.written {
            return Ok(());
        }
        out.text(&exposition(&self.families))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.families)
    }
}

/// One metric family: its name, help, type and samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Family {
    name: &'static str,
    help: &'static str,
    #[serde(rename = "type")]
    kind: Kind,
    samples: Vec<Sample>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Gauge,
    Counter,
}

/// One sample: its labels, in the order SPEC 15 names them, and its value.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Sample {
    labels: BTreeMap<&'static str, String>,
    #[serde(skip)]
    order: Vec<&'static str>,
    #[serde(serialize_with = "whole_or_fraction")]
    value: f64,
}

/// A value in JSON as the text shows it: a count as an integer.
fn whole_or_fraction<S: serde::Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        s.serialize_i64(*value as i64)
    } else {
        s.serialize_f64(*value)
    }
}

impl Sample {
    fn new(labels: &[(&'static str, &str)], value: f64) -> Sample {
        Sample {
            labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            order: labels.iter().map(|(k, _)| *k).collect(),
            value,
        }
    }
}

fn family(name: &'static str, kind: Kind, help: &'static str, samples: Vec<Sample>) -> Family {
    Family {
        name,
        help,
        kind,
        samples,
    }
}

/// `count` as a sample's value (exact: counts stay far below 2^53).
fn value(count: i64) -> f64 {
    count as f64
}

/// Every family of SPEC 15, from the outbox's counts at `now`.
pub fn families(tally: &OutboxTally, now: Timestamp) -> Vec<Family> {
    let receivers: BTreeSet<&str> = (tally.receivers.iter().map(String::as_str))
        .chain(tally.operations.iter().map(|c| c.receiver.as_str()))
        .collect();
    vec![
        family(
            "recon_operations",
            Kind::Gauge,
            "Operations in the outbox, by state and by the receiver they route to.",
            operations(tally, &receivers),
        ),
        family(
            "recon_unknown_operations",
            Kind::Gauge,
            "Unknown operations, by the verdict of their latest observation (never: none \
             recorded), receiver and escalation.",
            unknown(tally),
        ),
        family(
            "recon_oldest_unknown_age_seconds",
            Kind::Gauge,
            "Seconds since the oldest unknown operation of a receiver last changed state \
             (0 when it has none).",
            oldest(tally, &receivers, now),
        ),
        family(
            "recon_contradicted_operations",
            Kind::Gauge,
            "Operations whose decision a later recorded read contradicted, not yet \
             acknowledged.",
            vec![Sample::new(&[], value(tally.contradicted))],
        ),
        family(
            "recon_surplus_effects",
            Kind::Gauge,
            "Surplus effects (duplicates kept aside by a decision) with no approved \
             compensation.",
            vec![Sample::new(&[], value(tally.surplus_effects))],
        ),
        family(
            "recon_failed_calls_total",
            Kind::Counter,
            "Failed receiver calls the journal kept, by receiver, verb and kind of failure.",
            failed_calls(tally),
        ),
        family(
            "recon_decisions_total",
            Kind::Counter,
            "Decided operations (confirmed or not_applied), by decision and its source: a \
             receipt, a person's review or a policy.",
            decisions(tally),
        ),
        family(
            "recon_journal_entries",
            Kind::Gauge,
            "Entries in the outbox's journal (its length).",
            vec![Sample::new(&[], value(tally.journal_entries))],
        ),
    ]
}

/// Every state of every receiver, registered or named by an operation
/// (one removed since), zero where none is: a series that exists from the
/// start reads as 0, not as absent.
fn operations(tally: &OutboxTally, receivers: &BTreeSet<&str>) -> Vec<Sample> {
    let mut counts: BTreeMap<(&str, OpState), i64> = BTreeMap::new();
    for count in &tally.operations {
        *counts.entry((&count.receiver, count.state)).or_default() += count.count;
    }
    let mut samples = Vec::new();
    for receiver in receivers {
        for state in OpState::ALL {
            let n = counts.get(&(*receiver, *state)).copied().unwrap_or(0);
            let labels = [("state", state.as_str()), ("receiver", *receiver)];
            samples.push(Sample::new(&labels, value(n)));
        }
    }
    samples
}

fn unknown(tally: &OutboxTally) -> Vec<Sample> {
    let mut samples: Vec<Sample> = (tally.unknown.iter())
        .map(|group| {
            let verdict = group.verdict.map_or("never", |v| v.as_str());
            let escalated = if group.escalated { "true" } else { "false" };
            let labels = [
                ("verdict", verdict),
                ("receiver", group.receiver.as_str()),
                ("escalated", escalated),
            ];
            Sample::new(&labels, value(group.count))
        })
        .collect();
    samples.sort_by(|a, b| a.labels.cmp(&b.labels));
    samples
}

/// The age of each receiver's oldest unknown operation, in seconds with
/// milliseconds; 0 for a receiver with none.
fn oldest(tally: &OutboxTally, receivers: &BTreeSet<&str>, now: Timestamp) -> Vec<Sample> {
    let mut oldest: BTreeMap<&str, Timestamp> = BTreeMap::new();
    for group in &tally.unknown {
        let at = oldest.entry(&group.receiver).or_insert(group.oldest);
        *at = (*at).min(group.oldest);
    }
    let all: BTreeSet<&str> = receivers
        .iter()
        .copied()
        .chain(oldest.keys().copied())
        .collect();
    (all.into_iter())
        .map(|receiver| {
            let age = oldest
                .get(receiver)
                .map_or(0.0, |at| now.since(*at).as_millis() as f64 / 1000.0);
            Sample::new(&[("receiver", receiver)], age)
        })
        .collect()
}

fn failed_calls(tally: &OutboxTally) -> Vec<Sample> {
    let mut samples: Vec<Sample> = (tally.failed_calls.iter())
        .map(|calls| {
            let labels = [
                ("receiver", calls.receiver.as_str()),
                ("verb", calls.verb.as_str()),
                ("kind", calls.kind.as_str()),
            ];
            Sample::new(&labels, value(calls.count))
        })
        .collect();
    samples.sort_by(|a, b| a.labels.cmp(&b.labels));
    samples
}

/// Every decision from every source, zero where none is, so that a
/// counter's first increase is seen.
fn decisions(tally: &OutboxTally) -> Vec<Sample> {
    let mut samples = Vec::new();
    for decision in Decision::ALL {
        for source in EvidenceSource::ALL {
            let n: i64 = (tally.decisions.iter())
                .filter(|c| c.decision == *decision && c.source == *source)
                .map(|c| c.count)
                .sum();
            let labels = [("decision", decision.as_str()), ("source", source.as_str())];
            samples.push(Sample::new(&labels, value(n)));
        }
    }
    samples
}

/// The text exposition (format 0.0.4) of `families`.
pub fn exposition(families: &[Family]) -> String {
    let mut text = String::new();
    for family in families {
        let kind = match family.kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        text.push_str(&format!(
            "# HELP {} {}\n",
            family.name,
            help_text(family.help)
        ));
        text.push_str(&format!("# TYPE {} {kind}\n", family.name));
        for sample in &family.samples {
            text.push_str(family.name);
            if !sample.order.is_empty() {
                let labels: Vec<String> = (sample.order.iter())
                    .map(|name| format!("{name}=\"{}\"", label_value(&sample.labels[name])))
                    .collect();
                text.push_str(&format!("{{{}}}", labels.join(",")));
            }
            text.push_str(&format!(" {}\n", number(sample.value)));
        }
    }
    text
}

/// A help text as the format wants it: backslash and line feed escaped.
fn help_text(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A label value as the format wants it: backslash, double quote and line
/// feed escaped. Every value comes from a closed set (receiver names,
/// states, verdicts, verbs, failure kinds), but one read from a damaged
/// outbox could hold another control character, which would reach a
/// terminal: it is shown as U+FFFD.
fn label_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A value: a whole number without a fraction, else with milliseconds.
fn number(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::metrics::{StateCount, UnknownGroup};
    use crate::domain::Verdict;

    fn at(millis: i64) -> Timestamp {
        Timestamp::from_millis(millis)
    }

    /// A sample's line for `name` in the exposition of `tally` at `now`.
    fn lines_of(tally: &OutboxTally, now: Timestamp, name: &str) -> Vec<String> {
        (exposition(&families(tally, now)).lines())
            .filter(|line| {
                line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))
            })
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn label_values_escape_backslash_quote_and_line_feed_and_hide_other_controls() {
        assert_eq!(label_value("a\\b\"c\nd\u{1b}e"), "a\\\\b\\\"c\\nd\u{FFFD}e");
        assert_eq!(help_text("a\\b\nc"), "a\\\\b\\nc");
    }

    #[test]
    fn a_count_is_printed_whole_and_an_age_to_the_millisecond() {
        assert_eq!(
            (number(3.0), number(0.0), number(1.5), number(0.0015)),
            ("3".into(), "0".into(), "1.500".into(), "0.002".into())
        );
    }

    #[test]
    fn every_state_of_every_receiver_is_a_series_and_the_oldest_unknown_is_the_minimum() {
        let tally = OutboxTally {
            receivers: vec!["mail".into()],
            operations: vec![StateCount {
                receiver: "gone".into(),
                state: OpState::Unknown,
                count: 3,
            }],
            unknown: vec![
                UnknownGroup {
                    receiver: "gone".into(),
                    verdict: None,
                    escalated: false,
                    count: 2,
                    oldest: at(5_000),
                },
                UnknownGroup {
                    receiver: "gone".into(),
                    verdict: Some(Verdict::Inconclusive),
                    escalated: true,
                    count: 1,
                    oldest: at(2_000),
                },
            ],
            ..OutboxTally::default()
        };
        let operations = lines_of(&tally, at(10_500), "recon_operations");
        assert_eq!(operations.len(), 8, "{operations:?}");
        assert!(operations
            .contains(&"recon_operations{state=\"unknown\",receiver=\"gone\"} 3".to_string()));
        assert!(operations
            .contains(&"recon_operations{state=\"unknown\",receiver=\"mail\"} 0".to_string()));
        assert_eq!(
            lines_of(&tally, at(10_500), "recon_oldest_unknown_age_seconds"),
            [
                "recon_oldest_unknown_age_seconds{receiver=\"gone\"} 8.500",
                "recon_oldest_unknown_age_seconds{receiver=\"mail\"} 0",
            ]
        );
        assert_eq!(
            lines_of(&tally, at(10_500), "recon_unknown_operations"),
            [
                "recon_unknown_operations{verdict=\"never\",receiver=\"gone\",escalated=\"false\"} 2",
                "recon_unknown_operations{verdict=\"inconclusive\",receiver=\"gone\",escalated=\"true\"} 1",
            ]
        );
        assert_eq!(lines_of(&tally, at(0), "recon_decisions_total").len(), 6);
    }

    #[test]
    fn failed_calls_and_decisions_are_counters_each_series_with_its_own_count() {
        use crate::domain::metrics::{DecisionCount, FailedCalls};
        let calls = |receiver: &str, verb: &str, count| FailedCalls {
            receiver: receiver.into(),
            verb: verb.into(),
            kind: "timeout".into(),
            count,
        };
        let tally = OutboxTally {
            failed_calls: vec![calls("mail", "query", 4), calls("crm", "apply", 1)],
            decisions: vec![DecisionCount {
                decision: Decision::NotApplied,
                source: EvidenceSource::Policy,
                count: 5,
            }],
            ..OutboxTally::default()
        };
        let text = exposition(&families(&tally, at(0)));
        assert!(
            text.contains("# TYPE recon_failed_calls_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE recon_decisions_total counter\n"),
            "{text}"
        );
        assert_eq!(
            lines_of(&tally, at(0), "recon_failed_calls_total"),
            [
                "recon_failed_calls_total{receiver=\"crm\",verb=\"apply\",kind=\"timeout\"} 1",
                "recon_failed_calls_total{receiver=\"mail\",verb=\"query\",kind=\"timeout\"} 4",
            ]
        );
        let decided = lines_of(&tally, at(0), "recon_decisions_total");
        assert!(decided.contains(
            &"recon_decisions_total{decision=\"not_applied\",source=\"policy\"} 5".to_string()
        ));
        assert_eq!(decided.iter().filter(|l| l.ends_with(" 0")).count(), 5);
    }

    #[test]
    fn json_gives_a_count_as_an_integer_and_an_age_as_a_fraction() {
        let json = |value: f64| {
            let sample = Sample::new(&[], value);
            serde_json::to_value(&sample).expect("json")["value"].clone()
        };
        assert!(json(3.0).is_i64());
        assert!(json(0.0).is_i64());
        assert_eq!(json(8.5), serde_json::json!(8.5));
        // Past 2^53 an integer is no longer exact: it stays a float.
        assert!(json(9_007_199_254_740_992.0).is_f64());
        assert!(json(-9_007_199_254_740_992.0).is_f64());
    }
}
