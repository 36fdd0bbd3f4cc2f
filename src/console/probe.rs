//! What the terminal says about its background: the OSC 11 question
//! (`ESC ] 11 ; ? BEL`), asked once as the console starts, before its key
//! loop, and the answer read back (`ESC ] 11 ; rgb:RRRR/GGGG/BBBB`, ended by
//! BEL or ST). Which palette that colour gets is [`super::theme`]'s to say;
//! this module only asks and reads.
//!
//! The question is followed by a second one that practically every
//! terminal answers, Primary Device Attributes (DA1, `ESC [ c`), and a
//! terminal answers in order: so the DA1 answer (`ESC [ ? 1 ; 2 c`) is the
//! sentinel that ends the reading, with the OSC 11 answer before it if the
//! terminal gave one. A terminal that answers DA1 and not OSC 11 (tmux with
//! no pane background configured) costs one round trip, not the timeout;
//! only a terminal that answers neither waits the whole [`TIMEOUT`], so it
//! can be long enough for a slow link. An answer that comes later still
//! reaches the key loop, whose guard drops it (`update::guard`).
//!
//! The answers arrive on the terminal's input, where keys arrive too, so
//! the reading is careful not to eat a key: nothing is asked when input is
//! already waiting (a key typed ahead), and bytes are read one at a time
//! only while they can still be the answers, at most [`MAX_REPLY`] of
//! them, for at most the timeout given; a byte that cannot be is dropped
//! and ends the reading. The terminal is read through standard input, the
//! descriptor crossterm reads when it is a terminal (the console refuses
//! to start otherwise), in the raw mode the console has already entered,
//! and before crossterm's own reader has read anything.

use super::theme::Rgb;
use std::io::Write;
use std::time::{Duration, Instant};

/// How long the console waits for the terminal's answers: paid whole only
/// by a terminal that answers neither question.
pub const TIMEOUT: Duration = Duration::from_secs(1);

/// The most bytes read: an OSC 11 answer (`ESC ] 11 ; rgb:RRRR/GGGG/BBBB
/// ESC \` is 26 bytes) and a DA1 answer (xterm's, with every feature it
/// lists, is under 50) fit with room to spare.
pub const MAX_REPLY: usize = 128;

/// The questions: the background colour, then the device attributes.
const QUESTIONS: &[u8] = b"\x1b]11;?\x07\x1b[c";

/// How an OSC 11 answer begins.
const OSC_HEAD: &[u8] = b"\x1b]11;";

/// How a DA1 answer begins; parameters and `c` follow.
const DA1_HEAD: &[u8] = b"\x1b[?";

/// Asks the terminal for its background colour and reads its answers, and
/// returns the colour if a well-formed OSC 11 answer came within `timeout`.
/// `None` when input was already waiting, the terminal did not answer OSC
/// 11 (or not in time), or the bytes that came were not an answer (then
/// they are dropped, at most [`MAX_REPLY`] of them: keys typed before the
/// first screen was drawn).
pub fn background(timeout: Duration) -> Option<Rgb> {
    if readable(libc::STDIN_FILENO, Duration::ZERO) {
        return None;
    }
    let mut out = std::io::stdout();
    out.write_all(QUESTIONS).ok()?;
    out.flush().ok()?;
    let deadline = Instant::now() + timeout;
    let mut reply = Vec::new();
    while reply.len() < MAX_REPLY {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !readable(libc::STDIN_FILENO, left) {
            break;
        }
        let mut byte = 0u8;
        // SAFETY: one byte read into a valid one-byte buffer.
        let n = unsafe { libc::read(libc::STDIN_FILENO, (&mut byte as *mut u8).cast(), 1) };
        if n != 1 {
            break;
        }
        reply.push(byte);
        match read_reply(&reply) {
            Reply::Done(rgb) => return rgb,
            Reply::More => {}
        }
    }
    answered(&reply)
}

/// Whether `fd` has input within `wait`.
fn readable(fd: libc::c_int, wait: Duration) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid `pollfd` for the length given.
    let ready = unsafe { libc::poll(&mut poll, 1, ms) };
    ready > 0 && poll.revents & libc::POLLIN != 0
}

/// Where reading the answers stands after the bytes so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// The bytes so far begin the answers: read on.
    More,
    /// The reading is over: the DA1 answer is complete, or a byte came
    /// that cannot continue the answers. The colour of the OSC 11 answer
    /// that came first, if one did and it is well formed.
    Done(Option<Rgb>),
}

