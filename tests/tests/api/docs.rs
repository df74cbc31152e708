//! The documentation against the repository: `README.md` and the book in `docs/` (mdBook,
//! `docs/SUMMARY.md`). Pure file reads, no database:
//!
//! - every relative link and image leads to a file that exists, and a `#anchor` to a heading
//!   of its page (GitHub's and mdBook's slug: lowercase, whitespace to `-`, every character but
//!   letters, digits, `-` and `_` dropped, `-1`, `-2`, ... for repeated headings); links from the
//!   book stay inside `docs/`, so that the built book has no dead links;
//! - `docs/SUMMARY.md` lists every page of `docs/`, and every page it lists exists;
//! - the environment variables the product reads are exactly those the configuration reference
//!   (`docs/reference/configuration.md`) documents.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The configuration reference: the first cell of each row of the table under
/// [`ENV_HEADING`] names the variables it documents.
const CONFIGURATION: &str = "docs/reference/configuration.md";
/// The section of [`CONFIGURATION`] whose table is the reference.
const ENV_HEADING: &str = "## Environment variables";

/// Workspace members that are not part of the product: the tests, their harness crates, the
/// benchmarks, the chaos runs and the fuzzing entry points. Every other member of the
/// workspace (`Cargo.toml`'s `members`) counts as the product: the functions, `shared`, the
/// CLI, the console, the handlers, `handler-testing` (what users test their handlers with). A
/// new development-only crate that reads variables of its own belongs here.
const DEV_ONLY_CRATES: &[&str] = &[
    "tests",
    "tests/custom-handler",
    "dev/bench",
    "dev/chaos",
    "dev/fuzz-entry",
];

fn root() -> PathBuf {
    hookledger_tests::repo_root()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `README.md` and every Markdown file under `docs/`, relative to the repository.
fn documentation() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![PathBuf::from("README.md")];
    let mut pending = vec![root.join("docs")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path.strip_prefix(&root).unwrap().to_owned());
            }
        }
    }
    files.sort();
    files
}

/// The text of `markdown` outside fenced code blocks, with inline code spans blanked out: what
/// can hold a link or a heading.
fn prose(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut fence: Option<String> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        match &fence {
            Some(open) => {
                if marker.len() >= open.len() && marker.starts_with(&open[..1]) {
                    fence = None;
                }
                out.push('\n');
                continue;
            }
            None if marker.len() >= 3 => {
                fence = Some(marker);
                out.push('\n');
                continue;
            }
            None => {}
        }
        out.push_str(line);
        out.push('\n');
    }
    blank_code_spans(&out)
}

/// Replaces every inline code span (a run of n backticks up to the next run of exactly n) by
/// spaces, keeping newlines so that line numbers stay right.
fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run = |at: usize| chars[at..].iter().take_while(|c| **c == '`').count();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = run(i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = run(j);
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                for c in &chars[i..end + n] {
                    out.push(if *c == '\n' { '\n' } else { ' ' });
                }
                i = end + n;
            }
            None => {
                // No closing run: the backticks are literal.
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// Every link and image target of `markdown` (inline links `[text](target)` and
/// `![alt](target)`), with the line it is on.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let text = prose(markdown);
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("](") {
        let start = from + at + 2;
        let rest = &text[start..];
        let mut depth = 0;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' => depth -= 1,
                '\n' => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        // `(target "title")`: the target is the first word; `(<target>)` may hold spaces.
        let inner = rest[..end].trim();
        let target = match inner.strip_prefix('<') {
            Some(bracketed) => bracketed.split('>').next().unwrap_or_default(),
            None => inner.split_whitespace().next().unwrap_or_default(),
        };
        let line = text[..start].matches('\n').count() + 1;
        found.push((line, target.to_owned()));
        from = start;
    }
    found
}

/// GitHub's and mdBook's id of a heading: lowercase; whitespace becomes `-`; letters, digits,
/// `-` and `_` stay; everything else goes.
fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_owned())
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of `markdown`'s ATX headings (`#` to `######`), repeated ones numbered as
/// GitHub and mdBook do (`x`, `x-1`, `x-2`).
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    // Headings with their code spans' text: read the raw lines, outside fences only.
    let outside = prose(markdown);
    for (raw, kept) in markdown.lines().zip(outside.lines()) {
        let hashes = kept.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !kept[hashes..].starts_with(' ') {
            continue;
        }
        // The heading's text as rendered: no backticks or emphasis, a link's text only.
        let text = raw[hashes..].trim().trim_end_matches('#').trim();
        let mut rendered = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('[') {
            rendered.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match (after.find("]("), after.find(')')) {
                (Some(close), Some(paren)) if paren > close => {
                    rendered.push_str(&after[..close]);
                    rest = &after[paren + 1..];
                }
                _ => {
                    rendered.push('[');
                    rest = after;
                }
            }
        }
        rendered.push_str(rest);
        let rendered: String = rendered.chars().filter(|c| !"`*".contains(*c)).collect();
        let base = slug(&rendered);
        let n = seen.entry(base.clone()).or_insert(0);
        anchors.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    anchors
}

