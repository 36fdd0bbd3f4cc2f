//! Model-based property tests: random sequences of every step a user or a
//! fault can take, run against the real engine (real receiver children, real
//! files) and against a small reference model, with the invariants checked
//! after every step; and the properties of `classify`.

use crate::support::Lab;
use recon::dispatch::DispatchOptions;
use recon::domain::Verdict;
use serde_json::json;

#[test]
fn a_float_payload_still_matches_its_own_effect_after_the_round_trips() {
    // Each of these is the shortest text of a double that serde_json's
    // default (best-effort) parser reads back one unit off, and
    // whose text then keeps drifting on every further round trip.
    for (i, text) in [
        "7.296267179458751e-246",
        "-6.851053208151698e-16",
        "-6.70720608602141e+183",
        "5.790333108190559e+276",
    ]
    .into_iter()
    .enumerate()
    {
        let mut lab = Lab::new();
        let payload: serde_json::Value =
            serde_json::from_str(&format!("{{\"amount\": {text}}}")).unwrap();
        let op = format!("float-{i}");
        lab.ws.prepare(&op, "pay", &payload).unwrap();
        let report = lab.ws.dispatch(&op, DispatchOptions::default()).unwrap();
        assert_eq!(report.outcome, "receipt");
        let classified = lab.ws.snapshot(&op, Some("closer")).unwrap();
        assert_eq!(
            classified.verdict,
            Verdict::UniqueExactMatch,
            "{text}: the op's own effect must match it exactly: {}",
            json!(classified.snapshot)
        );
    }
}
