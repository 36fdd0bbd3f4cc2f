//! The review console in a real terminal, driven as a person drives it:
//! tmux runs `recon`, `send-keys` types, `capture-pane` reads the screen.
//! The screens must be the golden ones in `screenshots/`, which the
//! headless tests render through `TestBackend`; this proves the terminal
//! loop (raw mode, the alternate screen, key decoding, resize, live polling
//! and the restore on quit) shows what the goldens show.
//!
//! Waiting is bounded and driven by what the screen shows: each step reads
//! the pane until it equals the expected golden, or fails after a deadline
//! with the last screen it saw. Nothing sleeps.
//!
//! tmux is on the machines this project targets and CI has it; on a
//! machine without it these tests say so and pass only outside CI
//! (`CI=true` makes a missing tmux a failure).

use crate::console::{bob_confirms_the_invoice_email, held_answer, screenshots_dir, Held};
use crate::support::{copy_demo, recon_bin, run, DEMO_TIME};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod lost;

const DEADLINE: Duration = Duration::from_secs(20);

/// The tmux channel the pane's shell signals when recon has exited.
const EXITED: &str = "recon-exited";

/// One tmux server on a private socket, with one session running `recon`.
/// Dropping it kills the server and so the console.
pub(crate) struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// Starts `recon ARGS --frozen-clock DEMO_TIME` in a detached session
    /// of `width` x `height`, or returns `None` when tmux is not installed
    /// outside CI.
    fn start(args: &[&str], size: (u16, u16)) -> Option<Tmux> {
        Tmux::start_with_env(&[], args, size)
    }

    /// [`Tmux::start`] with extra environment variables for recon.
    pub(crate) fn start_with_env(env: &[&str], args: &[&str], size: (u16, u16)) -> Option<Tmux> {
        Tmux::launch(env, args, size, true)
    }

    /// [`Tmux::start_with_env`] in a pane whose background tmux knows as
    /// `colour` (`#ffffff`), set in its configuration before recon starts:
    /// tmux then answers an OSC 11 question with it, as a terminal does.
    fn start_on_background(
        env: &[&str],
        args: &[&str],
        size: (u16, u16),
        colour: &str,
    ) -> Option<Tmux> {
        let config = format!("set-option -g window-style bg={colour}\n");
        Tmux::launch_with(env, args, size, true, &config)
    }

    /// Starts recon under a shell that reports its exit (`under_shell`),
    /// or as the pane's own process, the leader of the pane's session
    /// (which the kernel sends SIGHUP when the pane's terminal hangs up).
    fn launch(env: &[&str], args: &[&str], size: (u16, u16), under_shell: bool) -> Option<Tmux> {
        Tmux::launch_with(env, args, size, under_shell, "")
    }

    /// [`Tmux::launch`] with tmux's configuration file holding `config`
    /// (none when empty).
    fn launch_with(
        env: &[&str],
        args: &[&str],
        (width, height): (u16, u16),
        under_shell: bool,
        config: &str,
    ) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "tmux is needed for the real-terminal tests in CI"
            );
            eprintln!("tmux is not installed: the real-terminal console test did not run");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("recon-tmux-")
            .tempdir()
            .expect("temp dir");
        let tmux = Tmux {
            socket: dir.path().join("sock"),
            _dir: dir,
        };
        // A shell runs recon, prints its exit status on the normal screen
        // (where it shows once the console has restored the terminal),
        // signals the channel `recon-exited`, and then stays, so that the
        // pane keeps showing what recon left behind. tmux's own record of
        // a dead pane is not used: it sometimes leaves a finished child
        // unreaped, and it redraws a dead pane.
        let script = format!(
            r#""$0" "$@"; echo "recon exited with $?"; tmux wait-for -S {EXITED}; exec tmux wait-for {EXITED}-never"#
        );
        let mut command = match under_shell {
            true => vec!["sh".to_string(), "-c".to_string(), script],
            false => Vec::new(),
        };
        command.push("env".to_string());
        command.extend(env.iter().map(|e| e.to_string()));
        command.push(recon_bin().display().to_string());
        command.extend(args.iter().map(|a| a.to_string()));
        // The clock the headless goldens are rendered on, so that the ages
        // on screen are theirs.
        command.extend(["--frozen-clock".to_string(), DEMO_TIME.to_string()]);
        let (w, h) = (width.to_string(), height.to_string());
        let config_file = match config {
            "" => "/dev/null".to_string(),
            text => {
                let path = tmux._dir.path().join("tmux.conf");
                std::fs::write(&path, text).expect("write tmux.conf");
                path.display().to_string()
            }
        };
        let mut new_session = vec![
            "-f",
            &config_file,
            "new-session",
            "-d",
            "-s",
            "recon",
            "-x",
            &w,
            "-y",
            &h,
        ];
        new_session.extend(command.iter().map(String::as_str));
        tmux.ok(&new_session);
        Some(tmux)
    }

    /// Waits (bounded) for recon to exit, then returns the screen it left,
    /// which ends with the line that gives its exit status.
    #[track_caller]
    fn wait_for_exit(&self) -> String {
        let waited = Command::new("timeout")
            .arg(DEADLINE.as_secs().to_string())
            .arg("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["wait-for", EXITED])
            .stdin(Stdio::null())
            .status()
            .expect("run timeout tmux wait-for");
        assert!(
            waited.success(),
            "recon did not exit; last screen:\n{}",
            self.screen()
        );
        self.shows("recon exited with")
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run tmux")
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.tmux(args);
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Presses keys by tmux's names (`j`, `Enter`, `Escape`, `Space`).
    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "recon"];
        args.extend_from_slice(keys);
        self.ok(&args);
    }

    /// Types text literally.
    pub(crate) fn type_text(&self, text: &str) {
        self.ok(&["send-keys", "-t", "recon", "-l", text]);
    }

    pub(crate) fn screen(&self) -> String {
        self.ok(&["capture-pane", "-p", "-t", "recon"])
    }

    /// Waits until the screen shows `text`, and returns the screen.
    #[track_caller]
    pub(crate) fn shows(&self, text: &str) -> String {
        self.wait_until(&format!("\"{text}\""), |screen| screen.contains(text))
    }

    /// Waits until one screen shows every one of `texts`, and returns it.
    /// A screen is captured while tmux may still be applying a frame, so
    /// texts in different places are waited for together, never asserted
    /// on a capture taken for one of them.
    #[track_caller]
    pub(crate) fn shows_all(&self, texts: &[&str]) -> String {
        self.wait_until(&format!("{texts:?}"), |screen| {
            texts.iter().all(|text| screen.contains(text))
        })
    }

    /// Presses keys, then waits until the screen shows `text`.
    #[track_caller]
    pub(crate) fn press_until_shown(&self, keys: &[&str], text: &str) {
        self.keys(keys);
        self.shows(text);
    }

    /// Reads the pane until `accept` holds for it; fails after the deadline
    /// with the last screen.
    #[track_caller]
    pub(crate) fn wait_until(&self, what: &str, accept: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if accept(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the terminal never showed {what}; last screen:\n{screen}"
            );
        }
    }

    /// Waits until the pane shows the golden `name`, with the workspace
    /// path masked as the golden tests mask it.
    #[track_caller]
    fn expect_golden(&self, name: &str, workspace: &Path) {
        let golden = std::fs::read_to_string(screenshots_dir().join(format!("{name}.txt")))
            .expect("read golden");
        let expected = normalize(&golden);
        let screen = self.wait_until(&format!("screenshots/{name}.txt"), |screen| {
            normalize(&mask(screen, workspace)) == expected
        });
        assert_eq!(normalize(&mask(&screen, workspace)), expected);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// Replaces the workspace path with the marker the goldens carry, padded to
/// the path's width as the headless mask pads it.
fn mask(screen: &str, workspace: &Path) -> String {
    let path = workspace.display().to_string();
    let marker = format!("{:<width$}", "<workspace>", width = path.chars().count());
    screen.replacen(&path, &marker, 1)
}

/// Trailing spaces and trailing blank lines carry nothing a person sees.
fn normalize(screen: &str) -> String {
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    lines[..end].join("\n")
}

/// A fresh workspace holding `recon demo`'s showcase, in its own temp dir
/// (a copy of the one demo built per test process; `recon demo` itself is
/// proved in `demo` and `console`).
fn demo_workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("recon-tty-")
        .tempdir()
        .expect("temp dir");
    let ws = dir.path().join("ws");
    copy_demo(0, &ws);
    (dir, ws)
}

