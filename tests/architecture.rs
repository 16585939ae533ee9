//! The floors of `src/`, checked against the imports rather than by eye:
//! every file belongs to a unit (its folder under `src/`, or itself for a
//! file at the root), a unit's code names other units through `crate::`, and
//! no unit may reach, through those names, back to itself. Inside a folder
//! the same holds for its files: no two siblings name each other, however
//! indirectly. The binaries (`main.rs`, `bin/`) stand on top and are left
//! out. The floors are printed (`cargo test --test architecture -- --nocapture`)
//! and `docs/architecture.md` holds the same table.

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
        for line in code_lines(&text) {
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
    // The domain stands on the ground: nothing but the root's plain helpers
    // (the masking that refuses a card-shaped order id among them).
    for name in names("refund") {
        assert!(
            ["clock", "http_client", "mask"].contains(&name.as_str()),
            "refund imports {name}"
        );
    }
    // The ports below the turn know nothing of the turn, the intake, the edge or operations.
    for unit in ["chat", "ledger", "refund"] {
        for above in ["turn", "record_then_pay", "intake", "http", "ops", "startup", "config"] {
            assert!(!names(unit).contains(above), "{unit} imports {above}");
        }
    }
    // The intake knows the shop, not requests: it never imports the edge.
    assert!(!names("intake").contains("http"), "intake imports http");
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

/// The code lines of `text`: comments left out.
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|line| !line.trim_start().starts_with("//"))
}

/// Folder -> (sibling module -> the siblings it names), for every folder of
/// `src/` with more than one module. A module is a file, or a folder with
/// its `mod.rs` (whose own children are its business, not its siblings').
fn sibling_imports() -> BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut folders: BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let Some(parent) = file.parent() else { continue };
        let relative = parent.strip_prefix(&src).expect("under src/");
        if relative.as_os_str().is_empty() || relative.starts_with("bin") {
            continue;
        }
        let module = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        if module == "mod" {
            continue;
        }
        folders
            .entry(parent.to_path_buf())
            .or_default()
            .entry(module)
            .or_default();
    }
    // Sub-folders are modules of their parent folder too.
    let subfolders: Vec<PathBuf> = folders.keys().cloned().collect();
    for folder in subfolders {
        if let (Some(parent), Some(name)) = (folder.parent(), folder.file_name().and_then(|n| n.to_str()))
            && folders.contains_key(parent)
        {
            folders
                .get_mut(parent)
                .expect("present")
                .entry(name.to_owned())
                .or_default();
        }
    }
    for file in &files {
        let Some(parent) = file.parent() else { continue };
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        // The folder whose siblings this file's module is one of, and its name there.
        let (folder, module) = if stem == "mod" {
            match (parent.parent(), parent.file_name().and_then(|n| n.to_str())) {
                (Some(grand), Some(name)) => (grand.to_path_buf(), name.to_owned()),
                _ => continue,
            }
        } else {
            (parent.to_path_buf(), stem.to_owned())
        };
        let Some(siblings) = folders.get(&folder) else { continue };
        let names: BTreeSet<String> = siblings.keys().cloned().collect();
        let text = std::fs::read_to_string(file).expect("a source file");
        let folder_path = folder
            .strip_prefix(&src)
            .expect("under src/")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("::");
        let mut named = BTreeSet::new();
        for line in code_lines(&text) {
            for prefix in [format!("crate::{folder_path}::"), "super::".to_owned()] {
                // `super::` of a folder's `mod.rs` is the folder's parent: not siblings.
                if prefix == "super::" && stem == "mod" {
                    continue;
                }
                for (at, _) in line.match_indices(&prefix) {
                    let name: String = line[at + prefix.len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if names.contains(&name) && name != module {
                        named.insert(name);
                    }
                }
            }
        }
        folders
            .get_mut(&folder)
            .expect("present")
            .get_mut(&module)
            .expect("present")
            .extend(named);
    }
    folders
}

#[test]
fn no_file_imports_a_sibling_that_imports_it() {
    let mut cycles = Vec::new();
    for (folder, graph) in sibling_imports() {
        for module in graph.keys() {
            if let Some(cycle) = cycle_through(&graph, module) {
                let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
                let folder = folder.strip_prefix(&src).unwrap_or(&folder).display().to_string();
                cycles.push(format!("src/{folder}: {}", cycle.join(" -> ")));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "siblings that import each other:\n{}",
        cycles.join("\n")
    );
}

/// Each unit's floor: one above the highest unit it imports, 0 for a unit
/// that imports none.
fn floors(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, usize> {
    fn floor_of(
        unit: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        known: &mut BTreeMap<String, Option<usize>>,
    ) -> usize {
        match known.get(unit) {
            Some(Some(floor)) => return *floor,
            // Met again while its own imports are being floored: a cycle has no floors.
            Some(None) => panic!("{unit} imports, through other units, a unit that imports it"),
            None => {}
        }
        known.insert(unit.to_owned(), None);
        let floor = graph
            .get(unit)
            .into_iter()
            .flatten()
            .filter(|name| graph.contains_key(name.as_str()))
            .map(|name| floor_of(name, graph, known) + 1)
            .max()
            .unwrap_or(0);
        known.insert(unit.to_owned(), Some(floor));
        floor
    }
    let mut known = BTreeMap::new();
    for unit in graph.keys() {
        floor_of(unit, graph, &mut known);
    }
    known
        .into_iter()
        .map(|(unit, floor)| (unit, floor.unwrap_or_default()))
        .collect()
}

/// The floors as `docs/architecture.md` shows them.
fn floors_table() -> String {
    let graph = imports();
    let mut by_floor: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (unit, floor) in floors(&graph) {
        by_floor.entry(floor).or_default().push(unit);
    }
    let mut table = String::from("| floor | units (each imports only from floors below it) |\n| --- | --- |\n");
    for (floor, units) in by_floor.iter().rev() {
        let units: Vec<String> = units.iter().map(|u| format!("`{u}`")).collect();
        table.push_str(&format!("| {floor} | {} |\n", units.join(", ")));
    }
    table
}

#[test]
fn the_floors_are_printed_and_docs_architecture_md_shows_them() {
    let table = floors_table();
    println!("{table}");
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
        .expect("docs/architecture.md");
    assert!(
        docs.contains(&table),
        "docs/architecture.md's floors table is not the code's; the code's is:\n{table}"
    );
}

/// One tool, one place: the turn's code (its tests apart) names no tool
/// and no write, and the chat declares what it is given; the tools are the
/// `tools!` list's, one line each.
#[test]
fn the_turn_and_the_chat_name_no_tool() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let named = [
        "TOOL_NAME",
        "WriteKind",
        "refund::tool",
        "orders::tool",
        "orders::address",
        "orders::returns",
        "help::tool",
        "handoff::tool",
        "issue_refund\"",
        "get_order\"",
    ];
    for file in ["turn/mod.rs", "chat/mod.rs", "chat/openai.rs"] {
        let text = std::fs::read_to_string(src.join(file)).expect("a source file");
        // A file's own tests may name what they call.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for line in code_lines(code) {
            for name in named {
                assert!(!line.contains(name), "src/{file} names a tool: {line}");
            }
        }
    }
    let tools = std::fs::read_to_string(src.join("tools/mod.rs")).expect("tools/mod.rs");
    for file in [
        "refund",
        "handoff",
        "order",
        "help",
        "address",
        "returns",
        "cancel_order",
    ] {
        assert!(
            tools
                .lines()
                .any(|line| line.trim_end().ends_with(&format!("=> {file},"))),
            "{file} has no line in the tools! list"
        );
    }
}
