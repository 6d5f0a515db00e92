//! `cargo xtask doc-links`: every relative link of every Markdown file in the repository resolves.
//!
//! Checked, outside fenced code blocks: inline links and images (`[text](target)`,
//! `![alt](target)`), reference definitions (`[name]: target`) and, inside inline code,
//! repository paths that start at the root (`docs/...`, `crates/...`, `tests/...`,
//! `examples/...`, `xtask/...`, `.ci/...`; `tests/NAME/...` only where the root has `tests/NAME`,
//! since a crate's README says `tests/x.rs` for its own tests). A target is resolved against the file's folder (a
//! root path against the repository root) and must exist; a `#fragment` on a Markdown target
//! must name one of its headings (GitHub's anchor for it) or an explicit `id="..."`. Web links
//! (`http:`, `https:`, `mailto:`) are not fetched. Folders that are not the repository's own
//! (`target/`, `.git/`, virtual environments, nested checkouts) are skipped.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// Prefixes of inline-code spans that name a file of the repository from its root.
const ROOT_PATHS: &[&str] = &["docs/", "crates/", "tests/", "examples/", "xtask/", ".ci/"];

/// Checks every Markdown file under `root`; answers the broken links, one line each.
pub fn check(root: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    collect_markdown(root, root, &mut files)?;
    let mut problems = Vec::new();
    let mut links = 0usize;
    for file in &files {
        let text =
            std::fs::read_to_string(file).map_err(|e| format!("read {}: {e}", file.display()))?;
        for link in links_of(&text) {
            links += 1;
            if let Err(why) = resolve(root, file, &link) {
                let shown = file.strip_prefix(root).unwrap_or(file);
                problems.push(format!(
                    "{}:{}: {} ({why})",
                    shown.display(),
                    link.line,
                    link.target
                ));
            }
        }
    }
    eprintln!(
        "xtask: doc-links: {} Markdown files, {links} links, {} broken",
        files.len(),
        problems.len()
    );
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("broken links:\n{}", problems.join("\n")))
    }
}

fn collect_markdown(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            let skipped = name == "target"
                || name == "node_modules"
                || (name.starts_with('.') && name != ".ci")
                || path.join("pyvenv.cfg").exists()
                || (path != root && path.join(".git").exists());
            if !skipped {
                collect_markdown(root, &path, out)?;
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
    Ok(())
}

/// A link found in a Markdown file.
#[derive(Debug, PartialEq)]
struct Link {
    /// 1-based line number.
    line: usize,
    /// The target as written.
    target: String,
    /// Whether it was a root path found in inline code (resolved against the repository root).
    from_root: bool,
}

fn links_of(text: &str) -> Vec<Link> {
    let mut links = Vec::new();
    let mut fence: Option<String> = None;
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        let trimmed = line.trim_start();
        if let Some(open) = &fence {
            if trimmed.starts_with(open.as_str()) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            let marker: String = trimmed
                .chars()
                .take_while(|c| *c == '`' || *c == '~')
                .collect();
            fence = Some(marker);
            continue;
        }
        // A reference definition: `[name]: target`.
        if trimmed.starts_with('[') {
            if let Some(end) = trimmed.find("]:") {
                let target = trimmed[end + 2..].split_whitespace().next().unwrap_or("");
                if !target.is_empty() {
                    links.push(Link {
                        line: line_no,
                        target: target.to_string(),
                        from_root: false,
                    });
                }
                continue;
            }
        }
        scan_line(line, line_no, &mut links);
    }
    links
}

/// Inline links outside code spans, and root paths inside them.
fn scan_line(line: &str, line_no: usize, links: &mut Vec<Link>) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => {
                let ticks = bytes[i..].iter().take_while(|b| **b == b'`').count();
                let delimiter = &line[i..i + ticks];
                let body_start = i + ticks;
                let Some(len) = line[body_start..].find(delimiter) else {
                    return;
                };
                let code = line[body_start..body_start + len].trim();
                if let Some(path) = root_path(code) {
                    links.push(Link {
                        line: line_no,
                        target: path,
                        from_root: true,
                    });
                }
                i = body_start + len + ticks;
            }
            b']' if bytes.get(i + 1) == Some(&b'(') => {
                let start = i + 2;
                let mut depth = 0usize;
                let mut end = None;
                for (offset, c) in line[start..].char_indices() {
                    match c {
                        '(' => depth += 1,
                        ')' if depth == 0 => {
                            end = Some(start + offset);
                            break;
                        }
                        ')' => depth -= 1,
                        _ => {}
                    }
                }
                let Some(end) = end else {
                    return;
                };
                let target = line[start..end].split_whitespace().next().unwrap_or("");
                let target = target.trim_start_matches('<').trim_end_matches('>');
                if !target.is_empty() {
                    links.push(Link {
                        line: line_no,
                        target: target.to_string(),
                        from_root: false,
                    });
                }
                i = end + 1;
            }
            _ => i += 1,
        }
    }
}