#[test]
fn the_real_terminal_shows_the_golden_screens_and_is_restored_on_quit() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg], (120, 40)) else {
        return;
    };
    tmux.expect_golden("queue", &ws);
    tmux.keys(&["?"]);
    tmux.expect_golden("help", &ws);
    tmux.keys(&["Escape"]);
    tmux.expect_golden("queue", &ws);
    tmux.keys(&["j", "j", "j", "j"]);
    tmux.expect_golden("duplicate_matches", &ws);
    tmux.keys(&["Down"]);
    tmux.expect_golden("payload_mismatch", &ws);

    // Resizing below 80x24 asks for room; growing back redraws the screen.
    tmux.ok(&["resize-window", "-t", "recon", "-x", "70", "-y", "20"]);
    tmux.expect_golden("too_small", &ws);
    tmux.ok(&["resize-window", "-t", "recon", "-x", "120", "-y", "40"]);
    tmux.expect_golden("payload_mismatch", &ws);

    // A text field edits at its cursor: the keys as a terminal sends them.
    tmux.press_until_shown(&["g", "/"], "search: /");
    tmux.type_text("chrg");
    tmux.keys(&["Home", "Right", "Right"]);
    tmux.type_text("a");
    tmux.keys(&["End", "BSpace", "Left", "DC"]);
    tmux.type_text("rge");
    tmux.keys(&["Left", "Left"]);
    tmux.expect_golden("search_cursor", &ws);
    tmux.keys(&["Escape"]);
    tmux.expect_golden("queue", &ws);

    // The layout follows the terminal: a short queue over the operation at
    // 80x24, two columns of panels at 200 columns.
    tmux.ok(&["resize-window", "-t", "recon", "-x", "80", "-y", "24"]);
    tmux.expect_golden("queue_80x24", &ws);
    tmux.ok(&["resize-window", "-t", "recon", "-x", "200", "-y", "50"]);
    tmux.keys(&["5", "j", "j", "j", "j", "j", "j"]);
    tmux.expect_golden("queue_200x50", &ws);
    tmux.keys(&["1"]);
    tmux.ok(&["resize-window", "-t", "recon", "-x", "120", "-y", "40"]);
    tmux.expect_golden("queue", &ws);

    // The reviewer is asked for before the first mutation.
    tmux.press_until_shown(&["g", "j", "j", "x"], "Who is reviewing?");
    tmux.type_text("ada");
    tmux.keys(&["Enter"]);
    tmux.expect_golden("closing_confirmation", &ws);
    tmux.press_until_shown(&["Escape"], "cancelled; nothing was written");

    tmux.keys(&["q"]);
    let after = tmux.wait_for_exit();
    assert!(after.contains("recon exited with 0"), "{after}");
    assert!(
        !after.contains("recon review console") && !after.contains("Queue"),
        "the alternate screen was left on quit:\n{after}"
    );
}

#[test]
fn the_real_terminal_shows_bulk_triage_and_compensation_as_the_goldens_do() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "ada"], (120, 40)) else {
        return;
    };
    tmux.shows("reviewer: ada");
    tmux.press_until_shown(
        &["Space", "Space", "Space", "j", "j", "Space", "c"],
        "marked operations",
    );
    tmux.keys(&["y"]);
    tmux.expect_golden("bulk_result", &ws);

    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let Some(tmux) = Tmux::start(
        &["--workspace", ws_arg, "--reviewer", "lee.finance"],
        (120, 40),
    ) else {
        return;
    };
    tmux.shows("reviewer: lee.finance");
    tmux.keys(&["3", "a"]);
    tmux.expect_golden("compensation_form", &ws);
    tmux.keys(&["Enter"]);
    tmux.expect_golden("compensation_confirmation", &ws);
}

