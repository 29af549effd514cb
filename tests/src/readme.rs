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
