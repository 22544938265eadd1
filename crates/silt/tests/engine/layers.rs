//! The import check: layers point down, and no module cycles.
//!
//! The core crate is layered, bottom to top:
//!
//! ```text
//! error, varint -> value, clock -> geo, workload -> storage -> lsm -> index
//!   -> schema -> txn -> dataset -> db -> pubsub, synergy
//! ```
//!
//! A module may name (in `use` lines or inline paths, `crate::` or
//! `super::`) only modules of its own layer or below. Inside each top-level
//! module, the sub-modules' references must form no cycle (`lsm::kind` may
//! use `lsm::memtable` or the reverse, never both, directly or through
//! others). The same no-cycle rule holds for the CLI crate's modules. Test
//! code (`#[cfg(test)]` modules, `tests.rs` files) is not checked.
//!
//! This reads the source as text: it sees every path that starts with
//! `crate::` or `super::`, outside comments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layer of each top-level module of the core crate; a module may use
/// modules of its layer or lower.
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("varint", 0),
    ("value", 1),
    ("clock", 1),
    ("geo", 2),
    ("storage", 3),
    ("lsm", 4),
    ("index", 5),
    ("schema", 6),
    ("txn", 7),
    ("dataset", 8),
    ("db", 9),
    ("pubsub", 10),
    ("synergy", 10),
    // Generators of records and operations for examples, tests and
    // benchmarks: above everything whose types they make.
    ("workload", 11),
];

