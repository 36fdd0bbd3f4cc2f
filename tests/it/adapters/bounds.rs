//! Every accepted operation stays readable: the largest payload recon
//! takes, applied eight times at a receiver and written back with every
//! character escaped, still comes back in one answer line
//! (`domain::bounds` derives the payload's bound from the line's).

use super::Rig;
use crate::stores::{on_both_stores, Store};
use serde_json::Value;

on_both_stores!(eight_matches_of_the_largest_payload_escaped_at_worst_are_read);
fn eight_matches_of_the_largest_payload_escaped_at_worst_are_read(store: Store) {
    let rig = Rig::with_mail_on(store);
    let limit = recon::cli::MAX_PAYLOAD_BYTES;
    // Exactly the limit, every byte a `<`, which Go's encoding/json writes
    // as `\u003c`: six bytes for one.
    let text = format!(r#"{{"p":"{}"}}"#, "<".repeat(limit - 8));
    assert_eq!(text.len(), limit);
    let file = rig.file("largest.json");
    std::fs::write(&file, &text).unwrap();
    rig.prepare("op-big", "post_letter", &format!("@{file}"));
    rig.set_mode("mail", "apply:eight-times");
    assert_eq!(rig.dispatch("op-big")["outcome"], "receipt");

    rig.set_mode("mail", "query:escape-all");
    let seen = rig.json(&["snapshot", "op-big", "--by", "dana", "--json"]);
    let line = &rig.answers("mail", "query")[0];
    assert!(
        line.len() > 8 * 6 * (limit - 8),
        "the answer was not escaped at worst: {} bytes",
        line.len()
    );
    assert_eq!(seen["verdict"], "duplicate_matches", "{}", seen["verdict"]);
    let payload: Value = serde_json::from_str(&text).unwrap();
    let matches = seen["snapshot"]["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 8);
    assert!(matches.iter().all(|m| m["payload"] == payload));
    // Recorded as dana's observation, all eight of them.
    let latest = &rig.show("op-big")["operation"]["latest_observation"];
    assert_eq!(
        (&latest["matches"], &latest["observed_by"]),
        (&8.into(), &"dana".into())
    );
}
