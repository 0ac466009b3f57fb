//! The module graph has no cycle: every file of `src/` is a node, and an edge runs from a module
//! to each module whose items it names (through `use`, a path in code, or a path inside a
//! macro's arguments). A name brought in by `use` counts as the module that defines it,
//! so a `mod.rs` that re-exports its children is not a cycle; a child that uses what its
//! `mod.rs` defines, while the `mod.rs` uses the child, is. Test-only code (`#[cfg(test)]`
//! items and the files they declare) is left out.
//!
//! cargo-modules (`cargo modules dependencies --acyclic`) draws the same graph through
//! rust-analyzer, whose library crates it would build from source on every fresh CI machine, so
//! this test reads the sources with `syn`, which the derive macros already bring.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module path below the crate root (`["config", "probe"]`); the root is `[]`.
type ModPath = Vec<String>;

struct Module {
    file: PathBuf,
    /// Child modules this file declares (`mod x;`), test-only ones left out.
    children: BTreeSet<String>,
    /// Paths this module names, as written (first segment `crate`, `super`, `self` or a child).
    named: Vec<Vec<String>>,
    /// Names bound by `use`: the name → the path it names.
    reexports: HashMap<String, Vec<String>>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let tokens = a.meta.require_list().map(|l| l.tokens.to_string());
            tokens.is_ok_and(|t| t == "test")
        }
    })
}

/// Flattens a use tree into the paths it names, each with the name it binds (for re-exports).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                let bound = prefix.last().cloned().unwrap_or_default();
                out.push((prefix.clone(), bound));
            } else {
                let mut p = prefix.clone();
                p.push(name.clone());
                out.push((p, name));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut p = prefix.clone();
            if r.ident != "self" {
                p.push(r.ident.to_string());
            }
            out.push((p, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), String::new())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

struct Collector<'a> {
    module: &'a mut Module,
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Type(t) => &t.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if is_test_only(attrs) {
            return;
        }
        match item {
            // A file module is a child of its own; an inline one's items count as this file's.
            syn::Item::Mod(m) => {
                if m.content.is_none() {
                    self.module.children.insert(m.ident.to_string());
                }
                syn::visit::visit_item_mod(self, m);
            }
            syn::Item::Use(u) => {
                let mut found = Vec::new();
                use_paths(&u.tree, &mut Vec::new(), &mut found);
                // Any `use`, public or not, binds a name its children may reach through
                // `super::`: either way the name stands for what it imports.
                for (path, bound) in found {
                    if !bound.is_empty() {
                        self.module.reexports.insert(bound, path.clone());
                    }
                    self.module.named.push(path);
                }
            }
            _ => syn::visit::visit_item(self, item),
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.module.named.push(segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        tokens_paths(mac.tokens.clone(), &mut self.module.named);
    }
}

/// `crate::a::b` and `super::x` sequences inside a macro's arguments (`format!`, `tracing`),
/// which syn leaves as tokens.
fn tokens_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        if let TokenTree::Group(g) = &trees[i] {
            tokens_paths(g.stream(), out);
        }
        let starts = matches!(&trees[i], TokenTree::Ident(id) if id == "crate" || id == "super");
        if starts {
            let mut path = vec![trees[i].to_string()];
            let mut j = i + 1;
            loop {
                let colons = matches!((trees.get(j), trees.get(j + 1)),
                    (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':');
                match (colons, trees.get(j + 2)) {
                    (true, Some(TokenTree::Ident(id))) => {
                        path.push(id.to_string());
                        j += 3;
                    }
                    _ => break,
                }
            }
            if path.len() > 1 {
                out.push(path);
            }
            i = j;
        } else {
            i += 1;
        }
    }
}

/// Every module of the library, read from `src/lib.rs` down.
fn modules(src: &Path) -> BTreeMap<ModPath, Module> {
    let mut found = BTreeMap::new();
    let mut queue = vec![(Vec::new(), src.join("lib.rs"))];
    while let Some((path, file)) = queue.pop() {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut module = Module {
            file: file.clone(),
            children: BTreeSet::new(),
            named: Vec::new(),
            reexports: HashMap::new(),
        };
        Collector {
            module: &mut module,
        }
        .visit_file(&ast);
        // A file's own folder: src/a/mod.rs and src/lib.rs hold their children beside them,
        // src/a/b.rs in src/a/b/.
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs") => file.parent().expect("a folder").to_path_buf(),
            _ => file.with_extension(""),
        };
        for child in &module.children {
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(child).join("mod.rs");
            let child_file = if flat.exists() { flat } else { nested };
            let mut child_path = path.clone();
            child_path.push(child.clone());
            queue.push((child_path, child_file));
        }
        found.insert(path, module);
    }
    found
}

/// The module a path written in `from` names an item of: its longest prefix that is a module,
/// followed through `pub use` re-exports to where the item is defined. `None` for paths into
/// other crates and local names.
fn resolve(
    mods: &BTreeMap<ModPath, Module>,
    from: &ModPath,
    path: &[String],
    depth: usize,
) -> Option<ModPath> {
    let (mut base, rest): (ModPath, &[String]) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (from.clone(), &path[1..]),
        "super" => {
            let mut base = from.clone();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            (base, rest)
        }
        first if mods.get(from)?.children.contains(first) => (from.clone(), path),
        _ => return None,
    };
    let mut i = 0;
    while i < rest.len() {
        let mut next = base.clone();
        next.push(rest[i].clone());
        if !mods.contains_key(&next) {
            break;
        }
        base = next;
        i += 1;
    }
    // The item named in `base`: when `base` re-exports it, the module it comes from.
    if depth < 8 {
        if let Some(target) = rest
            .get(i)
            .and_then(|name| mods.get(&base)?.reexports.get(name))
        {
            if let Some(defined) = resolve(mods, &base, target, depth + 1) {
                return Some(defined);
            }
        }
    }
    Some(base)
}

