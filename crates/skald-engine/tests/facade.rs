//! The engine is the only door (ARCHITECTURE.md, "The server and the CLI reach storage only
//! through the engine"): no edge names `skald_engine::internal`, nor does any of the engine's
//! own test suites (they go through `Engine` too; the benchmarks of the pipeline alone may), the
//! server's dependencies name neither `skald-store` nor `skald-llm`, and the CLI's name no
//! `skald-store`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn crate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

/// The `[dependencies]` (not dev-dependencies) a crate's manifest names.
fn dependencies(name: &str) -> Vec<String> {
    let manifest = std::fs::read_to_string(crate_dir(name).join("Cargo.toml")).unwrap();
    let manifest: toml::Table = manifest.parse().unwrap();
    manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|table| table.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn neither_an_edge_nor_an_engine_suite_names_the_engines_internal_pieces() {
    let mut offenders = Vec::new();
    let this_suite = Path::new(file!()).file_name().unwrap();
    for (krate, dir) in [
        ("skald-server", "src"),
        ("skald-cli", "src"),
        ("skald-engine", "tests"),
    ] {
        let mut files = Vec::new();
        rust_files(&crate_dir(krate).join(dir), &mut files);
        assert!(!files.is_empty(), "{krate} has no sources under {dir}/");
        files.retain(|file| file.file_name() != Some(this_suite));
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (number, line) in text.lines().enumerate() {
                if line.contains("skald_engine::internal") {
                    offenders.push(format!(
                        "{}:{}: {}",
                        file.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "edges and the engine's suites go through Engine, never skald_engine::internal:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_server_depends_on_neither_the_stores_nor_the_providers_and_the_cli_not_on_the_stores() {
    let server = dependencies("skald-server");
    assert!(server.contains(&"skald-engine".to_owned()), "{server:?}");
    for forbidden in ["skald-store", "skald-llm"] {
        assert!(
            !server.contains(&forbidden.to_owned()),
            "skald-server's [dependencies] name {forbidden}: {server:?}"
        );
    }
    let cli = dependencies("skald-cli");
    assert!(cli.contains(&"skald-engine".to_owned()), "{cli:?}");
    assert!(
        !cli.contains(&"skald-store".to_owned()),
        "skald-cli's [dependencies] name skald-store: {cli:?}"
    );
}