/// A registered adapter holds its read: the real terminal keeps taking keys
/// meanwhile, shows the verdict when the read lands without a key press,
/// and quits while a read waits. The screens are the adapter goldens.
#[test]
fn the_real_terminal_keeps_taking_keys_while_an_adapter_read_waits() {
    let mut held = Held::new(false, &["op-held-1"]);
    held.lab.dispatched(
        "op-local-1",
        "send_email",
        &serde_json::json!({"to": "bob"}),
        Some(recon::receiver::Fault::CrashAfterCommit),
    );
    let ws = held.lab.path().to_path_buf();
    let args = ["--workspace", ws.to_str().unwrap(), "--reviewer", "ada"];
    let Some(tmux) = Tmux::start(&args, (80, 24)) else {
        return;
    };
    tmux.shows("Snapshot: reading held…");
    tmux.press_until_shown(&["j"], ">   op-local-1");
    tmux.press_until_shown(&["k", "?"], "Help: every key");
    tmux.press_until_shown(&["Escape"], "Snapshot: reading held…");
    held.answer(&held_answer("op-held-1", 1, false));
    tmux.shows("Verdict: exact_match_existence_only");
    tmux.keys(&["n"]);
    tmux.expect_golden("adapter_cannot_close", &ws);
    tmux.keys(&["s"]);
    tmux.expect_golden("adapter_reading", &ws);

    tmux.keys(&["q"]);
    let after = tmux.wait_for_exit();
    assert!(after.contains("recon exited with 0"), "{after}");
    // The read recon left behind ends when held answers.
    held.answer(&held_answer("op-held-1", 1, false));
}

/// Without a terminal the console says so in one line, exits 2, writes no
/// escape sequence to the pipe, and builds no demo workspace.
#[test]
fn the_console_without_a_terminal_says_so_and_draws_nothing() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    for args in [
        vec!["--workspace", ws_arg],
        vec![],
        vec!["console", "--workspace", ws_arg, "--reviewer", "ada"],
        vec!["console"],
    ] {
        let out = run(&args, None);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(
            out.stderr.contains("the review console needs a terminal"),
            "{}",
            out.stderr
        );
    }
}

/// What a new user does after `cargo run --release`: the console opens on a
/// temporary demo workspace, and with the keys of the help alone they take
/// a closing snapshot, record not_applied, approve a compensation and
/// dispatch it. Quitting removes the temporary workspace.
#[test]
fn a_new_user_closes_decides_approves_and_dispatches_in_the_temporary_demo() {
    let Some(tmux) = Tmux::start(&[], (120, 40)) else {
        return;
    };
    let first = tmux.shows("TEMPORARY DEMO");
    let title = first.lines().next().unwrap_or_default();
    let demo = PathBuf::from(title.split_whitespace().last().unwrap_or_default());
    assert!(demo.join("sender.sqlite").exists(), "{title}");

    // op-1004 has no effect on an open read: close it, then not_applied.
    tmux.press_until_shown(&["j", "j", "x"], "Who is reviewing?");
    tmux.type_text("Ada");
    tmux.press_until_shown(
        &["Enter"],
        "Take a CLOSING snapshot of op-1004-support-ticket, authorized by Ada.",
    );
    tmux.press_until_shown(
        &["y"],
        "closed op-1004-support-ticket (authorized by Ada): terminal_absence",
    );
    tmux.press_until_shown(
        &["n"],
        "Record not_applied for op-1004-support-ticket as reviewer Ada",
    );
    tmux.press_until_shown(
        &["y"],
        "recorded not_applied for op-1004-support-ticket on terminal_absence",
    );

    // A confirmed original: approve its compensation with the defaults.
    tmux.press_until_shown(&["3", "a"], "Approve compensation");
    tmux.press_until_shown(
        &["Enter"],
        "Approve compensation op-1001-welcome-email-undo for effect fx-000001",
    );
    tmux.press_until_shown(&["y"], "approved op-1001-welcome-email-undo for fx-000001");

    // It waits under prepared; dispatch it once.
    tmux.press_until_shown(&["2"], ">   op-1001-welcome-email-undo");
    tmux.press_until_shown(
        &["d"],
        "Dispatch op-1001-welcome-email-undo (undo_send_email) now",
    );
    tmux.press_until_shown(&["y"], "dispatched op-1001-welcome-email-undo: receipt for");

    tmux.keys(&["q"]);
    let after = tmux.wait_for_exit();
    assert!(after.contains("recon exited with 0"), "{after}");
    assert!(!demo.exists(), "{} was left behind", demo.display());
}

/// `v` on a filtered queue in the real terminal: every operation the
/// verdict filter shows is marked, far more than the screen holds, and the
/// status and the confirmation give the exact count `recon ops` gives.
#[test]
fn the_real_terminal_marks_every_operation_a_filter_shows_with_the_exact_count() {
    let dir = tempfile::Builder::new()
        .prefix("recon-tty-")
        .tempdir()
        .expect("temp dir");
    let ws = dir.path().join("ws");
    copy_demo(500, &ws);
    let ws_arg = ws.to_str().unwrap();
    let mut never = 0;
    let mut after: Option<String> = None;
    loop {
        let mut args = vec!["ops", "--workspace", ws_arg, "--state", "unknown"];
        args.extend(["--verdict", "never", "--limit", "100", "--json"]);
        if let Some(cursor) = &after {
            args.extend(["--after", cursor.as_str()]);
        }
        let page = run(&args, None).json();
        let rows = page.as_array().cloned().unwrap_or_default();
        let Some(last) = rows.last() else { break };
        after = last["cursor"].as_str().map(str::to_string);
        never += rows.len();
    }
    assert!(never > 100, "{never}");
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "ada"], (120, 40)) else {
        return;
    };
    tmux.shows("reviewer: ada");
    tmux.press_until_shown(&["f"], "[f verdict never]");
    tmux.press_until_shown(
        &["v"],
        &format!("marked all {never} operations the filter shows"),
    );
    tmux.shows(&format!("{never} marked"));
    tmux.press_until_shown(
        &["c"],
        &format!("Record confirmed for each of these {never} marked operations"),
    );
    tmux.keys(&["Escape"]);
    tmux.shows_all(&["cancelled; nothing was written", &format!("{never} marked")]);
}

