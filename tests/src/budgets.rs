//! The size budgets (issue 51), pinned as `layers.rs` pins the layers: a driver is an IO loop over
//! the session layer's [`AgentLoop`](coxswain_session::AgentLoop), so it stays small; a decision
//! that grows one back past its budget belongs in the pure layer.
//!
//! | what | budget |
//! | --- | --- |
//! | the tokio driver and agent together (`driver.rs` + `agent.rs`) | 700 lines |
//! | the threads agent (`agent.rs`) | 300 lines |
//! | Python's asyncio agent (`_agent.py`) | 300 lines |
//! | Node's agent (`agent.js`) | 300 lines |
//! | any production source file, before its tests | 850 lines |
//! | any function in one | 100 lines |
//!
//! Production files: the Rust, Python and JavaScript sources of `core/`, `model/` and `adapters/`,
//! not their tests, benches, examples, scripts or `node_modules`. A Rust file's tests start at a
//! top-level `#[cfg(test)]`.

use std::path::{Path, PathBuf};

const FILE_BUDGET: usize = 850;
const FUNCTION_BUDGET: usize = 100;

/// `(files, budget)`: each driver's agent, in lines.
const DRIVERS: [(&[&str], usize); 4] = [
    (
        &[
            "adapters/tokio/src/driver.rs",
            "adapters/tokio/src/agent.rs",
        ],
        700,
    ),
    (&["adapters/threads/src/agent.rs"], 300),
    (&["adapters/python/python/coxswain/asyncio/_agent.py"], 300),
    (&["adapters/node/agent.js"], 300),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn lines(path: &Path) -> Vec<String> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    text.lines().map(str::to_owned).collect()
}

/// Folders whose files are not production code.
const NOT_PRODUCTION: [&str; 10] = [
    "tests",
    "test",
    "benches",
    "bench",
    "examples",
    "scripts",
    "node_modules",
    "target",
    "assets",
    "fuzz-corpus",
];

fn production_files() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders: Vec<PathBuf> = ["core", "model", "adapters"]
        .iter()
        .map(|top| root().join(top))
        .collect();
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !NOT_PRODUCTION.contains(&name.as_str()) && !name.starts_with('.') {
                    folders.push(path);
                }
            } else if is_production(&name) {
                found.push(path);
            }
        }
    }
    let tests = test_modules(&found);
    found.retain(|path| !tests.iter().any(|test| path.starts_with(test)));
    found.sort();
    found
}

/// The files and folders of Rust modules declared under `#[cfg(test)]` (`mod name;`).
fn test_modules(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut tests = Vec::new();
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
    {
        let lines = lines(file);
        let (Some(folder), Some(stem)) = (file.parent(), file.file_stem()) else {
            continue;
        };
        // `lib.rs`, `main.rs` and `mod.rs` declare siblings; `name.rs` declares `name/…`.
        let base = match stem.to_str() {
            Some("lib" | "main" | "mod") => folder.to_path_buf(),
            _ => folder.join(stem),
        };
        for pair in lines.windows(2) {
            let declared = pair[1]
                .trim()
                .strip_prefix("mod ")
                .and_then(|m| m.strip_suffix(';'));
            if let (true, Some(name)) = (pair[0].trim() == "#[cfg(test)]", declared) {
                tests.push(base.join(format!("{name}.rs")));
                tests.push(base.join(name));
            }
        }
    }
    tests
}

fn is_production(name: &str) -> bool {
    let source = [".rs", ".py", ".js"].iter().any(|ext| name.ends_with(ext));
    let test = name == "tests.rs"
        || name.starts_with("test_")
        || name.ends_with(".test.js")
        || name == "conftest.py";
    source && !test && !name.ends_with(".d.ts")
}

/// The lines before a Rust file's top-level tests.
fn before_tests(path: &Path, lines: &[String]) -> usize {
    let rust = path.extension().is_some_and(|ext| ext == "rs");
    match lines.iter().position(|line| line == "#[cfg(test)]") {
        Some(at) if rust => at,
        _ => lines.len(),
    }
}

/// `(first line, length)` of every function body in `lines`, by the language's shape.
fn functions(path: &Path, lines: &[String]) -> Vec<(usize, usize)> {
    let ext = path.extension().and_then(|ext| ext.to_str()).unwrap_or("");
    let mut found = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let code = line.trim_start();
        let end = match ext {
            "rs" if is_rust_fn(code) => rust_end(lines, at, indent),
            "py" if code.starts_with("def ") || code.starts_with("async def ") => {
                Some(python_end(lines, at, indent))
            }
            "js" if is_js_fn(code) => brace_end(lines, at, indent),
            _ => None,
        };
        if let Some(end) = end {
            found.push((at + 1, end - at + 1));
        }
    }
    found
}

