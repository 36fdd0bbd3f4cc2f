//! How large an accepted operation may be, and why every answer about it
//! still fits the protocol's line: the bounds that must agree, related in
//! one place.
//!
//! `recon-adapter/1` carries one JSON object per line, at most
//! [`MAX_LINE`] bytes (SPEC 8 fixes 8 MiB; adapter authors rely on it). An
//! operation recon accepts must stay readable through it: an answer that
//! holds [`READABLE_MATCHES`] matches of the largest payload, each written
//! as verbosely as JSON allows, must fit that line, or the operation could
//! be prepared, dispatched and then never read again (`oversize`).
//!
//! The worst case is [`WORST_ESCAPE`] bytes for each byte of payload text
//! recon accepted. A JSON writer may write any character as `\uXXXX`, six
//! bytes: Go's `encoding/json` writes `<`, `>` and `&` that way, Python's
//! writes every non-ASCII character so. One byte of accepted text never
//! becomes more: a raw ASCII character becomes six, a character of two,
//! three or four bytes becomes six, six or twelve (a surrogate pair), an
//! escape already in the text stays what it is, and a number's shortest
//! form (`1e20` written out in 21 digits, as RFC 8785 does) grows at most
//! 5.25 times. So [`MAX_PAYLOAD_BYTES`] is derived from the line, not
//! chosen beside it, and the assertions below fail the build if either
//! moves alone.

use super::names::MAX_ID_CHARS;

/// The longest line of `recon-adapter/1`, either way (SPEC 8).
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// How many matches of the largest payload one answer must be able to
/// carry: an operation applied eight times is still read, as
/// `duplicate_matches`.
pub const READABLE_MATCHES: usize = 8;

/// The most bytes one byte of accepted payload text can become in an
/// answer (see the module's comment).
pub const WORST_ESCAPE: usize = 6;

/// Room in a line for everything but the payloads: the answer's own
/// members and flags, and each match's ids and member names, escaped.
pub const ENVELOPE: usize = 512 * 1024;

/// The largest payload accepted, as JSON text, from any door (an argument,
/// a file, stdin, the console's form): 160 KiB.
pub const MAX_PAYLOAD_BYTES: usize = (MAX_LINE - ENVELOPE) / (READABLE_MATCHES * WORST_ESCAPE);

/// What one match holds besides its payload, at worst: four ids (effect,
/// operation, action, compensated effect) of [`MAX_ID_CHARS`] characters,
/// each character a surrogate pair escaped (12 bytes), and a kilobyte for
/// member names and punctuation, escaped too.
const MATCH_ENVELOPE: usize = 4 * MAX_ID_CHARS * 12 + 1024;

// The answer: every match's envelope, and a few kilobytes for its own
// members, fit the room kept for them.
const _: () = assert!(READABLE_MATCHES * MATCH_ENVELOPE + 4096 <= ENVELOPE);
// The answer: eight matches of the largest payload, escaped at worst.
const _: () = assert!(READABLE_MATCHES * WORST_ESCAPE * MAX_PAYLOAD_BYTES + ENVELOPE <= MAX_LINE);
// A request (an `apply` carries one payload) fits what an adapter reads.
const _: () = assert!(WORST_ESCAPE * MAX_PAYLOAD_BYTES + ENVELOPE <= MAX_LINE);
