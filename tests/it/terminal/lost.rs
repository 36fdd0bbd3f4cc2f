//! A console whose terminal goes away ends: its tmux pane killed (the
//! terminal hangs up; recon sees the hangup, and SIGHUP too when it is the
//! pane's own process), with or without a job running, and a second end
//! signal ends it even while a job is held. Each test waits for the
//! process's exit through a pidfd, bounded, and kills what is left on
//! failure, so no console outlives its test.

use super::{bulk_of_three_held, demo_workspace, recon_pid, states_by_cli, Tmux, DEADLINE};
use crate::support::run;
use std::process::Command;
use std::time::Instant;

/// The state letter `/proc/PID/stat` gives, if the process is still there.
fn state(pid: &str) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the state follows
    // the last ")".
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Whether `pid` has exited (gone, or a zombie not reaped yet: recon's
/// parent shell may be gone with the pane), waiting through a pidfd up to
/// the deadline. A process still running then is killed, so that a
/// failing test leaves nothing behind, and the answer is false.
fn exits(pid: &str) -> bool {
    let exited = || state(pid).is_none_or(|s| s == 'Z' || s == 'X');
    let number: libc::pid_t = pid.parse().expect("a pid");
    // SAFETY: pidfd_open takes a pid and flags and returns a descriptor
    // or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, number, 0) } as libc::c_int;
    let start = Instant::now();
    while !exited() && start.elapsed() < DEADLINE {
        if pidfd < 0 {
            // No pidfd (a kernel before 5.3): /proc alone, turn by turn.
            std::thread::yield_now();
            continue;
        }
        let left = DEADLINE.saturating_sub(start.elapsed()).as_millis();
        let mut poll = libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; readable once the process has exited.
        unsafe { libc::poll(&mut poll, 1, left.try_into().unwrap_or(i32::MAX)) };
    }
    if pidfd >= 0 {
        // SAFETY: the descriptor is ours and closed once.
        unsafe { libc::close(pidfd) };
    }
    let done = exited();
    if !done {
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    done
}

/// The pane's terminal hung up by tmux, as a closed terminal window or a
/// dropped connection hangs it up.
fn kill_pane(tmux: &Tmux) {
    tmux.ok(&["kill-pane", "-t", "recon"]);
}

/// Killing the pane of an idle console ends it, whether it runs under the
/// pane's shell (only the hangup of its terminal tells it) or is the
/// pane's own process (the kernel also sends it SIGHUP). It spun before,
/// reading 0 bytes for ever, and a SIGTERM did not end it.
#[test]
fn a_console_whose_pane_is_killed_exits() {
    for under_shell in [true, false] {
        let (_dir, ws) = demo_workspace();
        let ws_arg = ws.to_str().unwrap();
        let args = ["--workspace", ws_arg, "--reviewer", "ada"];
        let Some(tmux) = Tmux::launch(&[], &args, (120, 40), under_shell) else {
            return;
        };
        tmux.shows("reviewer: ada");
        let pid = match under_shell {
            true => recon_pid(&tmux),
            false => tmux
                .ok(&["display-message", "-p", "-t", "recon", "#{pane_pid}"])
                .trim()
                .to_string(),
        };
        kill_pane(&tmux);
        assert!(
            exits(&pid),
            "recon {pid} (under a shell: {under_shell}) kept running after its pane was killed"
        );
    }
}

/// Killing the pane while a bulk decision holds on its first operation:
/// the console finishes the operation in hand (it is released only after
/// the pane is gone, and is recorded), stops the job and exits; what it
/// recorded is whole (`recon verify`). How many of the other two were
/// decided depends on when the console saw the hangup, which nothing on a
/// screen can show once the pane is gone.
#[test]
fn a_console_whose_pane_is_killed_during_a_bulk_finishes_the_operation_in_hand_and_exits() {
    let (dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let before = states_by_cli(ws_arg);
    let Some((tmux, mut release)) = bulk_of_three_held(dir.path(), ws_arg, &[]) else {
        return;
    };
    let pid = recon_pid(&tmux);
    kill_pane(&tmux);
    std::io::Write::write_all(&mut release, b"go\n")
        .expect("recon still holds the operation in hand after its pane was killed");
    drop(release);
    assert!(
        exits(&pid),
        "recon {pid} kept running after its pane was killed"
    );
    let now = states_by_cli(ws_arg);
    let recorded = now["confirmed"] - before["confirmed"];
    assert!((1..=3).contains(&recorded), "{before:?} -> {now:?}");
    assert_eq!(now["unknown"], before["unknown"] - recorded, "{now:?}");
    let verify = run(&["verify", "--workspace", ws_arg], None);
    assert_eq!(verify.code, Some(0), "{}", verify.stdout);
}

/// A SIGHUP asks the console to stop its job after the operation in hand;
/// while that operation is held, a SIGTERM ends the process at once, as a
/// second end signal always does. The held operation's transaction is
/// rolled back: nothing of it is recorded, and the workspace verifies.
#[test]
fn a_second_end_signal_ends_the_console_even_while_a_job_is_held() {
    let (dir, ws) = demo_workspace();
    let ws_arg = ws.to_str().unwrap();
    let before = states_by_cli(ws_arg);
    let Some((tmux, release)) = bulk_of_three_held(dir.path(), ws_arg, &[]) else {
        return;
    };
    let pid = recon_pid(&tmux);
    for signal in ["-HUP", "-TERM"] {
        let sent = Command::new("kill").args([signal, &pid]).status();
        assert!(sent.expect("kill").success(), "kill {signal}");
        if signal == "-HUP" {
            tmux.shows("cancelling after the operation in hand");
        }
    }
    assert!(
        exits(&pid),
        "recon {pid} kept running after SIGHUP then SIGTERM"
    );
    // Killed, the console restored nothing: the shell's line lands where
    // the raw terminal's cursor was, maybe across a line's end.
    tmux.wait_until("recon's exit status 143 (SIGTERM)", |screen| {
        let words: String = screen.split_whitespace().collect();
        words.contains("reconexitedwith143")
    });
    drop(release);
    assert_eq!(states_by_cli(ws_arg), before);
    let verify = run(&["verify", "--workspace", ws_arg], None);
    assert_eq!(verify.code, Some(0), "{}", verify.stdout);
}
