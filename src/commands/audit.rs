//! The integrity commands: `verify`, `export` and `checkpoint` of the
//! journal, and `verify --receivers`, which asks the receivers instead.
//!
//! All three open only the journal ([`super::open::open_journal`]), so they
//! work when the receiver's file is gone (`verify --receivers` opens the
//! workspace: it reads the receivers and records what contradicts). A broken journal is a finding,
//! not a failure: the report is printed as usual and the exit code is 1,
//! which is why the results carry their own exit code rather than raising
//! one. Nothing is held whole in memory: an earlier export is read one
//! bounded line at a time while the journal is walked, and an export is
//! written one line at a time.

use super::open::{open, open_journal, Place};
use super::output::{cannot_write, write_file_with};
use super::person::Person;
use super::{Failure, Out, Render, EXIT_MISMATCH, EXIT_OK, EXIT_STORAGE};
use crate::audit::{Checkpoint as Head, ExportedEntry, Mismatch, VerifyReport, VerifyRequest};
use crate::cli::{CheckpointArgs, ExportArgs, VerifyArgs};
use crate::domain::sanitize::{escape, json_for_terminal};
use crate::workspace::{Journal, Location, ReceiversReport};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The longest line `verify --against` reads from an export: far above
/// any entry recon writes (a snapshot of eight matches of the largest
/// payload, and a payload besides, escaped at worst), and a bound on what
/// a file that is not an export can make it hold.
pub const MAX_EXPORT_LINE_BYTES: u64 = 64 * 1024 * 1024;
const _: () = {
    use crate::domain::bounds::{ENVELOPE, MAX_PAYLOAD_BYTES, READABLE_MATCHES, WORST_ESCAPE};
    let entry = (READABLE_MATCHES + 1) * WORST_ESCAPE * MAX_PAYLOAD_BYTES + ENVELOPE;
    assert!(entry as u64 <= MAX_EXPORT_LINE_BYTES);
};

/// The largest export `verify --against` reads: 16 GiB, the journal of
/// some twenty million generated operations. (Reading also stops one
/// entry past the journal's end.)
pub const MAX_EXPORT_BYTES: u64 = 16 * 1024 * 1024 * 1024;

/// `recon verify`: the chain, the projection, and optionally an earlier
/// export and a checkpoint. The checkpoint is parsed and the export opened
/// before the workspace is.
pub struct Verify {
    location: Location,
    against: Option<ExportLines>,
    checkpoint: Option<Head>,
}

impl Verify {
    pub fn validate(args: VerifyArgs, place: Place) -> Result<Self, Failure> {
        let location = place.required()?;
        let checkpoint = args
            .checkpoint
            .as_deref()
            .map(|text| {
                Head::parse(text)
                    .map_err(|why| Failure::Usage(format!("--checkpoint {}: {why}", escape(text))))
            })
            .transpose()?;
        let against = args.against.as_deref().map(ExportLines::open).transpose()?;
        Ok(Verify {
            location,
            against,
            checkpoint,
        })
    }

    /// A line of the export that is not an exported entry is a usage
    /// error, found while the journal is walked; the report is then
    /// dropped.
    pub fn run(self) -> Result<Verified, Failure> {
        let mut against = self.against;
        let journal = open_journal(&self.location)?;
        let workspace = journal.id().map(str::to_string);
        let report = journal.verify(VerifyRequest {
            against: against
                .as_mut()
                .map(|lines| lines as &mut (dyn Iterator<Item = ExportedEntry> + Send)),
            checkpoint: self.checkpoint.as_ref(),
        })?;
        match against.and_then(|lines| lines.error) {
            Some(error) => Err(Failure::Usage(error)),
            None => Ok(Verified { workspace, report }),
        }
    }
}

/// An earlier `recon export`, read one line at a time, each at most
/// [`MAX_EXPORT_LINE_BYTES`], all at most [`MAX_EXPORT_BYTES`]; blank
/// lines are skipped. The first line that cannot be read as an exported
/// entry ends it, and says why in `error`.
struct ExportLines {
    reader: BufReader<File>,
    shown: String,
    line: u64,
    read: u64,
    buffer: Vec<u8>,
    error: Option<String>,
}