/// A note from the keys in the real terminal: the form takes the text,
/// Enter records it as the reviewer, and the history panel shows it with
/// its time, as `recon show` does.
#[test]
fn the_real_terminal_leaves_a_note_that_the_history_shows() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "ada"], (120, 40)) else {
        return;
    };
    tmux.shows("reviewer: ada");
    tmux.press_until_shown(&["m"], "Note op-1002-invoice-email");
    tmux.type_text("called the customer");
    tmux.press_until_shown(&["Enter"], "left on op-1002-invoice-email by ada");
    tmux.shows("12-03 08:00Z note by ada: called the customer");
    let show = run(
        &[
            "show",
            "--workspace",
            ws_arg,
            "op-1002-invoice-email",
            "--json",
        ],
        None,
    )
    .json();
    assert_eq!(show["notes"][0]["by"], "ada");
    assert_eq!(show["notes"][0]["text"], "called the customer");
    assert_eq!(show["notes"][0]["at"], DEMO_TIME);
}

/// A panic (here the documented `console.panic` drill, on the first key)
/// restores the terminal before anything is printed: the screen shows one
/// line and no backtrace, and recon exits 4.
#[test]
fn a_panic_in_the_console_restores_the_terminal_and_prints_one_line() {
    let (_dir, ws) = demo_workspace();
    let Some(tmux) = Tmux::start_with_env(
        &["RECON_CRASH_POINT=console.panic", "RUST_BACKTRACE=1"],
        &["--workspace", ws.to_str().unwrap()],
        (120, 40),
    ) else {
        return;
    };
    tmux.expect_golden("queue", &ws);
    tmux.keys(&["j"]);
    let after = tmux.wait_for_exit();
    assert!(after.contains("recon exited with 4"), "{after}");
    let printed: Vec<&str> = after.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(printed.len(), 2, "{after}");
    assert!(
        printed[0].starts_with("error: internal error at src/")
            && printed[0].ends_with("please report it"),
        "{after}"
    );
}

/// The number just before `marker` on the screen, if it shows one.
fn number_before(screen: &str, marker: &str) -> Option<usize> {
    let at = screen.find(marker)?;
    let digits: String = screen[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

/// The op id on the cursor's row (the one marked `>`).
pub(crate) fn cursor_row(screen: &str) -> Option<String> {
    screen.lines().find_map(|line| {
        let row = line.split('│').nth(1)?;
        let rest = row.strip_prefix('>')?;
        rest.trim_start_matches(['*', ' '])
            .split_whitespace()
            .next()
            .map(str::to_string)
    })
}

/// How many operations `recon ops --json` lists in each state.
fn states_by_cli(ws: &str) -> std::collections::BTreeMap<String, usize> {
    let out = run(
        &["ops", "--workspace", ws, "--json", "--limit", "1000000"],
        None,
    )
    .json();
    let mut states = std::collections::BTreeMap::new();
    for op in out.as_array().expect("ops --json is a list") {
        *states
            .entry(op["state"].as_str().unwrap_or_default().to_string())
            .or_insert(0) += 1;
    }
    states
}

/// A bulk decision over more than 20,000 marked operations of a
/// 100,000-operation outbox in the real terminal: it runs off the key
/// loop, so the cursor moves and the progress advances on screen while it
/// runs; Esc stops it after the operation in hand, and the report counts
/// exactly the operations that `recon ops` then shows decided.
#[test]
fn the_real_terminal_moves_and_cancels_while_a_bulk_of_twenty_thousand_runs() {
    let dir = tempfile::Builder::new()
        .prefix("recon-tty-")
        .tempdir()
        .expect("temp dir");
    let ws = dir.path().join("ws");
    copy_demo(100_000, &ws);
    let ws_arg = ws.to_str().unwrap();
    let before = states_by_cli(ws_arg);
    assert!(before["unknown"] >= 100_000, "{before:?}");
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "ada"], (200, 50)) else {
        return;
    };
    tmux.shows("reviewer: ada");
    // The generated operations op-bulk-0000001 .. op-bulk-0099999, found by
    // a search and marked: a bulk far past 20,000, within v's bound.
    tmux.press_until_shown(&["/"], "search: /");
    tmux.type_text("op-bulk-00");
    tmux.keys(&["Enter"]);
    tmux.shows("op-bulk-0000001");
    tmux.keys(&["v"]);
    let marked_screen = tmux.shows(" operations the filter shows");
    let unknown =
        number_before(&marked_screen, " operations the filter shows").expect("how many v marked");
    assert!(unknown >= 20_000, "{marked_screen}");
    tmux.press_until_shown(
        &["c"],
        &format!("Record confirmed for each of these {unknown} marked operations"),
    );
    tmux.keys(&["y"]);
    let progress = format!(" of {unknown} (");
    let first = tmux.wait_until("the bulk's progress", |screen| {
        number_before(screen, &progress).is_some_and(|done| done > 0)
    });
    let done = number_before(&first, &progress).unwrap_or_default();
    let row = cursor_row(&first).expect("a cursor row");
    tmux.keys(&["j"]);
    let moved = tmux.wait_until("the cursor moving while the bulk runs", |screen| {
        cursor_row(screen).is_some_and(|r| r != row) && screen.contains(&progress)
    });
    tmux.wait_until("the progress advancing", |screen| {
        number_before(screen, &progress).is_some_and(|now| now > done)
    });
    assert!(moved.contains("Esc cancels"), "{moved}");
    // Some operations are done and most are not: it says about how long
    // the rest will take.
    assert!(moved.contains(" left) · Esc cancels"), "{moved}");
    tmux.keys(&["Escape"]);
    let title = "bulk record confirmed: ";
    let report = tmux.shows("not attempted (cancelled)");
    let line = report
        .lines()
        .find(|l| l.contains(title))
        .expect("the report's title");
    let counts = &line[line.find(title).unwrap_or(0) + title.len()..];
    let recorded = number_before(counts, " recorded").expect("recorded");
    let refused = number_before(counts, " refused").expect("refused");
    let skipped = number_before(counts, " not attempted").expect("not attempted");
    assert!(skipped > 0, "{line}");
    assert_eq!(recorded + refused + skipped, unknown, "{line}");
    let after = states_by_cli(ws_arg);
    assert_eq!(
        after["unknown"],
        before["unknown"] - recorded,
        "{line}: {after:?}"
    );
    assert_eq!(
        after["confirmed"],
        before["confirmed"] + recorded,
        "{line}: {after:?}"
    );
}

