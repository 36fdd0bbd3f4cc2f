//! `recon prepare --batch FILE` (SPEC 10): many operations from JSON lines
//! `{"op", "action", "payload"}`, prepared in transactions of up to
//! [`BATCH_TRANSACTION`], each line refused alone and reported with its
//! line number (counted from 1).
//!
//! The file is read as a stream (a FIFO or `-`, standard input, work as a
//! regular file does), a transaction's worth of lines at a time, so memory
//! stays bounded whatever its length; each line is bounded as a payload
//! (`domain::parse_payload` reads it: strict JSON, I-JSON numbers, depth
//! and size), and a longer one is read to its end and refused `bad_line`.
//! A line that is not such an object, or whose op id or action kind is not
//! a valid one, is refused `bad_line`; a line the outbox refuses carries
//! the refusal's code (`duplicate_operation`, `no_receiver`,
//! `permission_denied`, ...), and rolls back alone (a savepoint), so the
//! other lines of its transaction are prepared. Blank lines are skipped.
//!
//! The report replaces an error document under `--json` too; the exit
//! code is 0 when every line was prepared, 3 when any was refused. A
//! storage failure ends the run (exit 4), saying how many lines the
//! transactions before it committed.

use super::failure::{EXIT_OK, EXIT_REFUSED};
use super::open::{open, Place};
use super::{Failure, Out, Render};
use crate::cli::{identifier, PrepareArgs};
use crate::domain::parse_payload;
use crate::domain::sanitize::escape;
use crate::domain::NewOperation;
use crate::error::{Committed, Error};
use crate::workspace::{Location, Workspace, BATCH_TRANSACTION};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

/// The code of a line that is not a valid `{"op", "action", "payload"}`.
const BAD_LINE: &str = "bad_line";

/// The code of a line whose own savepoint failed for a storage reason
/// while the transaction went on.
const FAILED: &str = "storage";

pub struct PrepareBatch {
    location: Location,
    /// The file, or `None` for standard input (`-`).
    file: Option<PathBuf>,
}

impl PrepareBatch {
    pub fn validate(args: PrepareArgs, place: Place) -> Result<Self, Failure> {
        let file = args
            .batch
            .ok_or_else(|| Failure::Usage("prepare --batch needs a FILE".into()))?;
        let file = (file.as_os_str() != "-").then_some(file);
        if let Some(path) = &file {
            let meta = std::fs::metadata(path).map_err(|e| {
                Failure::Usage(format!("cannot read batch file {}: {e}", path.display()))
            })?;
            if meta.is_dir() {
                return Err(Failure::Usage(format!(
                    "batch file {} is a directory",
                    path.display()
                )));
            }
        }
        Ok(PrepareBatch {
            location: place.required()?,
            file,
        })
    }

    pub fn run(self) -> Result<BatchReport, Failure> {
        let mut ws = open(&self.location, false)?;
        let reader: Box<dyn Read> = match &self.file {
            None => Box::new(std::io::stdin().lock()),
            Some(path) => Box::new(std::fs::File::open(path).map_err(|e| {
                Failure::Usage(format!("cannot read batch file {}: {e}", path.display()))
            })?),
        };
        let mut lines = Lines {
            reader: BufReader::with_capacity(1 << 16, reader),
            buffer: Vec::new(),
            number: 0,
        };
        let mut report = BatchReport::default();
        loop {
            let items = lines.next_items(&mut report)?;
            if items.is_empty() {
                report.refused.sort_by_key(|refused| refused.line);
                return Ok(report);
            }
            prepare_items(&mut ws, &items, &mut report)?;
        }
    }
}

/// One line that reads as an operation.
struct Item {
    line: usize,
    op_id: String,
    action_kind: String,
    payload: Value,
}

/// The batch file, a line at a time.
struct Lines<R> {
    reader: BufReader<R>,
    buffer: Vec<u8>,
    /// The number of the last line read.
    number: usize,
}

impl<R: Read> Lines<R> {
    /// Up to a transaction's worth of lines that read as operations; the
    /// others are refused in `report` as they are met. Empty at the end.
    fn next_items(&mut self, report: &mut BatchReport) -> Result<Vec<Item>, Failure> {
        let mut items = Vec::new();
        while items.len() < BATCH_TRANSACTION {
            let Some(fits) = self.next_line().map_err(Failure::io)? else {
                break;
            };
            let line = self.number;
            if !fits {
                report.refuse(line, BAD_LINE, "longer than a payload may be".into());
                continue;
            }
            let Ok(text) = std::str::from_utf8(&self.buffer) else {
                report.refuse(line, BAD_LINE, "not UTF-8".into());
                continue;
            };
            if text.trim().is_empty() {
                continue;
            }
            match item(line, text) {
                Ok(item) => items.push(item),
                Err(why) => report.refuse(line, BAD_LINE, why),
            }
        }
        Ok(items)
    }

