//! What the terminal says about its background: the OSC 11 question
//! (`ESC ] 11 ; ? BEL`), asked once as the console starts, before its key
//! loop, and the answer read back (`ESC ] 11 ; rgb:RRRR/GGGG/BBBB`, ended by
//! BEL or ST). Which palette that colour gets is [`super::theme`]'s to say;
//! this module only asks and reads.
//!
//! The answer arrives on the terminal's input, where keys arrive too, so
//! the reading is careful not to eat a key: nothing is asked when input is
//! already waiting (a key typed ahead), and bytes are read one at a time
//! only while they can still begin an answer, at most [`MAX_REPLY`] of
//! them, for at most the timeout given. A terminal that does not answer
//! costs that timeout once. The terminal is read through standard input,
//! the descriptor crossterm reads when it is a terminal (the console
//! refuses to start otherwise), in the raw mode the console has already
//! entered, and before crossterm's own reader has read anything.

use super::theme::Rgb;
use std::io::Write;
use std::time::{Duration, Instant};

/// How long the console waits for the terminal's answer.
pub const TIMEOUT: Duration = Duration::from_millis(100);

/// The longest answer read: `ESC ] 11 ; rgb:RRRR/GGGG/BBBB ESC \` is 26
/// bytes.
pub const MAX_REPLY: usize = 32;

/// Asks the terminal for its background colour and reads its answer, if
/// a well-formed one comes within `timeout`. `None` when input was already
/// waiting, the terminal did not answer in time, or the bytes that came
/// were not an answer (then they are dropped, at most [`MAX_REPLY`] of
/// them: keys typed before the first screen was drawn).
pub fn background(timeout: Duration) -> Option<Rgb> {
    if readable(libc::STDIN_FILENO, Duration::ZERO) {
        return None;
    }
    let mut out = std::io::stdout();
    out.write_all(b"\x1b]11;?\x07").ok()?;
    out.flush().ok()?;
    let deadline = Instant::now() + timeout;
    let mut reply = Vec::new();
    while reply.len() < MAX_REPLY {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !readable(libc::STDIN_FILENO, left) {
            return None;
        }
        let mut byte = 0u8;
        // SAFETY: one byte read into a valid one-byte buffer.
        let n = unsafe { libc::read(libc::STDIN_FILENO, (&mut byte as *mut u8).cast(), 1) };
        if n != 1 {
            return None;
        }
        reply.push(byte);
        match read_reply(&reply) {
            Reply::Done(rgb) => return rgb,
            Reply::More => {}
        }
    }
    None
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

/// Where reading an answer stands after the bytes so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// The bytes so far begin a well-formed answer: read on.
    More,
    /// The answer is over: its colour, or `None` when the bytes cannot be
    /// (or begin) one.
    Done(Option<Rgb>),
}

/// Reads the bytes so far as an answer to OSC 11: `ESC ] 11 ; rgb:R/G/B`
/// then BEL or `ESC \`, each of R, G and B one to four hex digits (the
/// colour's scale is taken from the digit count, as XParseColor does).
pub fn read_reply(bytes: &[u8]) -> Reply {
    const HEAD: &[u8] = b"\x1b]11;rgb:";
    if bytes.len() <= HEAD.len() {
        return match HEAD.starts_with(bytes) {
            true => Reply::More,
            false => Reply::Done(None),
        };
    }
    if !bytes.starts_with(HEAD) {
        return Reply::Done(None);
    }
    let body = &bytes[HEAD.len()..];
    let (colour, end) = match body.iter().position(|&b| b == 0x07 || b == 0x1b) {
        Some(at) => body.split_at(at),
        None => {
            let allowed = body.iter().all(|b| b.is_ascii_hexdigit() || *b == b'/');
            return match allowed {
                true => Reply::More,
                false => Reply::Done(None),
            };
        }
    };
    match end {
        [0x07] | [0x1b, b'\\'] => Reply::Done(parse_rgb(colour)),
        [0x1b] => Reply::More,
        _ => Reply::Done(None),
    }
}

/// `R/G/B`, each one to four hex digits, scaled to eight bits.
fn parse_rgb(text: &[u8]) -> Option<Rgb> {
    let text = std::str::from_utf8(text).ok()?;
    let mut parts = text.split('/');
    let mut channel = || -> Option<u8> {
        let digits = parts.next()?;
        if digits.is_empty() || digits.len() > 4 {
            return None;
        }
        let value = u32::from_str_radix(digits, 16).ok()?;
        let max = (1u32 << (4 * digits.len())) - 1;
        u8::try_from((value * 255 + max / 2) / max).ok()
    };
    let rgb = (channel()?, channel()?, channel()?);
    parts.next().is_none().then_some(rgb)
}
