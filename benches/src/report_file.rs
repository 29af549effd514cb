//! Where the custom benches leave their figures for the report tool: JSON files beside
//! criterion's, under `<target>/criterion/coxswain/`.

use std::path::PathBuf;

/// `<target>/criterion/coxswain/`: the target directory is found from the running executable
/// (`<target>/<profile>/deps/<bench>` or `<target>/<profile>/<bin>`), or `CARGO_TARGET_DIR`.
pub fn results_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            let mut dir = exe.parent()?;
            if dir.file_name()? == "deps" {
                dir = dir.parent()?;
            }
            Some(dir.parent()?.to_path_buf())
        })
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("criterion").join("coxswain")
}

/// Writes `value` to `<results_dir>/<name>.json`, reporting (not failing) on error.
pub fn save(name: &str, value: &serde_json::Value) {
    let dir = results_dir();
    let path = dir.join(format!("{name}.json"));
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(value).unwrap_or_default(),
        )
    });
    match written {
        Ok(()) => println!("figures written to {}", path.display()),
        Err(error) => eprintln!("could not write {}: {error}", path.display()),
    }
}

/// Whether this run is a real bench run (`cargo bench` passes `--bench`), not the smoke run of
/// `cargo test --benches`.
pub fn full_run() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}
