//! The documentation's links hold: every relative link of the README, the CHANGELOG and
//! `docs/*.md` names a file of the repository, and a `#fragment` names a heading of that
//! page (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tidal_harness::cluster::REPO;

/// The pages checked: the README, the CHANGELOG and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let repo = Path::new(REPO);
    let mut pages = vec![repo.join("README.md"), repo.join("CHANGELOG.md")];
    let docs = std::fs::read_dir(repo.join("docs")).expect("docs/");
    let mut docs: Vec<PathBuf> = docs
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The text of a page outside its code blocks (links in code are not links).
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor of a heading's text.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|line| {
            let hashes = line.chars().take_while(|c| *c == '#').count();
            (hashes > 0 && line[hashes..].starts_with(' ')).then(|| anchor(&line[hashes..]))
        })
        .collect()
}

/// The targets of a page's inline links `[label](target)`, outside code blocks and spans.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose(text) {
        // Code spans hold examples, not links.
        let outside: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = outside.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    found
}

/// What is wrong with link `target` of `page`, if anything.
fn broken(page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().expect("a page's directory").join(path)
    };
    if !file.exists() {
        return Some(format!("{target}: no file {}", file.display()));
    }
    if fragment.is_empty() {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    (!anchors(&text).contains(fragment)).then(|| format!("{target}: no heading #{fragment}"))
}

#[test]
fn every_relative_link_names_a_file_and_a_heading_that_exist() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page");
        for target in links(&text) {
            checked += 1;
            if let Some(problem) = broken(&page, &target) {
                let name = page
                    .strip_prefix(REPO)
                    .unwrap_or(&page)
                    .display()
                    .to_string();
                problems.push(format!("{name}: {problem}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
    assert!(
        checked > 30,
        "only {checked} links found: is the parser broken?"
    );
}

#[test]
fn a_missing_page_or_heading_is_found() {
    let page = Path::new(REPO).join("README.md");
    assert!(broken(&page, "docs/no-such-page.md").is_some());
    assert!(broken(&page, "docs/api.md#no-such-heading").is_some());
    assert!(broken(&page, "docs/api.md").is_none());
    assert!(broken(&page, "#two-commands").is_none());
    assert_eq!(
        anchor(" Beside the peers: the CronJob controller and KEDA"),
        "beside-the-peers-the-cronjob-controller-and-keda"
    );
    assert_eq!(
        links("see [a](x.md) and `[b](not-a-link)`\n```\n[c](code)\n```\n[d](y.md#z)"),
        ["x.md", "y.md#z"]
    );
}