impl ExportLines {
    fn open(path: &Path) -> Result<Self, Failure> {
        let shown = escape(&path.display().to_string()).into_owned();
        let file =
            File::open(path).map_err(|e| Failure::Usage(format!("cannot read {shown}: {e}")))?;
        if file.metadata().map(|m| m.len()).unwrap_or(0) > MAX_EXPORT_BYTES {
            return Err(Failure::Usage(too_large(&shown)));
        }
        Ok(ExportLines {
            reader: BufReader::new(file),
            shown,
            line: 0,
            read: 0,
            buffer: Vec::new(),
            error: None,
        })
    }

    /// The next line's text, `Ok(None)` at the end.
    fn next_line(&mut self) -> Result<Option<&str>, String> {
        self.buffer.clear();
        let read = (&mut self.reader)
            .take(MAX_EXPORT_LINE_BYTES + 1)
            .read_until(b'\n', &mut self.buffer)
            .map_err(|e| format!("cannot read {}: {e}", self.shown))?;
        if read == 0 {
            return Ok(None);
        }
        self.read += read as u64;
        if self.read > MAX_EXPORT_BYTES {
            return Err(too_large(&self.shown));
        }
        self.line += 1;
        if self.buffer.last() == Some(&b'\n') {
            self.buffer.pop();
        } else if self.buffer.len() as u64 > MAX_EXPORT_LINE_BYTES {
            return Err(format!(
                "{} line {} is longer than {MAX_EXPORT_LINE_BYTES} bytes; refusing to read it",
                self.shown, self.line
            ));
        }
        std::str::from_utf8(&self.buffer)
            .map(Some)
            .map_err(|_| format!("{} line {} is not UTF-8 text", self.shown, self.line))
    }
}

fn too_large(shown: &str) -> String {
    format!("{shown} is larger than {MAX_EXPORT_BYTES} bytes; refusing to read it")
}

impl Iterator for ExportLines {
    type Item = ExportedEntry;

    fn next(&mut self) -> Option<ExportedEntry> {
        while self.error.is_none() {
            let parsed = match self.next_line() {
                Ok(None) => return None,
                Ok(Some(text)) if text.trim().is_empty() => continue,
                Ok(Some(text)) => ExportedEntry::from_line(text).map_err(|why| {
                    format!(
                        "{} line {} is not an exported journal entry: {why}",
                        self.shown, self.line
                    )
                }),
                Err(error) => Err(error),
            };
            match parsed {
                Ok(entry) => return Some(entry),
                Err(error) => self.error = Some(error),
            }
        }
        None
    }
}

/// A verify report, and the workspace it is about (SPEC 8: `verify
/// --json` prints the workspace id as `workspace`, the id an adapter sees
/// in every request).
pub struct Verified {
    workspace: Option<String>,
    report: VerifyReport,
}

/// `verify --json`: the workspace id first, then the report's fields.
#[derive(serde::Serialize)]
struct VerifiedJson<'a> {
    workspace: Option<&'a str>,
    #[serde(flatten)]
    report: &'a VerifyReport,
}

/// A mismatch in one line: where, and both sides.
fn mismatch_text(m: &Mismatch) -> String {
    let at = m
        .op_id
        .as_deref()
        .map_or_else(String::new, |op| format!("operation {op}, "));
    escape(&format!(
        "{at}{}: the journal says {}, the table holds {}",
        m.field, m.journal, m.table
    ))
    .into_owned()
}