fn layer(m: &str) -> Option<u32> {
    LAYERS.iter().find(|(n, _)| *n == m).map(|(_, l)| *l)
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a source file: `lsm/tree/mod.rs` -> `[lsm, tree]`,
/// `lsm/kind.rs` -> `[lsm, kind]`, `lib.rs` -> `[]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("file below src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a file without comments and without a trailing
/// `#[cfg(test)]` module.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let mut l = line;
        if in_block {
            match l.find("*/") {
                Some(i) => {
                    l = &l[i + 2..];
                    in_block = false;
                }
                None => continue,
            }
        }
        if let Some(i) = l.find("/*") {
            if !l[i..].contains("*/") {
                in_block = true;
            }
            l = &l[..i];
        }
        if let Some(i) = l.find("//") {
            l = &l[..i];
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Expand a `use` tree such as `crate::{a::b, c::{d, e}}` into full paths.
fn expand_use(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let inner = tree[open + 1..]
        .strip_suffix('}')
        .unwrap_or(&tree[open + 1..]);
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let bytes = inner.as_bytes();
    for i in 0..=bytes.len() {
        let c = bytes.get(i).copied();
        match c {
            Some(b'{') => depth += 1,
            Some(b'}') => depth -= 1,
            Some(b',') | None if depth == 0 => {
                let part = &inner[start..i];
                if !part.is_empty() {
                    for p in expand_use(part) {
                        out.push(format!("{prefix}{p}"));
                    }
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// Absolute module paths (as segment lists) that `code` refers to, seen
/// from the module `here`.
fn references(code: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    // `use` statements (may span lines and hold groups).
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before_ok = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        let after = &rest[i + 4..];
        let Some(end) = after.find(';') else { break };
        if before_ok {
            let tree = after[..end].trim();
            if tree.starts_with("crate::") || tree.starts_with("super::") {
                paths.extend(expand_use(tree));
            }
        }
        rest = &after[end..];
    }
    // Inline paths anywhere.
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            let ok = at == 0 || {
                let b = code.as_bytes()[at - 1];
                !(b.is_ascii_alphanumeric() || b == b'_' || b == b':')
            };
            let len = code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(code.len() - at);
            if ok {
                paths.push(code[at..at + len].to_owned());
            }
            from = at + len.max(1);
        }
    }
    let mut out = Vec::new();
    for p in paths {
        let segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
        let mut abs: Vec<String> = Vec::new();
        let mut iter = segs.iter().peekable();
        if iter.peek() == Some(&&"crate") {
            iter.next();
        } else {
            // `super` of module a::b (file `a/b.rs` or `a/b/mod.rs`) is `a`.
            abs = here.to_vec();
            while iter.peek() == Some(&&"super") {
                iter.next();
                abs.pop();
            }
        }
        abs.extend(iter.map(|s| s.to_string()));
        out.push(abs);
    }
    out
}

struct Graph {
    /// (from module, to module, file) edges.
    edges: BTreeMap<String, BTreeSet<String>>,
    witness: BTreeMap<(String, String), String>,
}

impl Graph {
    fn new() -> Graph {
        Graph {
            edges: BTreeMap::new(),
            witness: BTreeMap::new(),
        }
    }

    fn add(&mut self, from: &str, to: &str, file: &str) {
        if from == to {
            return;
        }
        self.edges
            .entry(from.to_owned())
            .or_default()
            .insert(to.to_owned());
        self.witness
            .entry((from.to_owned(), to.to_owned()))
            .or_insert_with(|| file.to_owned());
    }

    /// One cycle, if any, as a readable chain with the file of each step.
    fn cycle(&self) -> Option<String> {
        fn dfs(
            g: &Graph,
            n: &str,
            state: &mut BTreeMap<String, u8>,
            stack: &mut Vec<String>,
        ) -> Option<Vec<String>> {
            state.insert(n.to_owned(), 1);
            stack.push(n.to_owned());
            for m in g.edges.get(n).into_iter().flatten() {
                match state.get(m.as_str()).copied().unwrap_or(0) {
                    1 => {
                        let i = stack.iter().position(|s| s == m).unwrap_or(0);
                        let mut c = stack[i..].to_vec();
                        c.push(m.clone());
                        return Some(c);
                    }
                    0 => {
                        if let Some(c) = dfs(g, m, state, stack) {
                            return Some(c);
                        }
                    }
                    _ => {}
                }
            }
            stack.pop();
            state.insert(n.to_owned(), 2);
            None
        }
        let mut state = BTreeMap::new();
        for n in self.edges.keys() {
            if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
                let mut stack = Vec::new();
                if let Some(c) = dfs(self, n, &mut state, &mut stack) {
                    let steps: Vec<String> = c
                        .windows(2)
                        .map(|w| {
                            format!(
                                "{} -> {} (in {})",
                                w[0],
                                w[1],
                                self.witness
                                    .get(&(w[0].clone(), w[1].clone()))
                                    .map(String::as_str)
                                    .unwrap_or("?")
                            )
                        })
                        .collect();
                    return Some(steps.join(", "));
                }
            }
        }
        None
    }
}

/// Per file: its module path and the modules it refers to.
fn scan(src: &Path) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut out = Vec::new();
    for f in files {
        let here = module_path(src, &f);
        if here.iter().any(|s| s == "tests" || s.ends_with("_tests")) {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("readable source");
        let refs = references(&code(&text), &here);
        let name = f
            .strip_prefix(src)
            .unwrap_or(&f)
            .to_string_lossy()
            .into_owned();
        out.push((name, here, refs));
    }
    out
}

#[test]
fn core_layers_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut upward = Vec::new();
    let mut unknown = BTreeSet::new();
    let mut per_module: BTreeMap<String, Graph> = BTreeMap::new();
    let mut top_level = Graph::new();
    for (file, here, refs) in scan(&src) {
        let Some(top) = here.first() else { continue }; // lib.rs re-exports
        let Some(my_layer) = layer(top) else {
            unknown.insert(top.clone());
            continue;
        };
        for r in refs {
            let Some(target) = r.first() else { continue };
            let Some(t_layer) = layer(target) else {
                // `crate::Foo` re-exported at the root, or a macro path.
                if target
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_lowercase())
                {
                    unknown.insert(target.clone());
                }
                continue;
            };
            top_level.add(top, target, &file);
            if t_layer > my_layer {
                upward.push(format!(
                    "{file}: `{}` (layer {my_layer}) uses `{}` (layer {t_layer})",
                    here.join("::"),
                    r.join("::")
                ));
            }
            // Sub-module edges inside one top-level module.
            if target == top && here.len() >= 2 && r.len() >= 2 {
                let from = format!("{top}::{}", here[1]);
                let to = format!("{top}::{}", r[1]);
                per_module
                    .entry(top.clone())
                    .or_insert_with(Graph::new)
                    .add(&from, &to, &file);
            }
        }
    }
    let mut problems = Vec::new();
    if !unknown.is_empty() {
        problems.push(format!(
            "modules missing from the layer table in tests/layers.rs (give each new top-level module a layer): {unknown:?}"
        ));
    }
    if !upward.is_empty() {
        problems.push(format!(
            "imports that point up a layer (see the table in tests/layers.rs):\n{}",
            upward.join("\n")
        ));
    }
    if let Some(c) = top_level.cycle() {
        problems.push(format!("cycle between top-level modules: {c}"));
    }
    for g in per_module.values() {
        if let Some(c) = g.cycle() {
            problems.push(format!("module cycle: {c}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn cli_modules_have_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../silt-cli/src");
    let mut g = Graph::new();
    for (file, here, refs) in scan(&src) {
        let Some(from) = here.first() else { continue };
        for r in refs {
            if let Some(to) = r.first()
                && src.join(format!("{to}.rs")).exists()
            {
                g.add(from, to, &file);
            }
        }
    }
    assert_eq!(g.cycle(), None, "silt-cli module cycle");
}

#[test]
fn the_checker_sees_groups_super_and_inline_paths() {
    let here = vec!["lsm".to_owned(), "tree".to_owned()];
    let c = code(
        "use crate::{error::Result, storage::{bloom::key_hash, Entry}};\n\
         use super::kind::X; // crate::db in a comment\n\
         fn f() { crate::index::g(); }\n\
         #[cfg(test)]\nmod tests { use crate::dataset::D; }\n",
    );
    let refs: Vec<String> = references(&c, &here)
        .into_iter()
        .map(|r| r.join("::"))
        .collect();
    for want in [
        "error::Result",
        "storage::bloom::key_hash",
        "storage::Entry",
        "lsm::kind::X",
        "index::g",
    ] {
        assert!(refs.iter().any(|r| r == want), "{want} not in {refs:?}");
    }
    assert!(
        !refs
            .iter()
            .any(|r| r.starts_with("db") || r.starts_with("dataset"))
    );
}
