//! The folders are the layers (docs/architecture.md, "Layout"): a crate's folder names its layer, and no crate
//! depends on a crate of a layer above its own. Read from `cargo metadata`, so a dependency added
//! anywhere in the workspace is judged here.
//!
//! | layer | folder | what it holds |
//! | --- | --- | --- |
//! | 0 pure | `core/` | the machine, the record format, the session layer: no IO, no async, no clock |
//! | 1 verification | `model/` | the model checker's model, the executable spec, mutants, the conformance kit |
//! | 2 IO | `adapters/` | the drivers, the logs, the load generator, the CLI, the bindings, the ACP adapter |
//! | 3 tests | `tests/`, `benches/` | integration tests, the driver simulator, the PostgreSQL harness, benches |
//!
//! The CLI ships the verifier (`check`, `conform`, `traces`, `fuzz`, `port`), so IO sits above
//! verification; the simulator drives the IO drivers, so it sits with the tests, above them.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// The layer a workspace crate's folder (relative to the workspace root) puts it in.
fn layer_of(folder: &str) -> Option<(u8, &'static str)> {
    let top = folder.split('/').next()?;
    match top {
        "core" => Some((0, "pure")),
        "model" => Some((1, "verification")),
        "adapters" => Some((2, "IO")),
        "tests" | "benches" => Some((3, "tests")),
        _ => None,
    }
}

/// Crates the pure layer must never depend on (IO, async, a clock, randomness).
const NOT_PURE: [&str; 6] = ["tokio", "tokio-util", "rustix", "tempfile", "rand", "libc"];

struct Crate {
    name: String,
    folder: String,
    published: bool,
    /// Normal and build dependencies (not dev-dependencies): `(name, is a workspace path)`.
    uses: Vec<(String, bool)>,
}

fn workspace() -> Vec<Crate> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let root = metadata["workspace_root"].as_str().unwrap().to_owned();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let manifest = package["manifest_path"].as_str().unwrap();
            let folder = manifest
                .strip_prefix(&format!("{root}/"))
                .and_then(|path| path.strip_suffix("/Cargo.toml"))
                .unwrap_or(manifest)
                .to_owned();
            let uses = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|dep| dep["kind"].as_str() != Some("dev"))
                .map(|dep| {
                    let name = dep["name"].as_str().unwrap().to_owned();
                    (name, dep.get("path").is_some_and(|path| !path.is_null()))
                })
                .collect();
            Crate {
                name: package["name"].as_str().unwrap().to_owned(),
                folder,
                // `publish = false` reads as an empty list of registries.
                published: package["publish"]
                    .as_array()
                    .is_none_or(|to| !to.is_empty()),
                uses,
            }
        })
        .collect()
}

/// Every breach of the layering in `crates`, one line each.
fn breaches(crates: &[Crate]) -> Vec<String> {
    let by_name: BTreeMap<&str, &Crate> = crates.iter().map(|c| (c.name.as_str(), c)).collect();
    let mut found = Vec::new();
    for krate in crates {
        let Some((layer, layer_name)) = layer_of(&krate.folder) else {
            found.push(format!(
                "{} ({}): a folder that is no layer",
                krate.name, krate.folder
            ));
            continue;
        };
        if layer == 3 && krate.published {
            found.push(format!(
                "{} ({}): published from the tests layer",
                krate.name, krate.folder
            ));
        }
        for (dep, local) in &krate.uses {
            if layer == 0 && NOT_PURE.contains(&dep.as_str()) {
                found.push(format!("{} (pure) uses {dep}", krate.name));
            }
            let Some(used) = by_name.get(dep.as_str()).filter(|_| *local) else {
                continue;
            };
            let Some((used_layer, used_name)) = layer_of(&used.folder) else {
                continue;
            };
            if used_layer > layer {
                found.push(format!(
                    "{} ({layer_name}) uses {dep} ({used_name}), a layer above it",
                    krate.name
                ));
            }
            if krate.published && !used.published {
                found.push(format!(
                    "{} (published) uses {dep} (unpublished)",
                    krate.name
                ));
            }
        }
    }
    found
}

#[test]
fn no_crate_depends_on_a_layer_above_its_own() {
    let crates = workspace();
    let mut layers: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for krate in &crates {
        let layer = layer_of(&krate.folder).map_or("none", |(_, name)| name);
        layers
            .entry(layer.to_owned())
            .or_default()
            .push(&krate.name);
    }
    for names in layers.values_mut() {
        names.sort();
    }
    assert_eq!(breaches(&crates), Vec::<String>::new());
    // The crate list itself, so that a crate added or moved is a decision, not an accident.
    let expected: BTreeMap<String, Vec<&str>> = [
        (
            "pure",
            vec!["coxswain-core", "coxswain-log", "coxswain-session"],
        ),
        (
            "verification",
            vec![
                "coxswain-checker",
                "coxswain-conformance",
                "coxswain-mutants",
                "coxswain-spec",
            ],
        ),
        (
            "IO",
            vec![
                "coxswain",
                "coxswain-binding-kit",
                "coxswain-file-log",
                "coxswain-load",
                "coxswain-node",
                "coxswain-postgres",
                "coxswain-threads",
                "coxswain-tokio",
            ],
        ),
        (
            "tests",
            vec![
                "coxswain-benches",
                "coxswain-driver-sim",
                "coxswain-driver-tests",
                "coxswain-postgres-tests",
                "coxswain-test-harness",
                "coxswain-tests",
            ],
        ),
    ]
    .into_iter()
    .map(|(layer, names)| (layer.to_owned(), names))
    .collect();
    assert_eq!(layers, expected);
}

/// The checker bites: a pure crate using tokio, the model checker's model using a driver, a
/// driver using the simulator (published on an unpublished crate) and a crate outside every
/// layer are each named; a driver using the checker (IO above verification) is not.
#[test]
fn the_layer_check_names_each_kind_of_breach() {
    let krate = |name: &str, folder: &str, published: bool, uses: &[&str]| Crate {
        name: name.to_owned(),
        folder: folder.to_owned(),
        published,
        uses: uses
            .iter()
            .map(|dep| ((*dep).to_owned(), *dep != "tokio"))
            .collect(),
    };
    let crates = [
        krate("coxswain-core", "core/machine", true, &["tokio"]),
        krate(
            "coxswain-checker",
            "model/checker",
            true,
            &["coxswain-core", "coxswain-tokio"],
        ),
        krate(
            "coxswain-tokio",
            "adapters/tokio",
            true,
            &["coxswain-driver-sim"],
        ),
        krate(
            "coxswain-driver-sim",
            "tests/sim",
            false,
            &["coxswain-tokio"],
        ),
        krate(
            "coxswain-threads",
            "adapters/threads",
            true,
            &["coxswain-checker"],
        ),
        krate("coxswain-stray", "stray", true, &[]),
    ];
    assert_eq!(
        breaches(&crates),
        [
            "coxswain-core (pure) uses tokio",
            "coxswain-checker (verification) uses coxswain-tokio (IO), a layer above it",
            "coxswain-tokio (IO) uses coxswain-driver-sim (tests), a layer above it",
            "coxswain-tokio (published) uses coxswain-driver-sim (unpublished)",
            "coxswain-stray (stray): a folder that is no layer",
        ]
    );
}