impl Verified {
    fn broken_lines(&self, out: &mut Out) -> Result<(), Failure> {
        let report = &self.report;
        out.line(format!("journal BROKEN ({} entries)", report.rows))?;
        if let Some(broken) = &report.first_broken {
            out.line(format!(
                "  first broken link: entry {} (seq {}): {}",
                broken.index, broken.seq, broken.reason
            ))?;
        }
        for mismatch in &report.state_mismatches {
            out.line(format!("  {}", escape(mismatch)))?;
        }
        if let Some(first) = report.projection_mismatches.first() {
            out.line(format!(
                "  the tables are not the journal's projection: {} mismatches; the first: {}",
                report.projection_mismatches.len(),
                mismatch_text(first)
            ))?;
        }
        if !report.schema_differences.is_empty() {
            let differences: Vec<String> = report
                .schema_differences
                .iter()
                .map(ToString::to_string)
                .collect();
            out.line(format!(
                "  the outbox's schema is not this build's: {}",
                escape(&differences.join("; "))
            ))?;
        }
        if let Some(difference) = report
            .export
            .as_ref()
            .and_then(|e| e.first_difference.as_ref())
        {
            out.line(format!(
                "  exported copy: entry {} (seq {}): {}",
                difference.index, difference.seq, difference.reason
            ))?;
        }
        if let Some(checkpoint) = report.checkpoint.as_ref().filter(|c| !c.extended) {
            out.line(format!(
                "  checkpoint {}:{}: {}",
                checkpoint.length,
                checkpoint.head_hash,
                checkpoint.reason.as_deref().unwrap_or_default()
            ))?;
        }
        Ok(())
    }
}

impl Render for Verified {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let report = &self.report;
        if !report.intact {
            return self.broken_lines(out);
        }
        let export = report
            .export
            .as_ref()
            .map(|e| {
                format!(
                    "; the exported copy's {} entries are a prefix of it",
                    e.rows
                )
            })
            .unwrap_or_default();
        let checkpoint = report
            .checkpoint
            .as_ref()
            .map(|c| format!("; it extends checkpoint {}:{}", c.length, c.head_hash))
            .unwrap_or_default();
        out.line(format!(
            "journal intact: {} entries, head {}; the tables are its projection ({} entries \
             replayed){export}{checkpoint}",
            report.rows, report.head_hash, report.journal_entries
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&VerifiedJson {
            workspace: self.workspace.as_deref(),
            report: &self.report,
        })
    }

    fn exit_code(&self) -> i32 {
        if self.report.intact {
            EXIT_OK
        } else {
            EXIT_MISMATCH
        }
    }
}

/// `recon export`: every entry as stored, one JSON line each, to a file
/// (atomically) or to stdout.
pub struct Export {
    location: Location,
    output: Option<PathBuf>,
}

/// Writes the journal's lines to `w`; returns the verification of exactly
/// the journal written. A line that cannot be written says where.
fn export_to(
    journal: &Journal,
    w: &mut (dyn Write + Send),
    target: &Path,
) -> Result<VerifyReport, Failure> {
    let mut failed = None;
    let report = journal.export(&mut |line| {
        let written = w
            .write_all(line.as_bytes())
            .and_then(|()| w.write_all(b"\n"));
        if let Err(e) = &written {
            failed = Some(cannot_write(target, e));
        }
        written
    });
    match (failed, report) {
        (Some(failure), _) => Err(failure),
        (None, report) => Ok(report?),
    }
}

impl Export {
    pub fn validate(args: ExportArgs, place: Place) -> Result<Self, Failure> {
        Ok(Export {
            location: place.required()?,
            output: args.output,
        })
    }

    /// Writes the file when one was asked for, even from a broken journal:
    /// the copy is how damage is shown later. For stdout the lines go to a
    /// temporary file first, which the renderer copies out.
    pub fn run(self) -> Result<Exported, Failure> {
        let journal = open_journal(&self.location)?;
        let (report, stdout) = match &self.output {
            Some(path) => (
                write_file_with(path, |w| export_to(&journal, w, path))?,
                None,
            ),
            None => {
                let spool = Path::new("a temporary file");
                let mut file = tempfile::tempfile().map_err(|e| cannot_write(spool, &e))?;
                let mut writer = std::io::BufWriter::new(&mut file);
                let report = export_to(&journal, &mut writer, spool)?;
                writer.flush().map_err(|e| cannot_write(spool, &e))?;
                drop(writer);
                file.rewind().map_err(Failure::io)?;
                (report, Some(file))
            }
        };
        Ok(Exported {
            rows: report.rows,
            intact: report.intact,
            stdout,
        })
    }
}

pub struct Exported {
    rows: u64,
    intact: bool,
    /// The lines, when they go to stdout rather than to a file. They are
    /// printed with the controls a terminal would obey escaped (a file gets
    /// them as stored).
    stdout: Option<File>,
}

/// The most text printed in one write of `export` to stdout.
const STDOUT_CHUNK: usize = 1 << 20;

