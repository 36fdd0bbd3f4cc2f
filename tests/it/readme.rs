//! The README's shape for a newcomer: a contents list at the top that names
//! every section, in order, and every file of `docs/`, with links that reach
//! them; the quickstarts before line 200; "Plug in your tool" saying in its
//! first lines which choices let a receiver prove an absence, with request
//! and answer lines that are what recon writes and reads; and the shell
//! blocks marked runnable, run.

use recon::domain::EffectRequest;
use recon::receiver::protocol::{self, Answer, Verb};
use serde_json::Value;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

/// The names of the files in `docs/`, sorted.
fn doc_files() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("a docs entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .collect();
    names.sort();
    names
}

/// The README followed by every file of `docs/`: where a reference that
/// moved out of the README is held to its words.
pub fn readme_and_docs() -> String {
    let mut text = readme();
    for name in doc_files() {
        text.push('\n');
        text.push_str(&std::fs::read_to_string(root().join("docs").join(&name)).expect("a doc"));
    }
    text
}

/// A heading's anchor as GitHub makes it: lowercased, punctuation other
/// than `-` dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn readme_contents_list_every_section_in_order_before_the_first() {
    let readme = readme();
    let (top, _) = readme.split_once("\n## ").expect("a section");
    let contents = top
        .split_once("\nContents:\n")
        .expect("a contents list before the first section")
        .1;
    let mut listed: Vec<(String, String)> = Vec::new();
    let mut docs: Vec<String> = Vec::new();
    for entry in contents.split('[').skip(1) {
        let (title, rest) = entry.split_once("](").expect("a link");
        let target = rest.split_once(')').expect("the link ends").0;
        match (target.strip_prefix('#'), target.strip_prefix("docs/")) {
            (Some(section), _) => listed.push((title.to_string(), section.to_string())),
            (_, Some(doc)) => docs.push(doc.to_string()),
            _ => panic!("{target:?} is neither a section nor a file of docs/"),
        }
    }
    let sections: Vec<(String, String)> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| (h.to_string(), anchor(h)))
        .collect();
    assert_eq!(listed, sections);
    docs.sort();
    assert_eq!(docs, doc_files(), "the contents link every file of docs/");
}

#[test]
fn no_section_a_newcomer_needs_first_starts_below_line_200() {
    let readme = readme();
    let line_of = |start: &str| {
        readme
            .lines()
            .position(|l| l == start)
            .unwrap_or_else(|| panic!("the README has {start:?}"))
            + 1
    };
    for first in [
        "Contents:",
        "## Two commands",
        "## Review the demo in the console",
        "## Plug in your tool",
        "## Team mode: from an empty PostgreSQL to two reviewers",
    ] {
        let line = line_of(first);
        assert!(line < 200, "{first:?} starts at line {line}");
    }
    let first_screen = readme.lines().take(40).collect::<Vec<_>>().join("\n");
    assert!(first_screen.contains("[two commands](#two-commands)"));
    assert!(first_screen.contains("(#review-the-demo-in-the-console)"));
}

#[test]
fn plug_in_your_tool_says_first_which_choices_prove_absence() {
    let readme = readme();
    let section = readme
        .split_once("\n## Plug in your tool\n\n")
        .expect("the section")
        .1;
    let first = section.split("\n\n").next().unwrap_or_default();
    let words = first.split_whitespace().collect::<Vec<_>>().join(" ");
    for needed in [
        "prove absence",
        "`can_close: true`",
        "`complete` and `authoritative`",
        "`not_applied`",
        "never its absence",
    ] {
        assert!(
            words.contains(needed),
            "{needed:?} in the first paragraph: {words}"
        );
    }
}

/// The fenced block after `marker` in `text`, without its fences.
fn block_after<'a>(text: &'a str, marker: &str) -> &'a str {
    text.split_once(marker)
        .expect("the marker")
        .1
        .split_once("```")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .expect("a block follows the marker")
        .1
        .split_once("\n```")
        .expect("the block ends")
        .0
}

/// Each sample request is, byte for byte, the line recon writes for it
/// (`protocol::request`), and each sample answer is one recon reads as a
/// usable answer of its verb.
#[test]
fn the_readme_sample_lines_are_what_recon_writes_and_reads() {
    let readme = readme();
    let samples = block_after(&readme, "<!-- samples -->");
    let mut verbs = Vec::new();
    let mut lines = samples.lines();
    while let Some(call) = lines.next() {
        let verb = call.rsplit(' ').next().and_then(Verb::parse).expect(call);
        let request = lines
            .next()
            .and_then(|l| l.strip_prefix("> "))
            .expect("a request");
        let answer = lines
            .next()
            .and_then(|l| l.strip_prefix("< "))
            .expect("an answer");
        let sent: Value = serde_json::from_str(request).expect("a JSON request");
        let op = &sent["op"];
        let op_id = op["op_id"]
            .as_str()
            .or(sent["op_id"].as_str())
            .unwrap_or("");
        let payload = op.get("payload").cloned().unwrap_or(Value::Null);
        let effect = EffectRequest {
            op_id,
            action_kind: op["action_kind"].as_str().unwrap_or(""),
            payload: &payload,
            compensates_effect_id: op["compensates_effect_id"].as_str(),
        };
        let workspace = sent["workspace"].as_str().unwrap_or("");
        let written = protocol::request(verb, workspace, &effect, sent["authorized_by"].as_str());
        assert_eq!(request, written.to_string(), "{verb:?} request");
        let read: Value = serde_json::from_str(answer).expect("a JSON answer");
        match protocol::parse_answer(verb, op_id, &read) {
            Ok(Answer::Failed(failed)) => panic!("{verb:?} answer failed: {failed:?}"),
            Ok(_) => {}
            Err(why) => panic!("{verb:?} answer unusable: {why}"),
        }
        verbs.push(verb);
    }
    assert_eq!(verbs, Verb::ALL, "one sample per verb, in order");
}

/// Every shell block marked `<!-- runnable -->` in the README and in
/// `docs/` runs to exit 0 in a fresh directory, with the built `recon`
/// first on the `PATH`.
#[test]
fn the_shell_blocks_marked_runnable_run() {
    const MARK: &str = "<!-- runnable -->\n```sh\n";
    let text = readme_and_docs();
    let blocks: Vec<&str> = text
        .split(MARK)
        .skip(1)
        .map(|rest| rest.split_once("\n```").expect("the block ends").0)
        .collect();
    assert!(
        !blocks.is_empty(),
        "the README marks its quickstart runnable"
    );
    let bin = crate::support::recon_bin();
    let path = format!(
        "{}:{}",
        bin.parent().expect("the binary's directory").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for block in blocks {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = std::process::Command::new("sh")
            .args(["-e", "-c", block])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env_remove("RECON_DATABASE_URL")
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "{block}\nexit {:?}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