/// `base`'s directory joined with `relative`, with `.` and `..` resolved lexically; `None`
/// when it climbs out of the repository.
fn resolve(base: &Path, relative: &str) -> Option<PathBuf> {
    let mut path = PathBuf::new();
    for component in base
        .parent()
        .unwrap_or(Path::new(""))
        .join(relative)
        .components()
    {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !path.pop() {
                    return None;
                }
            }
            Component::Normal(part) => path.push(part),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(path)
}

fn is_external(target: &str) -> bool {
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| target.starts_with(scheme))
}

/// What is wrong with the links of one documentation file (`file`, relative to `root`).
fn broken_links(root: &Path, file: &Path) -> Vec<String> {
    let text = read(&root.join(file));
    let in_book = file.starts_with("docs");
    let mut problems = Vec::new();
    for (line, target) in links(&text) {
        if target.is_empty() {
            problems.push(format!("{}:{line}: an empty link", file.display()));
            continue;
        }
        if is_external(&target) {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            Some(file.to_owned())
        } else {
            resolve(file, path)
        };
        let Some(resolved) = resolved else {
            problems.push(format!(
                "{}:{line}: {target} leaves the repository",
                file.display()
            ));
            continue;
        };
        let full = root.join(&resolved);
        if !full.exists() {
            problems.push(format!(
                "{}:{line}: {target} does not exist ({})",
                file.display(),
                resolved.display()
            ));
            continue;
        }
        if in_book && !resolved.starts_with("docs") {
            problems.push(format!(
                "{}:{line}: {target} leaves the book (docs/): the built book cannot link to it; \
                 name the file in backticks instead",
                file.display()
            ));
            continue;
        }
        if in_book && full.is_dir() {
            problems.push(format!(
                "{}:{line}: {target} is a folder: the built book cannot link to it",
                file.display()
            ));
            continue;
        }
        if let Some(anchor) = anchor {
            if resolved.extension().is_none_or(|e| e != "md") {
                problems.push(format!(
                    "{}:{line}: {target}: an anchor into a file that is not Markdown",
                    file.display()
                ));
            } else if !anchors(&read(&full)).contains(anchor) {
                problems.push(format!(
                    "{}:{line}: {target}: {} has no heading #{anchor}",
                    file.display(),
                    resolved.display()
                ));
            }
        }
    }
    problems
}