/// A confirmation open in the real terminal while the command line decides
/// its operation: the console sees the other process's commit without a
/// key press, and the dialog says so and closes without writing anything
/// (a decision that reaches the library stale anyway is refused
/// `stale_version`, as the headless golden shows).
#[test]
fn the_real_terminal_dialog_says_so_when_the_command_line_decides_its_operation() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "ada"], (120, 40)) else {
        return;
    };
    tmux.shows("op-1002-invoice-email");
    tmux.press_until_shown(&["c"], "Record confirmed for op-1002-invoice-email");
    bob_confirms_the_invoice_email(ws_arg);
    let said = [
        "record confirmed: closed, its operation changed",
        "record confirmed closed, nothing written: op-1002-invoice-email decided by bob",
        "op-1002-invoice-email: decided by bob, journal entry",
        "now confirmed at version 3",
        "[1 unknown 7]",
    ];
    tmux.wait_until("the dialog closed with its reason", |screen| {
        said.iter().all(|text| screen.contains(text))
    });
}

/// An outbox on the test cluster, prefixed `prefix`, holding `op-db-1`
/// whose receipt was lost, made through the command line as its owner;
/// its URL, and the directory of the adapter's state.
fn lost_on_a_database(
    pg: &crate::real_receivers::servers::Postgres,
    prefix: &str,
) -> (String, tempfile::TempDir) {
    let url = crate::pg_store::initialized(pg, prefix);
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("mail.json").display().to_string();
    let adapter = crate::support::adapter_fixture().display().to_string();
    for args in [
        &[
            "receivers",
            "add",
            "mail",
            "--database",
            &url,
            "--actions",
            "post_letter",
            "--",
            &adapter,
            "--state",
            &state,
            "--mode",
            "apply:crash-after",
            "--can-close",
            "--complete",
            "--authoritative",
        ][..],
        &[
            "prepare",
            "--database",
            &url,
            "--op",
            "op-db-1",
            "--action",
            "post_letter",
            "--payload",
            "{}",
        ],
        &["dispatch", "--database", &url, "op-db-1"],
    ] {
        let out = run(args, None);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
    }
    (url, dir)
}

#[test]
fn the_console_on_a_database_shows_its_operation_in_a_real_terminal_and_headless_and_quits() {
    use crate::real_receivers::servers;
    let test =
        "the_console_on_a_database_shows_its_operation_in_a_real_terminal_and_headless_and_quits";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let (url, _state) = lost_on_a_database(pg, "console");
    // Headless, the same console on the same database.
    let screenshot = run(&["screenshot", "--database", &url], None);
    assert_eq!(screenshot.code, Some(0), "{}", screenshot.stderr);
    assert!(
        screenshot.stdout.contains("op-db-1"),
        "{}",
        screenshot.stdout
    );
    let variable = format!("RECON_DATABASE_URL={url}");
    let Some(tmux) = Tmux::start_with_env(&[&variable], &["--reviewer", "ada"], (120, 40)) else {
        return;
    };
    tmux.shows_all(&["op-db-1", &format!("database: {url}")]);
    tmux.keys(&["q"]);
    let after = tmux.wait_for_exit();
    assert!(after.contains("recon exited with 0"), "{after}");
}

/// In team mode the console knows who is reviewing (SPEC 10): the
/// database login, shown from the start; a note goes straight to its form
/// without asking a name, is recorded as the login's, and the history
/// shows the role beside the name.
#[test]
fn the_console_in_team_mode_does_not_ask_the_name_it_knows() {
    use crate::real_receivers::servers;
    let test = "the_console_in_team_mode_does_not_ask_the_name_it_knows";
    let Some(pg) = servers::require(test, servers::postgres()) else {
        return;
    };
    let (url, _state) = lost_on_a_database(pg, "console_login");
    let rita = crate::pg_store::roles::login(pg, &url, "console_rita", &["recon_reviewer"]);
    let Some(tmux) = Tmux::start(&["--database", &rita], (120, 40)) else {
        return;
    };
    tmux.shows("reviewer: console_rita");
    tmux.press_until_shown(&["m"], "Note op-db-1");
    assert!(!tmux.screen().contains("Who is reviewing?"));
    tmux.type_text("called the customer");
    tmux.press_until_shown(&["Enter"], "left on op-db-1 by console_rita");
    // The history wraps after "the".
    tmux.shows("note by console_rita (role console_rita): called the");
    let show = run(&["show", "--database", &rita, "op-db-1", "--json"], None).json();
    assert_eq!(show["notes"][0]["by"], "console_rita", "{show}");
    assert_eq!(show["notes"][0]["role"], "console_rita", "{show}");
}

// ---- what the reviewer saw (issue 30) -----------------------------------------------

/// An operation's state and version, and how many evidence rows it has,
/// as `recon show --json` gives them.
fn op_record(ws: &str, op_id: &str) -> (String, i64, usize) {
    let show = run(&["show", "--workspace", ws, op_id, "--json"], None).json();
    let state = show["operation"]["state"].as_str().unwrap_or_default();
    let version = show["operation"]["version"].as_i64().unwrap_or_default();
    let evidence = show["evidence"].as_array().map_or(0, Vec::len);
    (state.to_string(), version, evidence)
}

