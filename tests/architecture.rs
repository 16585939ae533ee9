//! The floors of `src/`, checked against the imports rather than by eye:
//! every file belongs to a unit (its folder under `src/`, or itself for a
//! file at the root), a unit's code names other units through `crate::`, and
//! no unit may reach, through those names, back to itself. The binaries
//! (`main.rs`, `bin/`) stand on top and are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The unit a file of `src/` belongs to, or `None` for the binaries and `lib.rs`.
fn unit_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?.to_owned();
    match first.as_str() {
        "bin" | "main.rs" | "lib.rs" => None,
        file if file.ends_with(".rs") => Some(file.trim_end_matches(".rs").to_owned()),
        folder => Some(folder.to_owned()),
    }
}

/// Unit -> the units its code (not its comments) names through `crate::`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(unit) = unit_of(file.strip_prefix(&src).expect("under src/")) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a source file");
        let named = graph.entry(unit.clone()).or_default();
        for line in text.lines().filter(|line| !line.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != unit {
                    named.insert(name);
                }
            }
        }
    }
    graph
}

/// A path from `from` back to itself through the graph, if there is one.
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_owned()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().expect("a path is never empty");
        for next in graph.get(last).into_iter().flatten() {
            if next == from {
                let mut cycle = path.clone();
                cycle.push(next.clone());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

#[test]
fn no_unit_of_src_imports_a_unit_that_imports_it() {
    let graph = imports();
    let cycles: Vec<String> = graph
        .keys()
        .filter_map(|unit| cycle_through(&graph, unit))
        .map(|cycle| cycle.join(" -> "))
        .collect();
    assert!(cycles.is_empty(), "imports that run back up:\n{}", cycles.join("\n"));
}

#[test]
fn the_floors_are_the_ones_lib_rs_describes() {
    let graph = imports();
    let names = |unit: &str| graph.get(unit).cloned().unwrap_or_default();
    // The domain stands on the ground: nothing but the root's plain helpers.
    for name in names("refund") {
        assert!(
            ["clock", "http_client"].contains(&name.as_str()),
            "refund imports {name}"
        );
    }
    // The ports below the turn know nothing of the turn, the edge or operations.
    for unit in ["chat", "ledger", "refund"] {
        for above in ["turn", "record_then_pay", "http", "ops", "startup", "config"] {
            assert!(!names(unit).contains(above), "{unit} imports {above}");
        }
    }
    // Nothing imports the edge or the wiring but the binaries.
    for (unit, named) in &graph {
        for top in ["http", "startup"] {
            assert!(
                unit == "startup" || !named.contains(top) || unit == top,
                "{unit} imports {top}"
            );
        }
    }
}
