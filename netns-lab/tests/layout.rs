//! The lab library's layout (docs/design.md "Layout"): its rooms import
//! only downwards (experiments -> measure -> traffic -> capture -> net ->
//! report; units, rng and stats below them all), and no module imports one that imports
//! it back, directly or around a loop. Read from the sources: every
//! `crate::` path, and a room's `mod.rs` naming its own children.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// How high each room stands: a module may import its own room or lower.
fn level(room: &str) -> u32 {
    match room {
        "experiments" => 6,
        "measure" => 5,
        "traffic" => 4,
        "capture" => 3,
        "net" => 2,
        "report" => 1,
        "units" | "rng" | "stats" => 0,
        other => panic!("module `{other}` is in no room: add it to one (docs/design.md)"),
    }
}

/// Every library module by its path (`net::topology`), with its source up
/// to its unit tests.
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            if p.is_dir() {
                if stem != "bin" && stem != "bpf" {
                    walk(&p, &format!("{prefix}{stem}::"), out);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                let name = match stem.as_str() {
                    "lib" | "main" if prefix.is_empty() => continue,
                    "mod" => prefix.trim_end_matches("::").to_string(),
                    _ => format!("{prefix}{stem}"),
                };
                let src = std::fs::read_to_string(&p).unwrap();
                let src = src.split("#[cfg(test)]").next().unwrap().to_string();
                out.insert(name, src);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        "",
        &mut out,
    );
    out
}

/// The modules each module imports.
fn imports(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
            .collect()
    };
    mods.iter()
        .map(|(name, src)| {
            let mut to = BTreeSet::new();
            for (i, _) in src.match_indices("crate::") {
                let first = ident(&src[i + 7..]);
                let rest = &src[i + 7 + first.len()..];
                let second = rest.strip_prefix("::").map(ident).unwrap_or_default();
                let nested = format!("{first}::{second}");
                if mods.contains_key(&nested) {
                    to.insert(nested);
                } else if mods.contains_key(&first) {
                    to.insert(first);
                }
            }
            // A room's mod.rs names its children without `crate::`.
            if !name.contains("::") {
                for (i, _) in src.match_indices("::") {
                    let start = src[..i]
                        .rfind(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                        .map_or(0, |j| j + 1);
                    if src[..start].ends_with("::") {
                        continue;
                    }
                    let child = format!("{name}::{}", &src[start..i]);
                    if mods.contains_key(&child) {
                        to.insert(child);
                    }
                }
            }
            to.remove(name);
            (name.clone(), to)
        })
        .collect()
}

fn room(module: &str) -> &str {
    module.split("::").next().unwrap()
}

/// Imports against the rooms' order.
fn upward(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (from, to) in edges {
        for t in to {
            if room(from) != room(t) && level(room(t)) >= level(room(from)) {
                out.push(format!("{from} -> {t}"));
            }
        }
    }
    out
}

/// Modules from which an import path leads back to themselves.
fn on_loops(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let reaches_itself = |m: &String| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = edges[m].iter().collect();
        while let Some(n) = todo.pop() {
            if seen.insert(n.clone()) {
                todo.extend(edges.get(n).into_iter().flatten());
            }
        }
        seen.contains(m)
    };
    edges
        .keys()
        .filter(|m| reaches_itself(m))
        .cloned()
        .collect()
}

#[test]
fn rooms_import_only_downwards() {
    let up = upward(&imports(&modules()));
    assert!(up.is_empty(), "imports against the rooms' order: {up:#?}");
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let loops = on_loops(&imports(&modules()));
    assert!(loops.is_empty(), "modules on an import loop: {loops:?}");
}

/// The checks see what they claim to: on a made-up library where net::a
/// imports traffic::b, which imports it back, and experiments' mod.rs names
/// its child; and on the real one, a known import.
#[test]
fn the_checks_catch_a_made_up_loop_and_an_upward_import() {
    let fake: BTreeMap<String, String> = [
        ("net::a", "use crate::traffic::b::B;"),
        ("traffic::b", "use crate::net::a;"),
        ("experiments", "let x = queue::run();"),
        (
            "experiments::queue",
            "use crate::report::tables::table_header;",
        ),
        ("report::tables", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let edges = imports(&fake);
    assert_eq!(upward(&edges), ["net::a -> traffic::b"]);
    assert_eq!(on_loops(&edges), ["net::a", "traffic::b"]);
    assert!(edges["experiments"].contains("experiments::queue"));
    assert!(imports(&modules())["measure::scenario"].contains("traffic::bulk"));
}
