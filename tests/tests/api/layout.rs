//! The workspace's shape, checked on every `make test`: the pure verification crate's dependency
//! tree, and no module dependency cycle inside a product crate.
//!
//! Crates cannot form a cycle (cargo refuses one), but modules inside a crate can: `config` using
//! `db` while `db` uses `config` makes both one unit that can only be read, tested and split
//! together. The check reads the sources as text (no compiler plug-in, no extra tool to build):
//!
//! - a file's module path comes from its place under `src/` (`ledger/claim.rs` is
//!   `ledger::claim`, `lib.rs` and `main.rs` the root);
//! - every `crate::...` and `super::...` path in the file's code (`use` trees expanded, comments
//!   and `#[cfg(test)]` modules left out: tests may reach anywhere) is resolved to the longest
//!   known module it names;
//! - a dependency of module `a::b::x` on `a::c::y` is a dependency of `a::b` on `a::c`: the two
//!   children of their nearest common ancestor, the way one reads a table of contents. A parent
//!   using its own child (or a child its parent) is containment, not a dependency;
//! - a strongly connected set of two or more siblings is a cycle, reported with one `file:line`
//!   per edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace root (this crate is `tests/`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// The crates a user deploys or depends on; dev-only crates (bench, chaos, fuzz entry points,
/// this test crate) are not checked.
const PRODUCT_CRATES: &[&str] = &[
    "verify",
    "shared",
    "handlers",
    "handler-testing",
    "cli",
    "console",
    "hookledger",
    "functions/receiver",
    "functions/worker",
    "functions/sweeper",
    "functions/auditor",
    "functions/replay",
    "functions/migrate",
    "functions/console",
];

