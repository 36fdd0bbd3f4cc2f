//! Untrusted text never breaks the console's layout: whatever a payload
//! holds, no screen row is wider than the screen, and every row that ends
//! in a panel's right border ends at the screen's edge.

use crate::support::{run, Lab};
use serde_json::json;
use unicode_width::UnicodeWidthStr;

#[test]
fn a_zero_width_joiner_in_a_payload_never_breaks_a_row() {
    let mut lab = Lab::new();
    let family = "\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}";
    let payload = json!({
        "note": format!("{family} zero\u{200b}width \u{feff}bom \u{2066}isolate\u{2069} e\u{301}"),
        "to": format!("{family}@example.com"),
    });
    let lost = Some(recon::receiver::Fault::CrashAfterCommit);
    lab.dispatched("op-zwj", "send_email", &payload, lost);
    for (size, keys) in [("80x24", ""), ("120x40", ""), ("120x40", "p")] {
        let ws = lab.path_str();
        let args = [
            "screenshot",
            "--workspace",
            &ws,
            "--size",
            size,
            "--keys",
            keys,
        ];
        let out = run(&args, None);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let width: usize = size.split('x').next().unwrap().parse().unwrap();
        assert!(
            !out.stdout.contains('\u{200d}'),
            "a raw joiner reached the screen"
        );
        for (i, line) in out.stdout.lines().enumerate() {
            assert!(line.width() <= width, "{size} row {i} is too wide: {line}");
            if line.ends_with(['│', '┐', '┘']) {
                assert_eq!(line.width(), width, "{size} {keys:?} row {i}: {line}");
            }
        }
        if keys == "p" {
            assert!(
                out.stdout.contains("\\u200d"),
                "the joiner is shown escaped"
            );
        }
    }
}
