//! The README's shape for a newcomer: a contents list at the top that names
//! every section, in order, with links that reach them; and "Plug in your
//! tool" saying in its first lines which choices let a receiver prove an
//! absence.

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
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
    let listed: Vec<(String, String)> = contents
        .split('[')
        .skip(1)
        .map(|entry| {
            let (title, rest) = entry.split_once("](#").expect("a link");
            let target = rest.split_once(')').expect("the link ends").0;
            (title.to_string(), target.to_string())
        })
        .collect();
    let sections: Vec<(String, String)> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| (h.to_string(), anchor(h)))
        .collect();
    assert_eq!(listed, sections);
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