#[test]
fn the_verification_crate_has_no_io_in_its_dependency_tree() {
    let output = std::process::Command::new(env!("CARGO"))
        .current_dir(workspace())
        .args([
            "tree",
            "--locked",
            "--offline",
            "-p",
            "hookledger-verify",
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let names: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        names.contains("hmac") && names.contains("hookledger-verify"),
        "the tree was not read: {names:?}"
    );
    let forbidden: Vec<&String> = names
        .iter()
        .filter(|name| {
            [
                "tokio",
                "postgres",
                "aws-",
                "reqwest",
                "hyper",
                "openssl",
                "native-tls",
                "lambda",
            ]
            .iter()
            .any(|bad| name.contains(bad))
        })
        .collect();
    assert!(
        forbidden.is_empty(),
        "hookledger-verify must stay pure (no I/O), but its tree has {forbidden:?}"
    );
}

#[test]
fn no_product_crate_has_a_module_dependency_cycle() {
    let mut found = BTreeMap::new();
    for krate in PRODUCT_CRATES {
        let src = workspace().join(krate).join("src");
        // A crate moved or renamed without this list would otherwise go unchecked, silently.
        assert!(src.is_dir(), "{krate}: no {} (moved?)", src.display());
        for (line, witnesses) in module_cycles(krate, &src) {
            found.insert(line, witnesses);
        }
    }
    let cycles: Vec<String> = found
        .iter()
        .map(|(line, witnesses)| format!("{line}\n    {}", witnesses.join("\n    ")))
        .collect();
    assert!(
        cycles.is_empty(),
        "module dependency cycles (each edge with one place that makes it):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_cycle_check_finds_a_cycle_between_siblings_and_ignores_containment() {
    let dir = std::env::temp_dir().join(format!("layout-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod a;\npub mod b;\npub mod c;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "pub mod x;\nuse self::x::X;\n").unwrap();
    std::fs::write(
        dir.join("a/x.rs"),
        "use super::super::b::B;\npub struct X;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "// crate::c in a comment is not a dependency\nuse crate::{a::{x::X}};\npub struct B;\n\
         const C: &str = \"crate::c in a string neither\";\n\
         const D: &str = r#\"\n  nor crate::c in a raw \"string\" of lines\"#;\n/* nor crate::c here */\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("c.rs"),
        "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n",
    )
    .unwrap();
    let cycles = module_cycles("demo", &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let lines: Vec<&String> = cycles.keys().collect();
    assert_eq!(lines, ["demo: crate: a, b"], "{cycles:?}");
}

/// A module path from the crate root: `["ledger", "claim"]`; the root is `[]`.
type ModPath = Vec<String>;

/// The module cycles of the crate whose sources are in `src`: one entry per cycle, keyed by its
/// `<crate>: <parent>: <sorted members>` line, with one `from -> to (file:line)` witness per edge.
fn module_cycles(krate: &str, src: &Path) -> BTreeMap<String, Vec<String>> {
    let files = rust_files(src);
    let modules: BTreeSet<ModPath> = files.iter().map(|f| module_of(src, f)).collect();
    // (from, to) sibling edge -> a witness.
    let mut edges: BTreeMap<(ModPath, ModPath), String> = BTreeMap::new();
    for file in &files {
        let here = module_of(src, file);
        let text = std::fs::read_to_string(file).expect("a readable source file");
        for (line_no, path) in paths_in(&text) {
            let Some(target) = resolve(&here, &path, &modules) else {
                continue;
            };
            let Some((from, to)) = siblings(&here, &target) else {
                continue;
            };
            let rel = file.strip_prefix(src).unwrap_or(file).display().to_string();
            edges
                .entry((from, to))
                .or_insert_with(|| format!("{} ({rel}:{line_no})", path.join("::")));
        }
    }
    let mut out = BTreeMap::new();
    for component in strongly_connected(&edges) {
        let parent = component[0][..component[0].len() - 1].join("::");
        let parent = if parent.is_empty() {
            "crate".to_owned()
        } else {
            parent
        };
        let members: Vec<String> = component
            .iter()
            .map(|m| m.last().cloned().unwrap_or_default())
            .collect();
        let set: BTreeSet<&ModPath> = component.iter().collect();
        let witnesses = edges
            .iter()
            .filter(|((a, b), _)| set.contains(a) && set.contains(b))
            .map(|((a, b), w)| format!("{} -> {}: {w}", a.join("::"), b.join("::")))
            .collect();
        let line = if parent == "crate" {
            format!("{krate}: crate: {}", members.join(", "))
        } else {
            format!("{krate}: crate::{parent}: {}", members.join(", "))
        };
        out.insert(line, witnesses);
    }
    out
}

/// Every `.rs` file under `dir`, except test-only files (`tests.rs`, `test_support.rs`) and
/// binaries' `bin/` folders (each is its own root, checked with its crate only by name).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "bin" {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" && name != "test_support.rs" {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The module a file defines: `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs`, `main.rs` the root.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: ModPath = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod")) {
        parts.pop();
    }
    if parts.len() == 1 && matches!(parts[0].as_str(), "lib" | "main") {
        parts.clear();
    }
    parts
}

/// The `crate::`, `super::` and `self::` paths in a file's code with their 1-based line numbers,
/// `use` trees expanded (`use crate::{a, b::{c}}` gives `crate::a` and `crate::b::c`). Comments,
/// strings and everything from a `#[cfg(test)]` module on are left out.
fn paths_in(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut pending_cfg_test = false;
    let mut use_stmt: Option<(usize, String)> = None;
    let code = code_only(text);
    for (i, line) in code.lines().enumerate() {
        let line_no = i + 1;
        let trimmed = line.trim();
        if trimmed.starts_with("#[cfg(test)]") {
            pending_cfg_test = true;
            continue;
        }
        if pending_cfg_test && trimmed.starts_with("mod ") && trimmed.ends_with('{') {
            break;
        }
        if !trimmed.is_empty() && !trimmed.starts_with("#[") {
            pending_cfg_test = false;
        }
        if let Some((start, mut acc)) = use_stmt.take() {
            acc.push_str(line);
            if line.contains(';') {
                out.extend(expand_use(&acc).into_iter().map(|p| (start, p)));
            } else {
                use_stmt = Some((start, acc));
            }
            continue;
        }
        let is_use = trimmed.starts_with("use ")
            || trimmed.starts_with("pub use ")
            || trimmed.starts_with("pub(crate) use ");
        if is_use {
            if line.contains(';') {
                out.extend(expand_use(line).into_iter().map(|p| (line_no, p)));
            } else {
                use_stmt = Some((line_no, line.to_owned()));
            }
            continue;
        }
        for root in ["crate::", "super::", "self::"] {
            let mut rest = line;
            while let Some(at) = rest.find(root) {
                let before = rest[..at].chars().last();
                let tail = &rest[at..];
                rest = &rest[at + root.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let mut path = Vec::new();
                for seg in tail.split("::") {
                    let ident: String = seg
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    let whole = ident.len() == seg.len();
                    if !ident.is_empty() {
                        path.push(ident);
                    }
                    if !whole || path.is_empty() {
                        break;
                    }
                }
                out.push((line_no, path));
            }
        }
    }
    out
}

/// `text` with comments and the contents of string literals blanked (`"crate::x"` and
/// `// crate::x` name no dependency), line breaks kept so line numbers stay. Handles escapes,
/// raw strings (`r#"..."#`), multi-line strings and block comments; a `'"'` char literal is
/// left alone.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if c == '\'' && next == Some('"') && chars.get(i + 2) == Some(&'\'') {
            out.push_str("'\"'");
            i += 3;
        } else if c == 'r' && matches!(next, Some('"' | '#')) && !ident_before(&chars, i) {
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('"');
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                if chars[j] == '\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push('"');
            i = j;
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if chars.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether the character before `i` continues an identifier (so `r` there is not a raw-string
/// prefix).
fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// The paths a `use` statement brings in, expanded from its tree; only those rooted at `crate`,
/// `super` or `self`.
fn expand_use(stmt: &str) -> Vec<Vec<String>> {
    let body = stmt.trim();
    let body = body
        .trim_start_matches("pub(crate) ")
        .trim_start_matches("pub ")
        .trim_start_matches("use ")
        .trim_end_matches(';')
        .trim();
    let mut out = Vec::new();
    expand_tree(&Vec::new(), body, &mut out);
    out.retain(|p| {
        matches!(
            p.first().map(String::as_str),
            Some("crate" | "super" | "self")
        )
    });
    out
}

/// Expand one use tree under `prefix` into `out`.
fn expand_tree(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let mut base = prefix.to_vec();
        base.extend(
            head.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_tree(&base, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_tree(&base, &inner[start..], out);
    } else if !tree.is_empty() {
        let tree = tree.split(" as ").next().unwrap_or(tree).trim();
        let mut path = prefix.to_vec();
        path.extend(
            tree.split("::")
                .filter(|s| !s.is_empty() && *s != "*")
                .map(str::to_owned),
        );
        if path.last().is_some_and(|s| s == "self") {
            path.pop();
        }
        out.push(path);
    }
}

/// The known module a path starting at `crate`, `super` or `self` names, seen from `here`: its
/// longest prefix that is a module.
fn resolve(here: &ModPath, path: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let mut base: ModPath = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "self" => here.clone(),
        "super" => {
            let mut b = here.clone();
            b.pop()?;
            b
        }
        _ => return None,
    };
    let mut rest = &path[1..];
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    let mut best = base.clone();
    for seg in rest {
        base.push(seg.clone());
        if modules.contains(&base) {
            best = base.clone();
        } else {
            break;
        }
    }
    Some(best)
}

/// The two children of the nearest common ancestor of `from` and `to` that contain them, or
/// `None` when one contains the other.
fn siblings(from: &ModPath, to: &ModPath) -> Option<(ModPath, ModPath)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((from[..=common].to_vec(), to[..=common].to_vec()))
}

/// Tarjan's strongly connected components of two or more nodes, each sorted.
fn strongly_connected(edges: &BTreeMap<(ModPath, ModPath), String>) -> Vec<Vec<ModPath>> {
    let mut graph: BTreeMap<&ModPath, Vec<&ModPath>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        graph.entry(a).or_default().push(b);
        graph.entry(b).or_default();
    }
    struct State<'a> {
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(
        v: &'a ModPath,
        graph: &BTreeMap<&'a ModPath, Vec<&'a ModPath>>,
        s: &mut State<'a>,
    ) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in &graph[v] {
            if !s.index.contains_key(w) {
                visit(w, graph, s);
                let lw = s.low[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(lw));
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(v, &graph, &mut state);
        }
    }
    state.out
}

/// Issue 25: "crates.io-ready manifests, publish metadata, licence and README per crate, so
/// publishing later is one command". The product crates are exactly these, each with a
/// description, the licence and a README, a version on every path dependency (what cargo
/// publish needs), and no normal or build dependency on a crate that is not published; every
/// other crate says `publish = false`.
#[test]
fn the_product_crates_are_ready_to_publish_and_the_others_never_are() {
    let output = std::process::Command::new(env!("CARGO"))
        .current_dir(workspace())
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--locked",
            "--offline",
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "{output:?}");
    let meta: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let published: BTreeSet<&str> = packages
        .iter()
        .filter(|p| p["publish"].is_null())
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let expected: BTreeSet<&str> = [
        "hookledger",
        "hookledger-core",
        "hookledger-verify",
        "hookledger-receiver",
        "hookledger-worker",
        "hookledger-sweeper",
        "hookledger-auditor",
        "hookledger-replay",
        "hookledger-migrate",
        "hookledger-console-function",
        "hookledger-console",
        "hookledger-cli",
        "hookledger-testing",
    ]
    .into();
    assert_eq!(published, expected);
    let mut problems = Vec::new();
    for package in packages.iter().filter(|p| p["publish"].is_null()) {
        let name = package["name"].as_str().unwrap();
        let version = package["version"].as_str().unwrap();
        if package["description"].as_str().unwrap_or("").is_empty() {
            problems.push(format!("{name}: no description"));
        }
        if package["license"] != "MIT" {
            problems.push(format!("{name}: licence is not MIT"));
        }
        let manifest = std::path::Path::new(package["manifest_path"].as_str().unwrap());
        match package["readme"].as_str() {
            Some(readme) if manifest.parent().unwrap().join(readme).is_file() => {}
            other => problems.push(format!("{name}: README {other:?} missing")),
        }
        for dep in package["dependencies"].as_array().unwrap() {
            let kind = dep["kind"].as_str().unwrap_or("normal");
            if kind == "dev" || dep["path"].is_null() {
                continue;
            }
            let dep_name = dep["name"].as_str().unwrap();
            if !published.contains(dep_name) {
                problems.push(format!(
                    "{name}: depends on {dep_name}, which is not published"
                ));
            }
            if dep["req"] != format!("^{version}") {
                problems.push(format!(
                    "{name}: path dependency {dep_name} has version requirement {} (not ^{version})",
                    dep["req"]
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Issue 29: one TLS and crypto stack. PostgreSQL needs OpenSSL (postgres-native-tls); the AWS
/// SDK's default HTTPS client brought rustls on aws-lc-rs beside it, and its legacy `rustls`
/// feature rustls 0.21 on ring. Every HTTPS client now runs on OpenSSL (`shared::https`,
/// `shared::aws::HttpClient`): no crate of the workspace may build another stack again, and
/// OpenSSL must still be found (so the check cannot pass on a broken `cargo tree`).
#[test]
fn the_workspace_builds_one_tls_stack_openssl() {
    let inverted = |spec: &str| {
        let output = std::process::Command::new(env!("CARGO"))
            .current_dir(workspace())
            .args([
                "tree",
                "--workspace",
                "--locked",
                "--offline",
                "--edges",
                "normal,build",
                "--invert",
                spec,
            ])
            .output()
            .expect("cargo tree runs");
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    };
    for spec in [
        "ring",
        "rustls",
        "aws-lc-rs",
        "aws-lc-sys",
        "s2n-tls",
        "boring-sys",
    ] {
        let text = inverted(spec);
        // Absent: cargo says there is nothing to print, or that no package matches.
        assert!(
            text.contains("nothing to print") || text.contains("did not match any packages"),
            "{spec} is built again:\n{text}"
        );
    }
    let openssl = inverted("openssl-sys");
    assert!(
        openssl.contains("postgres-native-tls") && openssl.contains("hookledger-core"),
        "OpenSSL is no longer found where PostgreSQL needs it:\n{openssl}"
    );
}

/// `(section, "key = value")` of every `[profile.*]` entry in a Cargo.toml (comments and blank
/// lines left out).
fn profiles(manifest: &str) -> BTreeSet<(String, String)> {
    let mut section = String::new();
    let mut entries = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.to_string();
        } else if section.starts_with("profile.") {
            entries.insert((section.clone(), line.to_string()));
        }
    }
    entries
}

/// The lines of a file that are neither comments nor blank.
fn settings(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// A project made from the starter builds as hookledger builds itself (profiles and
/// `.cargo/config.toml` apply only at the root of the workspace that builds the binaries, so the
/// starter carries copies): its Lambda packages with the same release profile and C flags, its
/// tests with the same dev profile.
#[test]
fn the_starter_builds_with_the_workspace_s_profiles_and_c_flags() {
    let root = workspace();
    let read = |path: &str| {
        std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let ours = profiles(&read("Cargo.toml"));
    assert!(
        ours.contains(&("profile.release".into(), "strip = true".into())),
        "the parse found the release profile: {ours:?}"
    );
    let starter = profiles(&read("starter/Cargo.toml"));
    let only_ours: Vec<_> = ours.difference(&starter).collect();
    let only_starter: Vec<_> = starter.difference(&ours).collect();
    assert!(
        only_ours.is_empty() && only_starter.is_empty(),
        "starter/Cargo.toml's profiles differ from Cargo.toml's: only in Cargo.toml \
         {only_ours:?}, only in the starter {only_starter:?}"
    );
    assert_eq!(
        settings(&read("starter/.cargo/config.toml")),
        settings(&read(".cargo/config.toml")),
        "starter/.cargo/config.toml's settings differ from .cargo/config.toml's"
    );
    // The perl that config points openssl-src at, byte for byte and executable.
    assert_eq!(
        read("starter/.cargo/openssl-configure-perl"),
        read(".cargo/openssl-configure-perl"),
        "starter/.cargo/openssl-configure-perl differs from .cargo/openssl-configure-perl"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.join("starter/.cargo/openssl-configure-perl"))
        .unwrap()
        .permissions()
        .mode();
    assert!(
        mode & 0o111 != 0,
        "starter/.cargo/openssl-configure-perl is not executable"
    );
}