fn name(path: &ModPath) -> String {
    match path.is_empty() {
        true => "crate".to_string(),
        false => path.join("::"),
    }
}

/// Strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: HashMap<&'a ModPath, usize>,
        low: HashMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a ModPath) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

fn graph(
    src: &Path,
) -> (
    BTreeMap<ModPath, Module>,
    BTreeMap<ModPath, BTreeSet<ModPath>>,
) {
    let mods = modules(src);
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, module) in &mods {
        let out = edges.entry(from.clone()).or_default();
        for path in &module.named {
            if let Some(to) = resolve(&mods, from, path, 0) {
                // A module naming its own items, or an ancestor only as the way down to a
                // sibling (resolve has already walked past it), is no edge.
                if &to != from {
                    out.insert(to);
                }
            }
        }
    }
    (mods, edges)
}

#[test]
fn the_module_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mods, edges) = graph(&src);
    assert!(mods.len() > 50, "read only {} modules", mods.len());
    let found = cycles(&edges);
    let mut report = String::new();
    for component in &found {
        report.push_str(&format!("\ncycle of {} modules:\n", component.len()));
        for m in component {
            let within: Vec<String> = edges[m]
                .iter()
                .filter(|t| component.contains(t))
                .map(name)
                .collect();
            report.push_str(&format!(
                "  {} ({}) uses {}\n",
                name(m),
                mods[m]
                    .file
                    .strip_prefix(&src)
                    .unwrap_or(&mods[m].file)
                    .display(),
                within.join(", ")
            ));
        }
    }
    assert!(found.is_empty(), "the module graph has cycles:{report}");
}

/// The check finds a cycle where there is one: two modules naming each other, a child using its
/// parent's own item while the parent uses the child, and a cycle through a macro's arguments.
#[test]
fn the_check_sees_a_cycle() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let write = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("a folder");
        std::fs::write(p, text).expect("a file");
    };
    write(
        "lib.rs",
        "mod a; mod b; mod p; mod leaf;\n#[cfg(test)] mod tests;\n",
    );
    write("a.rs", "use crate::b::B; pub struct A;\n");
    write(
        "b.rs",
        "pub struct B; fn f() { tracing::info!(x = ?crate::a::A); }\n",
    );
    write(
        "p/mod.rs",
        "mod c; pub use c::C; pub struct P; fn g() -> C { C }\n",
    );
    write("p/c.rs", "pub struct C; fn h(_: super::P) {}\n");
    write(
        "leaf.rs",
        "pub use crate::p::C; pub fn l() -> crate::p::C { C }\n",
    );
    write("tests.rs", "use crate::a::A; use crate::leaf::l;\n");
    let (_, edges) = graph(dir.path());
    let found: Vec<Vec<String>> = cycles(&edges)
        .iter()
        .map(|c| c.iter().map(name).collect())
        .collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found.contains(&vec!["a".to_string(), "b".to_string()]),
        "{found:?}"
    );
    assert!(
        found.contains(&vec!["p".to_string(), "p::c".to_string()]),
        "{found:?}"
    );
    // A re-export through a parent is not an edge to the parent: leaf uses p::c, not p.
    let leaf = edges[&vec!["leaf".to_string()]].clone();
    assert!(
        leaf.contains(&vec!["p".to_string(), "c".to_string()]),
        "{leaf:?}"
    );
    assert!(!leaf.contains(&vec!["p".to_string()]), "{leaf:?}");
}

/// The layers `src/lib.rs` states, bottom first: a module may import from its own layer's
/// modules (the graph stays acyclic) and from lower layers, never from a higher one.
const LAYERS: &[&[&str]] = &[
    &["util", "secret", "buckets"],
    &[
        "outcome", "timeline", "stream", "checks", "schedule", "listener", "cloud", "tls",
    ],
    &["probe::flavor"],
    &["config", "web_config"],
    &["result"],
    &["probe"],
    &["runner"],
    &[
        "sinks",
        "maintenance",
        "summary",
        "report",
        "gate",
        "calibrate",
        "slo_rules",
        "sim",
    ],
    &["daemon"],
    &["fleet"],
    &["cli"],
    &["commands"],
    &["crate"],
];

/// The layer of a module: that of the longest name in `LAYERS` it falls under.
fn layer(m: &ModPath) -> Option<(usize, String)> {
    let full = name(m);
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, names)| names.iter().map(move |n| (i, *n)))
        .filter(|(_, n)| full == *n || full.starts_with(&format!("{n}::")))
        .max_by_key(|(_, n)| n.len())
        .map(|(i, n)| (i, n.to_string()))
}

#[test]
fn imports_point_down_the_layers_lib_rs_states() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mods, edges) = graph(&src);
    let mut wrong = Vec::new();
    for (from, tos) in &edges {
        let Some((lf, nf)) = layer(from) else {
            wrong.push(format!("{} is in no layer", name(from)));
            continue;
        };
        for to in tos {
            let Some((lt, nt)) = layer(to) else { continue };
            if lt > lf && nt != nf {
                wrong.push(format!(
                    "{} ({}) imports {} ({}), a higher layer",
                    name(from),
                    mods[from]
                        .file
                        .strip_prefix(&src)
                        .unwrap_or(&mods[from].file)
                        .display(),
                    name(to),
                    nt
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