/// The repository path an inline-code span names, if it is one: starts with a root folder and
/// holds no pattern, placeholder or spaces. A `::item` suffix (a test or type inside the file) is
/// dropped.
fn root_path(code: &str) -> Option<String> {
    if !ROOT_PATHS.iter().any(|p| code.starts_with(p)) {
        return None;
    }
    if code
        .chars()
        .any(|c| c.is_whitespace() || "*{}<>|…$".contains(c))
        || code.contains("...")
        || code.contains("DATE")
    {
        return None;
    }
    let path = code.split("::").next().unwrap_or(code);
    Some(path.trim_end_matches([',', '.', ';', ':']).to_string())
}

fn resolve(root: &Path, file: &Path, link: &Link) -> Result<(), String> {
    let target = link.target.as_str();
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path_part, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    if link.from_root && !names_a_root_folder(root, path_part) {
        // `tests/x.rs` written in a crate's README or about a crate means that crate's tests.
        return Ok(());
    }
    let base = if link.from_root {
        root.to_path_buf()
    } else {
        file.parent().unwrap_or(root).to_path_buf()
    };
    let resolved = if path_part.is_empty() {
        file.to_path_buf()
    } else if let Some(from_root) = path_part.strip_prefix('/') {
        root.join(from_root)
    } else {
        base.join(path_part)
    };
    let resolved = normalize(&resolved);
    if !resolved.starts_with(root) {
        return Err("points outside the repository".into());
    }
    if !resolved.exists() {
        return Err("no such file".into());
    }
    if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
        if resolved.extension().and_then(|e| e.to_str()) == Some("md") {
            let text = std::fs::read_to_string(&resolved)
                .map_err(|e| format!("read {}: {e}", resolved.display()))?;
            if !anchors_of(&text).contains(fragment) {
                return Err(format!("no heading or id `{fragment}` there"));
            }
        }
    }
    Ok(())
}

/// Whether a root path's first two components are the repository's own: every root folder but
/// `tests/`, which crates have too, so `tests/NAME` counts only where the root's `tests/NAME`
/// exists (`tests/conformance`, `tests/paddle`).
fn names_a_root_folder(root: &Path, path: &str) -> bool {
    match path.strip_prefix("tests/") {
        Some(rest) => {
            let first = rest.split('/').next().unwrap_or("");
            !first.is_empty() && root.join("tests").join(first).exists()
        }
        None => true,
    }
}

/// `a/b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The anchors GitHub gives a Markdown file's headings (lower case, punctuation dropped except
/// `-` and `_`, spaces as `-`, `-N` suffixes for repeats), plus explicit `id="..."` attributes.
fn anchors_of(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(open) = &fence {
            if trimmed.starts_with(open.as_str()) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(
                trimmed
                    .chars()
                    .take_while(|c| *c == '`' || *c == '~')
                    .collect(),
            );
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("id=\"") {
            let value = &rest[at + 4..];
            if let Some(end) = value.find('"') {
                anchors.insert(value[..end].to_string());
            }
            rest = &rest[at + 4..];
        }
        if line.starts_with('#') {
            let title = line.trim_start_matches('#').trim();
            let slug = slug(title);
            let mut unique = slug.clone();
            let mut n = 1;
            while anchors.contains(&unique) {
                unique = format!("{slug}-{n}");
                n += 1;
            }
            anchors.insert(unique);
        }
    }
    anchors
}

fn slug(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c == ' ' {
                Some("-".to_string())
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_links_reference_definitions_and_root_paths_are_found_outside_fences() {
        let text = "See [a](docs/A.md#x) and ![b](img.svg).\n\
                    [ref]: ../README.md\n\
                    ```sh\n[not](checked.md)\n```\n\
                    Code `docs/results/` and `crates/x/src/lib.rs::Item`, not `cargo run`.\n";
        let found: Vec<(usize, String, bool)> = links_of(text)
            .into_iter()
            .map(|l| (l.line, l.target, l.from_root))
            .collect();
        let expected = [
            (1, "docs/A.md#x", false),
            (1, "img.svg", false),
            (2, "../README.md", false),
            (6, "docs/results/", true),
            (6, "crates/x/src/lib.rs", true),
        ]
        .map(|(line, target, from_root)| (line, target.to_string(), from_root));
        assert_eq!(found, expected);
    }

    #[test]
    fn patterns_and_placeholders_in_code_are_not_paths() {
        assert_eq!(root_path("docs/results/bench-cpu-*.md"), None);
        assert_eq!(
            root_path("docs/results/bench-BACKEND-DATE.{txt,md,svg}"),
            None
        );
        assert_eq!(root_path("cargo test"), None);
        assert_eq!(root_path("tests/paddle"), Some("tests/paddle".into()));
    }

    #[test]
    fn anchors_follow_github_slugs_and_ids() {
        let text = "# Plug-in engine (`devstream-plugin`, feature `comm`)\n\
                    ## NCCL / RCCL engine\n## Groups\n## Groups\n\
                    - <a id=\"capture-through-a-plug-in\"></a>text\n";
        let anchors = anchors_of(text);
        for expected in [
            "plug-in-engine-devstream-plugin-feature-comm",
            "nccl--rccl-engine",
            "groups",
            "groups-1",
            "capture-through-a-plug-in",
        ] {
            assert!(anchors.contains(expected), "{expected} in {anchors:?}");
        }
    }
}
