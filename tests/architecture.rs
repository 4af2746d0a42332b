//! The shape of the house, checked so it stays the shape `docs/design.md` and
//! `src/lib.rs` describe: the modules of each crate import each other without circles,
//! the broker's top-level modules import only their own layer or lower ones
//! ([`LAYERS`]), no source file in `src/` passes 700 lines (unit tests included), the
//! network layer never names a Kafka API, and nothing but `src/semaphore.rs` waits on
//! glommio's semaphore.
//!
//! Imports are read from the source text: every `use` tree and inline path that starts
//! with `crate::`, `super::` or `self::`, resolved to the longest module prefix that is a
//! file. Unit-test modules (`#[cfg(test)] mod tests`) and comments are left out: a test
//! may reach anywhere, a doc link is not an import.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// Longest a source file of the broker may be, unit tests included.
const FILE_LINES_MAX: usize = 700;

type Module = Vec<String>;

/// The broker's top-level modules in layers, lowest first: a module may import its own
/// layer and the ones below it, never one above. The order is the data path's: shared
/// primitives and the metrics registry under the storage engine, who-is-who and the
/// cluster's metadata over it, the coordinators (groups, then the transactions that
/// commit group offsets) over those, replication and the controller quorum over the
/// logs, then the configuration that names them all, the shard that runs them, the
/// Kafka handlers that reach them through the shard, the network layer that calls the
/// handlers, the boot that starts the network, and the commands on top.
const LAYERS: &[&[&str]] = &[
    &[
        "failure_probe",
        "ids",
        "keyed_lock",
        "reserve_alloc",
        "semaphore",
    ],
    &["metrics"],
    &["storage"],
    &["security"],
    &["metadata"],
    &["group"],
    &["txn"],
    &["replication"],
    &["cluster"],
    &["config"],
    &["shard"],
    &["api"],
    &["net"],
    &["broker"],
    &["admin", "cli"],
];

/// Every `.rs` file under `root`, keyed by its module path (`lib.rs`, `main.rs` and
/// `mod.rs` name their directory's module).
fn modules(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read source dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(root)
                    .expect("under root")
                    .with_extension("");
                let mut module: Module = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    module.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    module.pop();
                }
                out.insert(module, path);
            }
        }
    }
    out
}

/// The file's code without its unit-test module and without comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read source");
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expands a use tree (`a::{b, c::{d, e as f}}`) into its full paths.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let mut base = prefix.to_vec();
        base.extend(head);
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], &base, out);
    } else {
        let name = tree.split(" as ").next().unwrap_or("").trim();
        if name.is_empty() {
            return;
        }
        let mut path = prefix.to_vec();
        path.extend(name.split("::").map(|s| s.trim().to_string()));
        out.push(path);
    }
}

/// The modules `module` (whose file is `path`) imports.
fn imports(module: &Module, path: &Path, all: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let text = code(path);
    let mut paths = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("use ") {
        let starts_word = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        let Some(end) = rest[i..].find(';') else {
            break;
        };
        if starts_word {
            expand(&rest[i + 4..i + end], &[], &mut paths);
        }
        rest = &rest[i + end + 1..];
    }
    for head in ["crate::", "super::", "self::"] {
        for (i, _) in text.match_indices(head) {
            if i > 0 && text.as_bytes()[i - 1].is_ascii_alphanumeric() {
                continue;
            }
            let tail: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // `super::{a, b}` names `super::a` and `super::b` (the use tree, expanded
            // above), not the parent module itself.
            if text[i + tail.len()..].starts_with('{') {
                continue;
            }
            paths.push(tail.split("::").map(String::from).collect());
        }
    }
    let mut out = BTreeSet::new();
    for mut p in paths {
        p.retain(|s| !s.is_empty());
        // `self` is this file's module, `super` its parent (a `mod.rs` is its
        // directory's module, so the same rule holds there).
        let mut base = match p.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("super") => module[..module.len().saturating_sub(1)].to_vec(),
            Some("self") => module.clone(),
            _ => continue,
        };
        let mut segs = &p[1..];
        while segs.first().is_some_and(|s| s == "super") {
            base.pop();
            segs = &segs[1..];
        }
        let mut full = base;
        full.extend(segs.iter().cloned());
        if let Some(n) = (0..=full.len())
            .rev()
            .find(|&n| all.contains_key(&full[..n]))
        {
            let target = full[..n].to_vec();
            if &target != module {
                out.insert(target);
            }
        }
    }
    out
}