    /// Reads the next line into the buffer, without its line end:
    /// `Some(true)`, or `Some(false)` for a line longer than a payload may
    /// be (read to its end and dropped); `None` at the end of the file.
    fn next_line(&mut self) -> std::io::Result<Option<bool>> {
        let limit = crate::domain::bounds::MAX_PAYLOAD_BYTES;
        self.buffer.clear();
        let read = (&mut self.reader)
            .take(limit as u64 + 2)
            .read_until(b'\n', &mut self.buffer)?;
        if read == 0 {
            return Ok(None);
        }
        self.number += 1;
        let ended = self.buffer.last() == Some(&b'\n');
        if ended {
            self.buffer.pop();
            if self.buffer.last() == Some(&b'\r') {
                self.buffer.pop();
            }
        }
        if self.buffer.len() <= limit {
            return Ok(Some(true));
        }
        if !ended {
            self.skip_line()?;
        }
        Ok(Some(false))
    }

    /// Drops the rest of a line too long to keep.
    fn skip_line(&mut self) -> std::io::Result<()> {
        loop {
            let available = self.reader.fill_buf()?;
            if available.is_empty() {
                return Ok(());
            }
            match available.iter().position(|b| *b == b'\n') {
                Some(end) => {
                    self.reader.consume(end + 1);
                    return Ok(());
                }
                None => {
                    let all = available.len();
                    self.reader.consume(all);
                }
            }
        }
    }
}

/// A line as an operation: a JSON object with exactly `op`, `action` and
/// `payload`, read as a payload is (so bounded and strict), its op id and
/// action kind valid ones.
fn item(line: usize, text: &str) -> Result<Item, String> {
    let value = parse_payload(text).map_err(|why| format!("the line {why}"))?;
    let Value::Object(mut fields) = value else {
        return Err("not a JSON object {\"op\", \"action\", \"payload\"}".into());
    };
    if let Some(other) = fields
        .keys()
        .find(|key| !["op", "action", "payload"].contains(&key.as_str()))
    {
        return Err(format!("unknown field {:?}", escape(other)));
    }
    let mut text_field = |name: &str, what: &str| match fields.remove(name) {
        Some(Value::String(text)) => identifier(what, &text).map(str::to_string).map_err(|e| e.0),
        Some(_) => Err(format!("\"{name}\" is not a string")),
        None => Err(format!("no \"{name}\"")),
    };
    let op_id = text_field("op", "op id")?;
    let action_kind = text_field("action", "action kind")?;
    let payload = fields.remove("payload").ok_or("no \"payload\"")?;
    Ok(Item {
        line,
        op_id,
        action_kind,
        payload,
    })
}

/// Prepares `items` in one transaction; each refused item in `report`.
/// A failure of the transaction itself: a refusal (say the login lacks
/// the sender role) refuses each of its lines; any other ends the run.
fn prepare_items(
    ws: &mut Workspace,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<(), Failure> {
    let news: Vec<NewOperation<'_>> = items
        .iter()
        .map(|item| NewOperation {
            op_id: &item.op_id,
            action_kind: &item.action_kind,
            payload: &item.payload,
            origin: None,
        })
        .collect();
    let results = match ws.prepare_each(&news) {
        Ok(results) => results,
        Err(error) => match error.refusal() {
            Some(refusal) => {
                for item in items {
                    report.refuse(item.line, refusal.code(), refusal.to_string());
                }
                return Ok(());
            }
            None => return Err(report.ended_by(error)),
        },
    };
    for (item, result) in items.iter().zip(results) {
        match result {
            Ok(_) => report.prepared += 1,
            Err(error) => match error.refusal() {
                Some(refusal) => report.refuse(item.line, refusal.code(), refusal.to_string()),
                None => report.refuse(item.line, FAILED, error.to_string()),
            },
        }
    }
    Ok(())
}

/// What `prepare --batch` did.
#[derive(Debug, Default, Serialize)]
pub struct BatchReport {
    prepared: usize,
    refused: Vec<RefusedLine>,
}

#[derive(Debug, Serialize)]
struct RefusedLine {
    line: usize,
    code: &'static str,
    message: String,
}

impl BatchReport {
    fn refuse(&mut self, line: usize, code: &'static str, message: String) {
        self.refused.push(RefusedLine {
            line,
            code,
            message,
        });
    }

    /// A storage failure after `prepared` lines had committed: the failure,
    /// saying so.
    fn ended_by(&self, error: Error) -> Failure {
        if self.prepared == 0 {
            return error.into();
        }
        Failure::Engine(Error::AfterCommit {
            error: Box::new(error),
            committed: Committed {
                sentence: format!(
                    "{} lines of the batch were prepared and committed before it",
                    self.prepared
                ),
                json: json!({"prepared": self.prepared, "refused": self.refused.len()}),
            },
        })
    }
}

impl Render for BatchReport {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        out.line(format!(
            "prepared {} operations; {} lines refused",
            self.prepared,
            self.refused.len()
        ))?;
        for refused in &self.refused {
            out.line(format!(
                "  line {}: {}: {}",
                refused.line,
                refused.code,
                escape(&refused.message)
            ))?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(self)
    }

    fn exit_code(&self) -> i32 {
        if self.refused.is_empty() {
            EXIT_OK
        } else {
            EXIT_REFUSED
        }
    }
}