/// Reads the bytes so far as the answers to the questions: an OSC 11
/// answer if the terminal gives one, then the DA1 answer, which ends them.
///
/// The OSC 11 answer is `ESC ] 11 ;`, printable text, then BEL or `ESC \`;
/// its colour is taken when that text is `rgb:R/G/B`, each of R, G and B
/// one to four hex digits (the colour's scale is taken from the digit
/// count, as XParseColor does), and is `None` otherwise. The DA1 answer is
/// `ESC [ ?`, digits and semicolons, then `c`.
pub fn read_reply(bytes: &[u8]) -> Reply {
    let (colour, rest) = match osc_answer(bytes) {
        Part::More => return Reply::More,
        Part::Over(len, colour) => (colour, &bytes[len..]),
        Part::Not => (None, bytes),
    };
    match da1_answer(rest) {
        Part::More => Reply::More,
        Part::Over(..) | Part::Not => Reply::Done(colour),
    }
}

/// The colour of a complete OSC 11 answer at the start of `bytes`, if
/// any: what the reading keeps when the DA1 answer does not come in time.
pub fn answered(bytes: &[u8]) -> Option<Rgb> {
    match osc_answer(bytes) {
        Part::Over(_, colour) => colour,
        Part::More | Part::Not => None,
    }
}

/// Where one answer at the start of some bytes stands.
enum Part {
    /// The bytes so far begin it (or are none yet).
    More,
    /// It is complete in its first `usize` bytes, with its colour if any.
    Over(usize, Option<Rgb>),
    /// The bytes cannot begin it.
    Not,
}

/// Whether `bytes` begin with `head`, or are a beginning of it (`None`).
fn starts(bytes: &[u8], head: &[u8]) -> Option<bool> {
    let n = bytes.len().min(head.len());
    match bytes[..n] == head[..n] {
        false => Some(false),
        true if bytes.len() <= head.len() => None,
        true => Some(true),
    }
}

/// An OSC 11 answer: `ESC ] 11 ;`, printable text, BEL or `ESC \`.
fn osc_answer(bytes: &[u8]) -> Part {
    match starts(bytes, OSC_HEAD) {
        Some(false) => return Part::Not,
        None => return Part::More,
        Some(true) => {}
    }
    let body = &bytes[OSC_HEAD.len()..];
    let Some(at) = body.iter().position(|b| !(0x20..=0x7e).contains(b)) else {
        return Part::More;
    };
    let colour = || {
        let text = body[..at].strip_prefix(b"rgb:")?;
        parse_rgb(text)
    };
    match &body[at..] {
        [0x07, ..] => Part::Over(OSC_HEAD.len() + at + 1, colour()),
        [0x1b] => Part::More,
        [0x1b, b'\\', ..] => Part::Over(OSC_HEAD.len() + at + 2, colour()),
        _ => Part::Not,
    }
}

/// A DA1 answer: `ESC [ ?`, digits and semicolons, then `c`.
fn da1_answer(bytes: &[u8]) -> Part {
    match starts(bytes, DA1_HEAD) {
        Some(false) => return Part::Not,
        None => return Part::More,
        Some(true) => {}
    }
    let body = &bytes[DA1_HEAD.len()..];
    match body
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b';'))
    {
        None => Part::More,
        Some(at) if body[at] == b'c' => Part::Over(DA1_HEAD.len() + at + 1, None),
        Some(_) => Part::Not,
    }
}

/// `R/G/B`, each one to four hex digits, scaled to eight bits.
fn parse_rgb(text: &[u8]) -> Option<Rgb> {
    let text = std::str::from_utf8(text).ok()?;
    let mut parts = text.split('/');
    let mut channel = || -> Option<u8> {
        let digits = parts.next()?;
        let hex = digits.bytes().all(|b| b.is_ascii_hexdigit());
        if digits.is_empty() || digits.len() > 4 || !hex {
            return None;
        }
        let value = u32::from_str_radix(digits, 16).ok()?;
        let max = (1u32 << (4 * digits.len())) - 1;
        u8::try_from((value * 255 + max / 2) / max).ok()
    };
    let rgb = (channel()?, channel()?, channel()?);
    parts.next().is_none().then_some(rgb)
}