/// Below 80x24 the screen only asks for room, so keys that would decide
/// are ignored: `j c y` and `j n y` at 60x20 record nothing, and once the
/// terminal fits again the status line says how many keys were ignored.
#[test]
fn keys_at_60x20_change_nothing_and_are_counted_when_the_screen_fits_again() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let before = states_by_cli(ws_arg);
    let watched = ["op-1003-charge-order", "op-1004-support-ticket"];
    let records: Vec<_> = watched.iter().map(|id| op_record(ws_arg, id)).collect();
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "ada"], (120, 40)) else {
        return;
    };
    tmux.shows("reviewer: ada");
    tmux.ok(&["resize-window", "-t", "recon", "-x", "60", "-y", "20"]);
    tmux.shows("needs a terminal of at least 80x24");
    tmux.keys(&["j", "c", "y", "j", "n", "y"]);
    tmux.ok(&["resize-window", "-t", "recon", "-x", "120", "-y", "40"]);
    tmux.shows("6 keys ignored below 80x24");
    assert_eq!(states_by_cli(ws_arg), before);
    for (id, record) in watched.iter().zip(&records) {
        assert_eq!(&op_record(ws_arg, id), record, "{id}");
    }
    // Nothing else was waiting to act: the cursor never moved either.
    assert_eq!(
        cursor_row(&tmux.screen()).as_deref(),
        Some("op-1002-invoice-email")
    );
}

/// A confirmation opened at 100x32 closes, with nothing written, when the
/// window shrinks below what it needs: `y` pressed while it is small, and
/// again once it fits, records nothing.
#[test]
fn a_dialog_then_a_shrink_then_y_changes_nothing() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let record = op_record(ws_arg, "op-1003-charge-order");
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "ada"], (100, 32)) else {
        return;
    };
    tmux.shows("reviewer: ada");
    tmux.press_until_shown(&["j", "c"], "Record confirmed for op-1003-charge-order");
    tmux.ok(&["resize-window", "-t", "recon", "-x", "60", "-y", "20"]);
    tmux.shows("needs a terminal of at least 80x24");
    tmux.keys(&["y"]);
    tmux.ok(&["resize-window", "-t", "recon", "-x", "120", "-y", "40"]);
    let screen = tmux.shows("the record confirmed dialog closed, too small to show");
    assert!(screen.contains("1 key ignored below 80x24"), "{screen}");
    assert!(!screen.contains("Record confirmed for"), "{screen}");
    tmux.keys(&["y"]);
    tmux.press_until_shown(&["?"], "Help: every key");
    assert_eq!(op_record(ws_arg, "op-1003-charge-order"), record);
}

/// Pasted text is text, never keys: a bracketed paste of `copy yes` in the
/// queue (whose `c` would open the confirmation and `y` carry it out) is
/// dropped with a word, and in the search field it is typed.
#[test]
fn a_bracketed_paste_of_copy_yes_changes_nothing() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let before = states_by_cli(ws_arg);
    let record = op_record(ws_arg, "op-1002-invoice-email");
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "ada"], (120, 40)) else {
        return;
    };
    tmux.shows("reviewer: ada");
    tmux.ok(&["set-buffer", "-b", "pasted", "copy yes"]);
    tmux.ok(&["paste-buffer", "-p", "-b", "pasted", "-t", "recon"]);
    let screen = tmux.shows("a paste of 8 characters was dropped");
    assert!(!screen.contains("Confirm:"), "{screen}");
    assert_eq!(states_by_cli(ws_arg), before);
    assert_eq!(op_record(ws_arg, "op-1002-invoice-email"), record);
    // In a text field the same paste is what the reviewer typed.
    tmux.ok(&["set-buffer", "-b", "pasted", "charge"]);
    tmux.press_until_shown(&["/"], "search: /");
    tmux.ok(&["paste-buffer", "-p", "-b", "pasted", "-t", "recon"]);
    tmux.shows("search: /charge");
}

/// A confirmation is bound to everything about its operation, not only its
/// version: another reviewer's note and escalation from the command line
/// close it, `y` then records nothing, and the screen says what changed
/// and who changed it.
#[test]
fn a_note_or_an_escalation_by_the_command_line_closes_an_open_confirm_dialog() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let id = "op-1002-invoice-email";
    let record = op_record(ws_arg, id);
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "ada"], (120, 40)) else {
        return;
    };
    tmux.shows("reviewer: ada");
    tmux.press_until_shown(&["c"], "Record confirmed for op-1002-invoice-email");
    for args in [
        &[
            "note",
            "--workspace",
            ws_arg,
            id,
            "--by",
            "bob",
            "--text",
            "looks odd",
        ][..],
        &[
            "escalate",
            "--workspace",
            ws_arg,
            id,
            "--by",
            "bob",
            "--reason",
            "looks odd",
        ],
    ] {
        let out = run(args, None);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
    }
    tmux.keys(&["y"]);
    let screen = tmux.wait_until("the dialog closed with what changed", |screen| {
        screen.contains("record confirmed closed, nothing written: op-1002-invoice-email")
            && screen.contains(" by bob")
    });
    assert!(
        screen.contains("noted by bob") || screen.contains("escalated by bob"),
        "{screen}"
    );
    assert_eq!(op_record(ws_arg, id), record);
    let show = run(&["show", "--workspace", ws_arg, id, "--json"], None).json();
    assert_eq!(
        show["escalations"].as_array().map(Vec::len),
        Some(1),
        "{show}"
    );
    assert_eq!(show["operation"]["escalated"]["by"], "bob", "{show}");
}

