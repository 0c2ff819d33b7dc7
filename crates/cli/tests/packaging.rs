#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The library crates are ready to publish: each says what it is, names
//! its README (whose examples its doctests run), keywords and categories,
//! and leaves its tests out of the package (they need the workspace's
//! unpublished test crates); the rest of the workspace is never published;
//! one CHANGELOG covers them all.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn manifest(dir: &Path) -> toml::Table {
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    text.parse::<toml::Table>().unwrap()
}

const PUBLISHED: [&str; 6] = [
    "crates/core",
    "crates/sqlite",
    "crates/postgres",
    "crates/errand",
    "crates/exec",
    "crates/server",
];

#[test]
fn each_library_crate_is_described_for_publishing() {
    for dir in PUBLISHED {
        let path = repo().join(dir);
        let m = manifest(&path);
        let p = m["package"].as_table().unwrap();
        let name = p["name"].as_str().unwrap();
        assert_eq!(p["publish"].as_bool(), Some(true), "{name}");
        assert!(
            p["description"].as_str().is_some_and(|d| d.len() > 20),
            "{name}: description"
        );
        assert_eq!(p["readme"].as_str(), Some("README.md"), "{name}");
        let keywords = p["keywords"].as_array().unwrap();
        assert!((1..=5).contains(&keywords.len()), "{name}: 1 to 5 keywords");
        assert!(!p["categories"].as_array().unwrap().is_empty(), "{name}");
        for key in ["license", "rust-version", "repository", "edition"] {
            assert!(p.contains_key(key), "{name}: {key}");
        }
        // Both licences' texts ship with it (`license` names both).
        assert_eq!(
            manifest(&repo())["workspace"]["package"]["license"].as_str(),
            Some("MIT OR Apache-2.0")
        );
        let mit = std::fs::read_to_string(path.join("LICENSE-MIT")).unwrap();
        assert!(mit.starts_with("MIT License"), "{name}: LICENSE-MIT");
        let apache = std::fs::read_to_string(path.join("LICENSE-APACHE")).unwrap();
        assert!(
            apache.contains("Apache License") && apache.contains("Version 2.0"),
            "{name}: LICENSE-APACHE"
        );
        let readme = std::fs::read_to_string(path.join("README.md")).unwrap();
        assert!(
            readme.starts_with(&format!("# {name}\n")),
            "{name}: README title"
        );
        assert!(readme.contains("```rust"), "{name}: README example");
        let lib = std::fs::read_to_string(path.join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("#[doc = include_str!(\"../README.md\")]\n#[cfg(doctest)]"),
            "{name}: the README's examples run as doctests"
        );
        if path.join("tests").exists() {
            let exclude = p.get("exclude").and_then(|e| e.as_array());
            assert!(
                exclude.is_some_and(|e| e.iter().any(|x| x.as_str() == Some("tests/"))),
                "{name}: tests left out of the package"
            );
        }
        // Its path dependencies on the workspace carry a version.
        let ws = manifest(&repo());
        let deps = ws["workspace"]["dependencies"].as_table().unwrap();
        for (dep, spec) in m
            .get("dependencies")
            .and_then(|d| d.as_table())
            .into_iter()
            .flatten()
        {
            let from_ws = spec.get("workspace").and_then(toml::Value::as_bool) == Some(true);
            if from_ws
                && let Some(w) = deps.get(dep).and_then(|d| d.as_table())
                && w.contains_key("path")
            {
                assert!(w.contains_key("version"), "{name}: {dep} needs a version");
            }
        }
    }
}

#[test]
fn nothing_else_in_the_workspace_is_published() {
    let ws = manifest(&repo());
    assert_eq!(ws["workspace"]["package"]["publish"].as_bool(), Some(false));
    for member in ws["workspace"]["members"].as_array().unwrap() {
        let dir = member.as_str().unwrap();
        if PUBLISHED.contains(&dir) {
            continue;
        }
        let m = manifest(&repo().join(dir));
        let publish = &m["package"]["publish"];
        assert!(
            publish.get("workspace").is_some() || publish.as_bool() == Some(false),
            "{dir} must not be published"
        );
    }
}

#[test]
fn one_changelog_covers_the_release() {
    let ws = manifest(&repo());
    let version = ws["workspace"]["package"]["version"].as_str().unwrap();
    let log = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    assert!(
        log.contains(&format!("## {version}")),
        "CHANGELOG.md has a section for {version}"
    );
}