#[test]
fn every_link_of_the_readme_and_the_book_leads_somewhere() {
    let root = root();
    let files = documentation();
    assert!(
        files.len() > 20,
        "the book's pages were not found: {files:?}"
    );
    let problems: Vec<String> = files
        .iter()
        .flat_map(|file| broken_links(&root, file))
        .collect();
    assert!(
        problems.is_empty(),
        "{} broken links in the documentation:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_summary_lists_every_page_of_the_book_and_only_pages_that_exist() {
    let root = root();
    let summary = Path::new("docs/SUMMARY.md");
    let listed: BTreeSet<PathBuf> = links(&read(&root.join(summary)))
        .into_iter()
        .filter(|(_, target)| !is_external(target))
        .map(|(_, target)| resolve(summary, &target).expect("inside the repository"))
        .collect();
    let pages: BTreeSet<PathBuf> = documentation()
        .into_iter()
        .filter(|file| file.starts_with("docs") && file.as_path() != summary)
        .collect();
    let missing: Vec<_> = listed
        .iter()
        .filter(|page| !root.join(page).is_file())
        .map(|page| page.display().to_string())
        .collect();
    let unlisted: Vec<_> = pages
        .difference(&listed)
        .map(|page| page.display().to_string())
        .collect();
    assert!(
        missing.is_empty() && unlisted.is_empty(),
        "docs/SUMMARY.md lists pages that do not exist: {missing:?}; pages of docs/ it does not \
         list (mdBook would leave them out): {unlisted:?}"
    );
}

#[test]
fn the_slug_rules_are_githubs_and_mdbooks() {
    assert_eq!(
        slug("After an outage: the runbook"),
        "after-an-outage-the-runbook"
    );
    assert_eq!(
        slug("The receiver's and the worker's metrics"),
        "the-receivers-and-the-workers-metrics"
    );
    assert_eq!(
        slug("The console in AWS (optional)"),
        "the-console-in-aws-optional"
    );
    let page = "# Title\n\n## `make docs`\n\n```sh\n# not a heading\n```\n\n## Twice\n## Twice\n\
                ### [A link](x.md) and *emphasis*\n";
    let found = anchors(page);
    let expected: BTreeSet<String> = [
        "title",
        "make-docs",
        "twice",
        "twice-1",
        "a-link-and-emphasis",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(found, expected);
    let text = "[a](x.md) `[b](y.md)` ![c](img.png \"title\")\n```\n[d](z.md)\n```\n[e\nf](w.md#g)";
    let targets: Vec<String> = links(text).into_iter().map(|(_, target)| target).collect();
    assert_eq!(targets, ["x.md", "img.png", "w.md#g"]);
}

/// The workspace members that count as the product (see [`DEV_ONLY_CRATES`]).
fn product_crates(root: &Path) -> Vec<PathBuf> {
    let manifest = read(&root.join("Cargo.toml"));
    let members = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("members = ["))
        .expect("Cargo.toml: members = [...] on one line");
    let members: Vec<&str> = members
        .trim_end_matches(']')
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .collect();
    assert!(
        members.contains(&"shared"),
        "Cargo.toml's members: {members:?}"
    );
    members
        .into_iter()
        .filter(|m| !DEV_ONLY_CRATES.contains(m))
        .map(PathBuf::from)
        .collect()
}

/// Every `.rs` file under `dir` (recursively).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `source` without its comments and its `#[cfg(test)]` modules (from the attribute to the
/// module's closing brace at the start of a line, as rustfmt writes it).
fn non_test_code(source: &str) -> String {
    let mut out = String::new();
    let mut lines = source.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "#[cfg(test)]" && lines.peek().is_some_and(|next| next.starts_with("mod ")) {
            for skipped in lines.by_ref() {
                if skipped == "}" {
                    break;
                }
            }
            continue;
        }
        if line.trim_start().starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The environment variables the product reads, as written in its non-test sources (the `src/`
/// of every product crate, see [`product_crates`]): every string literal that is exactly
/// `"HOOKLEDGER_..."`, `"DATABASE_URL"` or `"RUST_LOG"`, and `RUST_LOG` where tracing's
/// `EnvFilter` reads it (`from_default_env`). With the files that read each.
fn variables_read(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut read_by: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for krate in product_crates(root) {
        for file in rust_files(&root.join(&krate).join("src")) {
            let code = non_test_code(&read(&file));
            let name = file.strip_prefix(root).unwrap().display().to_string();
            // Every stretch between two quotes: a literal, or code between two literals, which
            // is never a bare upper-case name (so no need to track escapes and raw strings).
            let stretches: Vec<&str> = code.split('"').collect();
            let inner = stretches.len().saturating_sub(2);
            for &literal in stretches.iter().skip(1).take(inner) {
                let is_name = literal
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                if is_name
                    && (literal.starts_with("HOOKLEDGER_")
                        || literal == "DATABASE_URL"
                        || literal == "RUST_LOG")
                {
                    read_by
                        .entry(literal.to_owned())
                        .or_default()
                        .insert(name.clone());
                }
            }
            if code.contains("from_default_env") {
                read_by
                    .entry("RUST_LOG".to_owned())
                    .or_default()
                    .insert(name.clone());
            }
        }
    }
    read_by
}

/// The variables [`CONFIGURATION`] documents: the backquoted names in the first cell of each
/// row of the table under [`ENV_HEADING`].
fn variables_documented(root: &Path) -> BTreeSet<String> {
    let page = read(&root.join(CONFIGURATION));
    let section = page
        .split_once(&format!("{ENV_HEADING}\n"))
        .unwrap_or_else(|| panic!("{CONFIGURATION} has no section {ENV_HEADING:?}"))
        .1;
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|line| line.starts_with('|'))
        .filter_map(|line| line.split('|').nth(1))
        .flat_map(|cell| {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .collect()
}

#[test]
fn the_configuration_reference_documents_exactly_the_variables_the_code_reads() {
    let root = root();
    let read_by = variables_read(&root);
    let documented = variables_documented(&root);
    assert!(
        read_by.contains_key("DATABASE_URL") && read_by.contains_key("HOOKLEDGER_SOURCES"),
        "the product's sources were not found: {read_by:?}"
    );
    let undocumented: Vec<String> = read_by
        .iter()
        .filter(|(name, _)| !documented.contains(*name))
        .map(|(name, files)| {
            let files: Vec<&str> = files.iter().map(String::as_str).collect();
            format!("{name} (read in {})", files.join(", "))
        })
        .collect();
    let unread: Vec<&String> = documented
        .iter()
        .filter(|name| !read_by.contains_key(*name))
        .collect();
    assert!(
        undocumented.is_empty() && unread.is_empty(),
        "{CONFIGURATION} ({ENV_HEADING}) and the code disagree.\n\
         Read by the code but not documented: {undocumented:?}\n\
         Documented but read nowhere in the product: {unread:?}"
    );
}
