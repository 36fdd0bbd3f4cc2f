//! Where a command's bytes go: standard output (buffered), standard error,
//! and files written whole.
//!
//! Every renderer writes through [`Out`], so the treatment of a closed pipe
//! is decided here once: `recon ledger | head` ends quietly (exit 0), not
//! as an error. `export` and `screenshot` write with [`Out::direct`], which
//! has always treated any failure to write, a closed pipe included, as an
//! I/O error (exit 4); that difference is kept, not endorsed.

use super::Failure;
use crate::domain::sanitize::json_for_terminal;
use crate::error::StoreError;
use serde::Serialize;
use std::io::{BufWriter, Stdout, Write};
use std::path::Path;

/// Standard output for one command, buffered so that a long ledger is a
/// few large writes rather than one per line.
pub struct Out(BufWriter<Stdout>);

impl Default for Out {
    fn default() -> Self {
        Out(BufWriter::new(std::io::stdout()))
    }
}

impl Out {
    pub fn line(&mut self, line: impl AsRef<str>) -> Result<(), Failure> {
        writeln!(self.0, "{}", line.as_ref()).map_err(output_error)
    }

    /// Prints a value as one JSON document, fields in their declared order.
    pub fn json(&mut self, value: &impl Serialize) -> Result<(), Failure> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| Failure::Engine(StoreError::Corrupt(e.to_string()).into()))?;
        self.line(json_for_terminal(text))
    }

    /// Prints text that carries its own line ends.
    pub fn text(&mut self, text: &str) -> Result<(), Failure> {
        self.0.write_all(text.as_bytes()).map_err(output_error)
    }

    /// Writes text straight to standard output and flushes it, past the
    /// buffer; any failure, a closed pipe included, is an I/O error.
    pub fn direct(&mut self, text: &str) -> Result<(), Failure> {
        let stdout = self.0.get_mut();
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(Failure::io)
    }

    /// One line on stderr, which is unbuffered: a failure's message, or a
    /// warning beside a result.
    pub fn stderr_line(&mut self, line: &str) {
        let _ = writeln!(std::io::stderr(), "{line}");
    }

    pub fn flush(&mut self) -> Result<(), Failure> {
        self.0.flush().map_err(output_error)
    }
}

fn output_error(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure::ClosedPipe
    } else {
        Failure::io(e)
    }
}

/// Writes a whole file beside its target and renames it into place, so a
/// failure leaves no half file.
pub fn write_file(path: &Path, text: &str) -> Result<(), Failure> {
    write_file_with(path, |w| {
        w.write_all(text.as_bytes())
            .map_err(|e| cannot_write(path, &e))
    })
}

/// An output that cannot be written is an I/O error (exit 4), as a
/// standard output that cannot be written is.
pub fn cannot_write(path: &Path, e: &dyn std::fmt::Display) -> Failure {
    let reason = e.to_string();
    let reason = reason
        .split(" at path ")
        .next()
        .unwrap_or_default()
        .to_string();
    Failure::io(std::io::Error::other(format!(
        "cannot write {}: {reason}",
        crate::domain::sanitize::escape(&path.display().to_string())
    )))
}

/// Writes a file beside its target through `body`, buffered, syncs it and
/// renames it into place only when `body` succeeded, so a failure leaves
/// no half file (the temporary one, a hidden `.tmp…` name no glob of the
/// target's extension matches, is removed when dropped; a process killed
/// outright leaves it beside the target, which stays as it was).
pub fn write_file_with<T>(
    path: &Path,
    body: impl FnOnce(&mut (dyn Write + Send)) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| cannot_write(path, &e))?;
    let mut writer = BufWriter::new(tmp);
    let result = body(&mut writer)?;
    let tmp = writer
        .into_inner()
        .map_err(|e| cannot_write(path, e.error()))?;
    // On disk before it takes the target's name: a power loss after the
    // rename finds the whole file, never an empty one.
    tmp.as_file()
        .sync_all()
        .map_err(|e| cannot_write(path, &e))?;
    tmp.persist(path)
        .map_err(|e| cannot_write(path, &e.error))?;
    Ok(result)
}

/// Reads a whole file of at most `max` bytes as text; a larger file, one
/// that is not UTF-8, or one that cannot be read is a usage error naming
/// it. No input is read without a bound (`/dev/zero` included).
pub fn read_bounded(path: &std::path::Path, max: u64) -> Result<String, Failure> {
    let shown = crate::domain::sanitize::escape(&path.display().to_string()).into_owned();
    let file = std::fs::File::open(path)
        .map_err(|e| Failure::Usage(format!("cannot read {shown}: {e}")))?;
    read_text(file, &shown, max)
}

/// [`read_bounded`] for what must be a regular file (a plan a person
/// authorized): a FIFO, a device or a directory is a usage error, said at
/// once (opened without blocking, so a FIFO with no writer cannot hang it).
pub fn read_regular_bounded(path: &std::path::Path, max: u64) -> Result<String, Failure> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = crate::domain::sanitize::escape(&path.display().to_string()).into_owned();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Failure::Usage(format!("cannot read {shown}: {e}")))?;
    let regular = file
        .metadata()
        .map_err(|e| Failure::Usage(format!("cannot read {shown}: {e}")))?
        .is_file();
    if !regular {
        return Err(Failure::Usage(format!(
            "{shown} is not a regular file (a FIFO, a device or a directory); it is read from a \
             file only"
        )));
    }
    read_text(file, &shown, max)
}

/// Reads `file` whole as UTF-8 text of at most `max` bytes.
fn read_text(file: std::fs::File, shown: &str, max: u64) -> Result<String, Failure> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::Usage(format!("cannot read {shown}: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(Failure::Usage(format!(
            "{shown} is larger than {max} bytes; refusing to read it"
        )));
    }
    String::from_utf8(bytes).map_err(|_| Failure::Usage(format!("{shown} is not UTF-8 text")))
}
