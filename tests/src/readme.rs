//! The README's examples are the compiled ones.

use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_readme_shows_the_compiled_core_example_verbatim() {
    let readme = read("README.md");
    let example = read("core/machine/examples/by_hand.rs");
    assert!(
        readme.contains(&example),
        "README.md must contain core/machine/examples/by_hand.rs verbatim (copy the file into it)"
    );
}

/// The README's TypeScript example is `adapters/node/examples/hello.mts`, which docs/node.md
/// compiles and runs and `adapters/node/test/example_ts.test.js` runs as the doc says.
#[test]
fn the_readme_shows_the_compiled_typescript_example_verbatim() {
    let readme = read("README.md");
    let example = read("adapters/node/examples/hello.mts");
    assert!(
        readme.contains(&format!("```ts\n{example}```\n")),
        "README.md's ```ts block must be adapters/node/examples/hello.mts verbatim (copy the file into it)"
    );
}

#[test]
fn the_readme_names_the_pinned_model_state_count() {
    let readme = read("README.md");
    let pinned = read("tests/src/model_check.rs");
    let count = pinned
        .lines()
        .find_map(|line| line.strip_prefix("const CI_BOUND_STATES: usize = "))
        .and_then(|rest| rest.strip_suffix(';'))
        .expect("the pinned count")
        .replace('_', ",");
    assert!(
        readme.contains(&count),
        "README.md must state the CI bound's {count} states"
    );
}

/// The README is what a newcomer reads whole: what it is, how to use it, links. Everything else
/// lives in docs/.
const README_MAX_LINES: usize = 350;

#[test]
fn the_readme_is_at_most_350_lines() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, over {README_MAX_LINES}: move the detail to docs/"
    );
}

/// README.md and every `docs/*.md`, relative to the repository root.
fn markdown_files() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    files.sort();
    files.insert(0, "README.md".to_owned());
    files
}

/// The targets of a markdown text's inline links (`[text](target)`), outside code blocks and
/// code spans.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        // Code spans hold no links.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                targets.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    targets
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .replace('`', "")
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect::<String>()
        .to_lowercase()
}

/// The anchors of a markdown text's headings (a repeated heading gets `-1`, `-2`, …).
fn anchors(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        }
        let heading = line.trim_start_matches('#');
        if in_block || heading.len() == line.len() || !heading.starts_with(' ') {
            continue;
        }
        let base = anchor(heading.trim());
        let repeats = seen.entry(base.clone()).or_insert(0);
        found.push(match *repeats {
            0 => base,
            n => format!("{base}-{n}"),
        });
        *repeats += 1;
    }
    found
}

#[test]
fn every_relative_link_of_the_readme_and_the_docs_names_an_existing_file_and_heading() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = read(&file);
        let dir = Path::new(&file).parent().unwrap_or(Path::new(""));
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let linked = if path.is_empty() {
                Path::new(&file).to_path_buf()
            } else {
                dir.join(path)
            };
            if !root.join(&linked).exists() {
                broken.push(format!("{file}: ({target}): no file {}", linked.display()));
                continue;
            }
            let is_markdown = linked.extension().is_some_and(|ext| ext == "md");
            if !fragment.is_empty() && is_markdown {
                let heads = anchors(&std::fs::read_to_string(root.join(&linked)).unwrap());
                if !heads.iter().any(|a| a == fragment) {
                    broken.push(format!("{file}: ({target}): no heading #{fragment}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 50,
        "only {checked} links found: the scan is broken"
    );
}

#[test]
fn the_link_scan_finds_a_broken_link_and_a_missing_heading() {
    assert_eq!(
        link_targets("see [a](docs/a.md#x-y) and `[b](c)`, [d](#e)\n```\n[f](g)\n```\n"),
        ["docs/a.md#x-y", "#e"]
    );
    assert_eq!(
        anchors("# A `b` c\n## Node.js\n## Node.js\n```\n# not\n```\n"),
        ["a-b-c", "nodejs", "nodejs-1"]
    );
}