impl Render for Exported {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        if let Some(file) = &self.stdout {
            let mut lines = BufReader::new(file);
            let (mut line, mut chunk) = (String::new(), String::new());
            while lines.read_line(&mut line).map_err(Failure::io)? > 0 {
                chunk.push_str(&json_for_terminal(std::mem::take(&mut line)));
                if chunk.len() >= STDOUT_CHUNK {
                    out.direct(&chunk)?;
                    chunk.clear();
                }
            }
            out.direct(&chunk)?;
        }
        if !self.intact {
            // A finding, so an archiving script notices; not an error.
            out.stderr_line(&format!(
                "error: exported {} entries, but the journal is broken; run `recon verify`",
                self.rows
            ));
        }
        Ok(())
    }

    fn exit_code(&self) -> i32 {
        if self.intact {
            EXIT_OK
        } else {
            EXIT_MISMATCH
        }
    }
}

/// `recon checkpoint`: the journal's length and head hash, to keep outside
/// the workspace.
pub struct Checkpoint {
    location: Location,
}

impl Checkpoint {
    pub fn validate(_args: CheckpointArgs, place: Place) -> Result<Self, Failure> {
        Ok(Checkpoint {
            location: place.required()?,
        })
    }

    pub fn run(self) -> Result<Checkpointed, Failure> {
        Ok(Checkpointed(open_journal(&self.location)?.checkpoint()?))
    }
}

pub struct Checkpointed(Head);

impl Render for Checkpointed {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        out.line(self.0.to_string())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

/// Who records `verify --receivers`'s observations on a workspace
/// directory, where nobody is authenticated and the command takes no name
/// (in team mode: the database login).
pub const RECHECK_OBSERVER: &str = "verify --receivers";

/// `recon verify --receivers [--since SEQ]`: every final decision read
/// again at its receiver (SPEC 12).
pub struct VerifyReceivers {
    location: Location,
    since: i64,
    by: Person,
}

impl VerifyReceivers {
    pub fn validate(args: VerifyArgs, place: Place) -> Result<Self, Failure> {
        let since = match args.since {
            Some(seq) => i64::try_from(seq)
                .map_err(|_| Failure::Usage(format!("--since {seq}: no journal is that long")))?,
            None => 0,
        };
        let by = match place.database_url()? {
            Some(_) => Person::Login,
            None => Person::Named(RECHECK_OBSERVER.to_string()),
        };
        Ok(VerifyReceivers {
            location: place.required()?,
            since,
            by,
        })
    }

    pub fn run(self) -> Result<Rechecked, Failure> {
        let mut ws = open(&self.location, false)?;
        let by = self.by.name(&ws)?;
        Ok(Rechecked(ws.verify_receivers(self.since, &by)?))
    }
}

/// What `verify --receivers` found: under `--json` the report as SPEC 12
/// shapes it; in words, one line per contradiction and a summary.
pub struct Rechecked(ReceiversReport);

impl Render for Rechecked {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let report = &self.0;
        for c in &report.contradicted {
            let marker = match (c.seq, c.recorded) {
                (Some(seq), true) => format!("recorded as observation {seq}, which marks it"),
                (Some(seq), false) => format!("already marked by observation {seq}"),
                (None, _) => "the observation could not be recorded".to_string(),
            };
            out.line(format!(
                "contradicted: {} ({}, decided at entry {}): {}; {marker}",
                escape(&c.op_id),
                c.decision.as_str(),
                c.decision_seq,
                c.found.as_str()
            ))?;
        }
        for (reason, n) in &report.unchecked {
            out.line(format!("unchecked: {n} (receiver not read: {reason})"))?;
        }
        out.line(format!(
            "checked {} decisions at their receivers through journal entry {}: {} contradicted, \
             {} unchecked",
            report.checked,
            report.through_seq,
            report.contradicted.len(),
            report.unchecked.values().sum::<u64>()
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }

    fn exit_code(&self) -> i32 {
        match (self.0.contradicted.is_empty(), self.0.unchecked.is_empty()) {
            (false, _) => EXIT_MISMATCH,
            (true, false) => EXIT_STORAGE,
            (true, true) => EXIT_OK,
        }
    }
}