/// `recon console` is the bare `recon` under the name users type first,
/// with the same flags, and says so in its help.
#[test]
fn recon_console_is_the_bare_recon_with_the_same_flags() {
    let help = run(&["console", "--help"], None);
    assert_eq!(help.code, Some(0), "{}", help.stderr);
    assert!(
        help.stdout.contains("the same as `recon` with no command"),
        "{}",
        help.stdout
    );
    for flag in [
        "--workspace",
        "--database",
        "--reviewer",
        "--theme",
        "RECON_THEME",
    ] {
        assert!(help.stdout.contains(flag), "{flag}: {}", help.stdout);
    }
    let top = run(&["--help"], None);
    assert!(top.stdout.contains("console"), "{}", top.stdout);
    let misplaced = run(&["--reviewer", "ada", "console"], None);
    assert_eq!(misplaced.code, Some(2), "{}", misplaced.stderr);
    assert!(
        misplaced.stderr.contains("recon console --reviewer NAME"),
        "{}",
        misplaced.stderr
    );
    let top_help = run(&["--help"], None);
    for text in ["--theme", "RECON_THEME"] {
        assert!(
            top_help.stdout.contains(text),
            "{text}: {}",
            top_help.stdout
        );
    }
    for (args, says) in [
        (
            &["--theme", "dark", "console"][..],
            "recon console --theme light|dark",
        ),
        (&["--theme", "dark", "ops"], "--theme is the console's"),
        (&["console", "--theme", "grey"], "grey"),
    ] {
        let out = run(args, None);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
}

/// A console on the demo (`command`, then the workspace and reviewer ada)
/// whose bulk confirmation of three marked operations holds at its first
/// decision (`store.after_check`): the session, and the writer on the
/// fifo that releases the hold. `None` where tmux cannot start.
fn bulk_of_three_held(dir: &Path, ws_arg: &str, command: &[&str]) -> Option<(Tmux, std::fs::File)> {
    let fifo = dir.join("hold");
    crate::support::mkfifo(&fifo);
    let hold = format!("RECON_HOLD_FIFO={}", fifo.display());
    let args = [command, &["--workspace", ws_arg, "--reviewer", "ada"]].concat();
    let env = ["RECON_HOLD_POINT=store.after_check", hold.as_str()];
    let tmux = Tmux::start_with_env(&env, &args, (120, 40))?;
    tmux.shows("reviewer: ada");
    tmux.press_until_shown(
        &["Space", "Space", "Space", "c"],
        "Record confirmed for each of these 3 marked operations",
    );
    tmux.keys(&["y"]);
    let release = held_at(&fifo);
    Some((tmux, release))
}

/// Makes a fifo and returns a writer on it once `recon` holds there
/// (opening for writing without blocking succeeds only once a reader has
/// it open), polling within the deadline.
fn held_at(fifo: &Path) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let start = Instant::now();
    loop {
        if let Ok(file) = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            return file;
        }
        assert!(start.elapsed() < DEADLINE, "recon never held at the fifo");
    }
}

/// The pid of the `recon` the pane's shell runs (its one child).
fn recon_pid(tmux: &Tmux) -> String {
    let shell = tmux.ok(&["display-message", "-p", "-t", "recon", "#{pane_pid}"]);
    let shell = shell.trim();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
        .expect("the pane shell's children");
    children
        .split_whitespace()
        .next()
        .expect("recon")
        .to_string()
}

/// A SIGTERM while a bulk decision runs does what a confirmed quit does,
/// without asking: the job stops after the decision in hand, and the
/// report printed after the console has left the terminal agrees with
/// `recon ops --json`.
#[test]
fn sigterm_during_a_bulk_stops_it_and_prints_the_report_after_exit() {
    let (dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let before = states_by_cli(ws_arg);
    let Some((tmux, mut release)) = bulk_of_three_held(dir.path(), ws_arg, &[]) else {
        return;
    };
    let killed = Command::new("kill")
        .args(["-TERM", &recon_pid(&tmux)])
        .status()
        .expect("kill");
    assert!(killed.success());
    tmux.shows("cancelling after the operation in hand");
    std::io::Write::write_all(&mut release, b"go\n").expect("release the hold");
    drop(release);
    let after = tmux.wait_for_exit();
    assert!(after.contains("recon exited with 0"), "{after}");
    let line = after
        .lines()
        .find(|l| l.contains("recon console: bulk record confirmed: "))
        .unwrap_or_else(|| panic!("no report was printed:\n{after}"));
    let recorded = number_before(line, " recorded").expect("recorded");
    let skipped = number_before(line, " not attempted").expect("not attempted");
    assert!(recorded >= 1 && skipped >= 1, "{line}");
    let now = states_by_cli(ws_arg);
    assert_eq!(
        now["confirmed"],
        before["confirmed"] + recorded,
        "{line}: {now:?}"
    );
}

/// `q` while a bulk decision runs asks first; on yes the job stops after
/// the decision in hand (held under the write lock by the documented hold
/// drill), and the report printed after the console has left the terminal
/// counts exactly what `recon ops --json` then shows.
#[test]
fn q_during_a_bulk_asks_and_the_report_printed_after_exit_agrees_with_ops() {
    let (dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let before = states_by_cli(ws_arg);
    // The first decision that passes its checks holds under the write lock.
    let Some((tmux, mut release)) = bulk_of_three_held(dir.path(), ws_arg, &["console"]) else {
        return;
    };
    tmux.press_until_shown(&["q"], "Quit now?");
    tmux.press_until_shown(&["y"], "cancelling after the operation in hand");
    std::io::Write::write_all(&mut release, b"go\n").expect("release the hold");
    drop(release);
    let after = tmux.wait_for_exit();
    assert!(after.contains("recon exited with 0"), "{after}");
    let title = "recon console: bulk record confirmed: ";
    let line = after
        .lines()
        .find(|l| l.contains(title))
        .unwrap_or_else(|| panic!("no report was printed:\n{after}"));
    let counts = &line[line.find(title).unwrap_or(0) + title.len()..];
    let recorded = number_before(counts, " recorded").expect("recorded");
    let refused = number_before(counts, " refused").expect("refused");
    let skipped = number_before(counts, " not attempted").expect("not attempted");
    assert!(recorded >= 1 && skipped >= 1, "{line}");
    assert_eq!(recorded + refused + skipped, 3, "{line}");
    let now = states_by_cli(ws_arg);
    assert_eq!(
        now["unknown"],
        before["unknown"] - recorded,
        "{line}: {now:?}"
    );
    assert_eq!(
        now["confirmed"],
        before["confirmed"] + recorded,
        "{line}: {now:?}"
    );
    assert!(
        !after.contains("Queue"),
        "the alternate screen was left:\n{after}"
    );
}

/// A terminal slower than the console's probe answers its background
/// question in the key loop, where crossterm reads the answer as keys (its
/// `/` would open the search, its digits switch filters, its letters
/// act). Typed literally after the first screen, it leaves the console in
/// the queue on its filter and selection, with no search open and nothing
/// recorded, and says so; `j` then still moves.
#[test]
fn a_late_osc_11_answer_in_the_key_loop_acts_on_nothing() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let before = states_by_cli(ws_arg);
    let Some(tmux) = Tmux::start(&["--workspace", ws_arg, "--reviewer", "rita"], (200, 40)) else {
        return;
    };
    let first = tmux.shows_all(&["reviewer: rita", "[1 unknown", "· 1 of"]);
    let selected = cursor_row(&first);
    assert!(selected.is_some(), "{first}");
    tmux.type_text("\x1b]11;rgb:ffff/ffff/ffff\x07");
    let screen = tmux.shows("late answer about its background was dropped");
    for text in ["[1 unknown", "· 1 of"] {
        assert!(screen.contains(text), "{text}:\n{screen}");
    }
    for text in ["search:", "Esc cancel", "Confirm:"] {
        assert!(!screen.contains(text), "{text}:\n{screen}");
    }
    assert_eq!(cursor_row(&screen), selected, "{screen}");
    tmux.keys(&["j"]);
    let moved = tmux.wait_until("the cursor on the second row", |screen| {
        screen.contains("· 2 of") && cursor_row(screen) != selected
    });
    assert!(moved.contains("[1 unknown"), "{moved}");
    assert_eq!(states_by_cli(ws_arg), before);
}

/// A terminal without colours is honoured as `NO_COLOR` is: under
/// `TERM=vt100` or `xterm-mono` the console sends no colour at all, where
/// the same console under a colour TERM does.
#[test]
fn a_term_without_colours_is_honoured_like_no_color() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    // Whether any SGR sequence sets a colour (39 and 49 reset to the
    // terminal's own).
    let coloured = |screen: &str| {
        screen.split("\x1b[").skip(1).any(|seq| {
            let params = seq.split('m').next().unwrap_or_default();
            params.split(';').any(|p| {
                p.parse::<u16>()
                    .is_ok_and(|n| matches!(n, 30..=38 | 40..=48 | 90..=97 | 100..=107))
            })
        })
    };
    for (term, colours) in [
        ("xterm-256color", true),
        ("vt100", false),
        ("xterm-mono", false),
    ] {
        let env = format!("TERM={term}");
        let Some(tmux) = Tmux::start_with_env(&[&env], &["--workspace", ws_arg], (120, 40)) else {
            return;
        };
        tmux.shows("op-1002-invoice-email");
        let screen = tmux.ok(&["capture-pane", "-e", "-p", "-t", "recon"]);
        assert_eq!(coloured(&screen), colours, "TERM={term}:\n{screen:?}");
    }
}