fn is_rust_fn(code: &str) -> bool {
    let mut rest = code;
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
        "extern \"C\" ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    rest.starts_with("fn ")
}

/// A Rust function's closing line: the first `}` at its indentation, unless the signature ends
/// in `;` (a declaration without a body).
fn rust_end(lines: &[String], at: usize, indent: usize) -> Option<usize> {
    for line in &lines[at..] {
        let code = line.split("//").next().unwrap_or("").trim_end();
        if code.ends_with('{') {
            break;
        }
        if code.ends_with(';') {
            return None;
        }
    }
    brace_end(lines, at, indent)
}

fn brace_end(lines: &[String], at: usize, indent: usize) -> Option<usize> {
    let close = format!("{}}}", " ".repeat(indent));
    (at + 1..lines.len()).find(|&end| {
        let line = lines[end].trim_end();
        line == close
            || line == format!("{close};")
            || line == format!("{close},")
            || line == format!("{close})")
    })
}

fn python_end(lines: &[String], at: usize, indent: usize) -> usize {
    let mut last = at;
    for (offset, line) in lines[at + 1..].iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if line.len() - line.trim_start().len() <= indent {
            break;
        }
        last = at + 1 + offset;
    }
    last
}

fn is_js_fn(code: &str) -> bool {
    if !code.ends_with('{') {
        return false;
    }
    let mut rest = code;
    for prefix in ["export ", "default ", "static ", "async ", "get ", "set "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    if rest.starts_with("function") {
        return true;
    }
    // A class method: `name(args) {`, not a control statement.
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '#'))
        .collect();
    let keyword = [
        "if", "for", "while", "switch", "catch", "return", "function", "with",
    ];
    !name.is_empty() && !keyword.contains(&name.as_str()) && rest[name.len()..].starts_with('(')
}

#[test]
fn every_driver_agent_keeps_its_budget() {
    let mut over = Vec::new();
    for (files, budget) in DRIVERS {
        let total: usize = files
            .iter()
            .map(|file| lines(&root().join(file)).len())
            .sum();
        if total > budget {
            over.push(format!(
                "{}: {total} lines, budget {budget}",
                files.join(" + ")
            ));
        }
    }
    assert!(over.is_empty(), "over budget:\n{}", over.join("\n"));
}

#[test]
fn no_production_file_or_function_is_over_its_budget() {
    let files = production_files();
    assert!(files.len() > 100, "found only {} files", files.len());
    let mut over = Vec::new();
    for path in &files {
        let lines = lines(path);
        let shown = path
            .strip_prefix(root())
            .unwrap_or(path)
            .display()
            .to_string();
        let length = before_tests(path, &lines);
        if length > FILE_BUDGET {
            over.push(format!("{shown}: {length} lines before its tests"));
        }
        for (line, length) in functions(path, &lines[..length]) {
            if length > FUNCTION_BUDGET {
                over.push(format!("{shown}:{line}: a function of {length} lines"));
            }
        }
    }
    assert!(over.is_empty(), "over budget:\n{}", over.join("\n"));
}

/// The scanner bites: a file and a function one line over are found, one at the budget is not.
#[test]
fn the_budget_scanner_finds_what_is_over() {
    let body = |n: usize| {
        let mut lines = vec!["fn long() {".to_owned()];
        lines.extend((0..n - 2).map(|_| "    step();".to_owned()));
        lines.push("}".to_owned());
        lines
    };
    let rust = Path::new("x.rs");
    assert_eq!(functions(rust, &body(100)), [(1, 100)]);
    assert_eq!(functions(rust, &body(101)), [(1, 101)]);
    let declared = ["    fn hooks(&self) -> Hooks;".to_owned()];
    assert_eq!(functions(rust, &declared), []);
    let python: Vec<String> = ["def f(x):", "    a = 1", "", "    return a", "x = 2"]
        .map(str::to_owned)
        .to_vec();
    assert_eq!(functions(Path::new("x.py"), &python), [(1, 4)]);
    let js: Vec<String> = [
        "class A {",
        "  async run(x) {",
        "    if (x) {",
        "    }",
        "  }",
        "}",
    ]
    .map(str::to_owned)
    .to_vec();
    assert_eq!(functions(Path::new("x.js"), &js), [(2, 4)]);
    let tested: Vec<String> = ["fn a() {}", "#[cfg(test)]", "mod tests;"]
        .map(str::to_owned)
        .to_vec();
    assert_eq!(before_tests(rust, &tested), 1);
}