/// The import circles among a crate's modules (strongly connected components of more
/// than one module), each as a list of module paths.
fn circles(root: &Path) -> Vec<Vec<String>> {
    let all = modules(root);
    let graph: BTreeMap<Module, BTreeSet<Module>> = all
        .iter()
        .map(|(m, p)| (m.clone(), imports(m, p, &all)))
        .collect();
    // Reachability closure: small graphs, so a plain search from each module will do.
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in &graph[&m] {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&Module, BTreeSet<Module>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for (m, r) in &reaches {
        if r.contains(*m) {
            let component: Vec<String> = reaches
                .iter()
                .filter(|(o, ro)| r.contains(**o) && ro.contains(*m))
                .map(|(o, _)| o.join("/"))
                .collect();
            found.insert(component);
        }
    }
    found.into_iter().collect()
}

/// Every import of a top-level module by a lower layer's module, as
/// `importer -> imported` module paths; a top-level module [`LAYERS`] does not place is
/// reported as `unplaced: name`.
fn upward_imports(root: &Path, layers: &[&[&str]]) -> Vec<String> {
    let layer_of = |top: &str| layers.iter().position(|l| l.contains(&top));
    let all = modules(root);
    let mut found = BTreeSet::new();
    for (module, path) in &all {
        let Some(top) = module.first() else {
            continue; // the crate root declares the modules; it sits above them all
        };
        let Some(mine) = layer_of(top) else {
            found.insert(format!("unplaced: {top}"));
            continue;
        };
        for target in imports(module, path, &all) {
            let Some(theirs) = target.first().and_then(|t| layer_of(t)) else {
                continue;
            };
            if theirs > mine {
                found.insert(format!("{} -> {}", module.join("/"), target.join("/")));
            }
        }
    }
    found.into_iter().collect()
}

fn root(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn no_crate_has_an_import_circle() {
    for krate in ["src", "loadgen/src", "client/src"] {
        let found = circles(&root(krate));
        assert!(found.is_empty(), "{krate}: import circles {found:?}");
    }
}

#[test]
fn the_checker_sees_a_circle_when_there_is_one() {
    let dir = tempfile::tempdir_in(root("target")).expect("tempdir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).expect("mkdir");
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").expect("write");
    std::fs::write(src.join("a/mod.rs"), "pub mod inner;\n").expect("write");
    std::fs::write(
        src.join("a/inner.rs"),
        "use crate::b::{Thing, other::{X as Y}};\n",
    )
    .expect("write");
    std::fs::write(src.join("b.rs"), "fn f() { super::a::inner::g(); }\n").expect("write");
    assert_eq!(
        circles(src),
        vec![vec!["a/inner".to_string(), "b".to_string()]]
    );
    std::fs::write(src.join("b.rs"), "// super::a::inner is only a comment\n").expect("write");
    assert!(circles(src).is_empty());
    // A use tree under `super::` imports its leaves, not the parent: no circle between
    // `a` and `a/inner` when `a` names `inner` and `inner` names only its sibling.
    std::fs::write(
        src.join("a/mod.rs"),
        "pub mod inner;\npub mod sibling;\nuse self::inner::Thing;\n",
    )
    .expect("write");
    std::fs::write(src.join("a/sibling.rs"), "pub struct S;\n").expect("write");
    std::fs::write(
        src.join("a/inner.rs"),
        "use super::{sibling::S};\nuse crate::a::inner::X;\n",
    )
    .expect("write");
    assert!(circles(src).is_empty(), "{:?}", circles(src));
}

#[test]
fn the_broker_imports_only_downward() {
    let found = upward_imports(&root("src"), LAYERS);
    assert!(
        found.is_empty(),
        "imports of a higher layer (tests/architecture.rs LAYERS; mend by a move or a \
         narrow trait the higher layer implements): {found:#?}"
    );
}

#[test]
fn the_layer_checker_sees_an_upward_import() {
    let dir = tempfile::tempdir_in(root("target")).expect("tempdir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("low")).expect("mkdir");
    std::fs::write(src.join("lib.rs"), "pub mod high;\npub mod low;\n").expect("write");
    std::fs::write(src.join("high.rs"), "use crate::low::Thing;\n").expect("write");
    std::fs::write(src.join("low/mod.rs"), "pub mod inner;\n").expect("write");
    std::fs::write(src.join("low/inner.rs"), "pub struct Thing;\n").expect("write");
    let layers: &[&[&str]] = &[&["low"], &["high"]];
    assert!(upward_imports(src, layers).is_empty());
    std::fs::write(src.join("low/inner.rs"), "use crate::high::X;\n").expect("write");
    assert_eq!(upward_imports(src, layers), vec!["low/inner -> high"]);
    // A module no layer places is named, so a new folder must take its place.
    std::fs::write(src.join("stray.rs"), "").expect("write");
    assert_eq!(upward_imports(src, layers).len(), 2);
}

#[test]
fn no_broker_source_file_passes_700_lines() {
    let long: Vec<(String, usize)> = modules(&root("src"))
        .values()
        .map(|p| {
            let lines = std::fs::read_to_string(p).expect("read").lines().count();
            (p.display().to_string(), lines)
        })
        .filter(|(_, lines)| *lines > FILE_LINES_MAX)
        .collect();
    assert!(
        long.is_empty(),
        "files over {FILE_LINES_MAX} lines: {long:?}"
    );
}

#[test]
fn the_network_layer_never_names_a_kafka_api() {
    for path in modules(&root("src/net")).values() {
        let text = code(path);
        for word in ["ApiKey", "messages::", "api::fetch", "api::produce"] {
            assert!(
                !text.contains(word),
                "{} names {word}: dispatch belongs in src/api",
                path.display()
            );
        }
    }
}

/// True when `text` imports glommio's semaphore or its permits (`sync::Semaphore`, or
/// a `sync::{…}` tree naming them).
fn names_glommios_semaphore(text: &str) -> bool {
    let named = |tree: &str| tree.contains("Semaphore") || tree.contains("Permit");
    text.contains("sync::Semaphore")
        || text
            .split("sync::{")
            .skip(1)
            .any(|rest| named(rest.split('}').next().unwrap_or(rest)))
}

#[test]
fn every_wait_on_units_goes_through_the_cancel_safe_semaphore() {
    assert!(names_glommios_semaphore(
        "use glommio::{io::Directory, sync::{Semaphore, Permit}};"
    ));
    assert!(!names_glommios_semaphore("use std::sync::{Arc, Mutex};"));
    for (module, path) in modules(&root("src")) {
        if module == ["semaphore"] {
            continue;
        }
        assert!(
            !names_glommios_semaphore(&code(&path)),
            "{} uses glommio's semaphore: a dropped wait can strand its waiters; use \
             crate::semaphore",
            path.display()
        );
    }
}