/// The console asks the terminal for its background (OSC 11) as it
/// starts, and draws with the palette for it: tmux answers with the pane's
/// background, white or black, and the unknown states' colour is then the
/// light or the dark palette's; with no answer it is the unknown
/// background's; `RECON_THEME` and `--theme` win over the answer, in that
/// order.
#[test]
fn the_console_draws_with_the_palette_for_the_background_the_terminal_answers() {
    use recon::console::theme::{DARK, LIGHT, UNKNOWN};
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let sgr = |colour: ratatui::style::Color| match colour {
        ratatui::style::Color::Indexed(i) => format!("\x1b[38;5;{i}m"),
        other => panic!("not a cube colour: {other:?}"),
    };
    let term = "TERM=xterm-256color";
    for (background, env, args, palette) in [
        (Some("#ffffff"), &[term][..], &[][..], &LIGHT),
        (Some("#000000"), &[term], &[], &DARK),
        (None, &[term], &[], &UNKNOWN),
        (Some("#ffffff"), &[term, "RECON_THEME=dark"], &[], &DARK),
        (
            Some("#ffffff"),
            &[term, "RECON_THEME=dark"],
            &["--theme", "light"],
            &LIGHT,
        ),
        (None, &[term, "COLORFGBG=15;0"], &[], &DARK),
        (Some("#ffffff"), &[term, "COLORFGBG=15;0"], &[], &LIGHT),
    ] {
        let mut all = vec!["--workspace", ws_arg];
        all.extend_from_slice(args);
        let started = match background {
            Some(colour) => Tmux::start_on_background(env, &all, (120, 40), colour),
            None => Tmux::start_with_env(env, &all, (120, 40)),
        };
        let Some(tmux) = started else {
            return;
        };
        // The status line, the last row drawn.
        tmux.shows("reviewer:");
        let screen = tmux.ok(&["capture-pane", "-e", "-p", "-t", "recon"]);
        let case = format!("{background:?} {env:?} {args:?}");
        assert!(
            screen.contains(&sgr(palette.amber)),
            "{case}: no {:?}:\n{screen:?}",
            palette.amber
        );
        for other in [&LIGHT, &DARK, &UNKNOWN] {
            if other != palette {
                assert!(!screen.contains(&sgr(other.amber)), "{case}:\n{screen:?}");
            }
        }
    }
}

/// An eight-colour terminal (`TERM=xterm`, or tmux's own `screen`) gets
/// no colour at all, even on a background it names: tmux would turn the
/// palette's colours into their nearest ANSI ones.
#[test]
fn an_eight_colour_term_gets_no_colour() {
    let (_dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    for env in [&["TERM=xterm"][..], &["TERM=screen", "RECON_THEME=light"]] {
        let Some(tmux) =
            Tmux::start_on_background(env, &["--workspace", ws_arg], (120, 40), "#ffffff")
        else {
            return;
        };
        // The status line, the last row drawn.
        tmux.shows("reviewer:");
        let screen = tmux.ok(&["capture-pane", "-e", "-p", "-t", "recon"]);
        assert!(!screen.contains("38;5;"), "{env:?}:\n{screen:?}");
        assert!(!screen.contains("48;5;"), "{env:?}:\n{screen:?}");
    }
}
