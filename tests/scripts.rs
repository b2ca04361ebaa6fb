//! The shell scripts a user is told to run — by the README and docs/, by `--help` of the product
//! binary and its subcommands, and every script in the repository — run as written:
//! each is executable and starts with a shebang, or is a library that other scripts
//! source (`# shellcheck shell=bash` on its first line, no shebang, not executable).

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use tidal_harness as common;

use common::cluster::REPO;

/// The directories scripts live in, where a bare `up.sh` in the docs is looked up.
const SCRIPT_DIRS: [&str; 3] = ["tests/control-plane", "deploy/image", ".ci"];

/// Every `NAME.sh` or `DIR/NAME.sh` mentioned in `text`.
fn mentioned_scripts(text: &str) -> BTreeSet<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "._/-".contains(c);
    text.split(|c: char| !is_path_char(c))
        .filter(|word| word.ends_with(".sh") && word.len() > 3)
        .map(|word| word.trim_start_matches("./").to_owned())
        .collect()
}

/// Where a mentioned script is in the repository (a bare name is looked up in
/// [`SCRIPT_DIRS`]).
fn resolve(script: &str) -> Option<PathBuf> {
    let repo = Path::new(REPO);
    if script.contains('/') {
        let path = repo.join(script);
        return path.exists().then_some(path);
    }
    SCRIPT_DIRS
        .iter()
        .map(|dir| repo.join(dir).join(script))
        .find(|path| path.exists())
}

/// Every script tracked in the repository (`*.sh` and `.ci/run`), from git when there is
/// a checkout.
fn tracked_scripts() -> Vec<PathBuf> {
    let repo = Path::new(REPO);
    let listed = Command::new("git")
        .args(["ls-files", "*.sh", ".ci/run"])
        .current_dir(repo)
        .output()
        .expect("run git ls-files");
    assert!(listed.status.success(), "git ls-files failed");
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|line| repo.join(line))
        .collect()
}

/// What is wrong with `path` as a script to run or to source, if anything.
fn problem(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let first = text.lines().next().unwrap_or_default();
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    let executable = mode & 0o111 == 0o111;
    let shown = path.strip_prefix(REPO).unwrap_or(path).display();
    if first == "# shellcheck shell=bash" {
        return executable.then(|| format!("{shown} is a library to source but is executable"));
    }
    match (first.starts_with("#!"), executable) {
        (true, true) => None,
        (false, _) => Some(format!("{shown} does not start with a shebang: {first:?}")),
        (true, false) => Some(format!(
            "{shown} is not executable (mode {:o}): `git update-index --chmod=+x`",
            mode & 0o777
        )),
    }
}

/// `--help` of `binary` and of each of its subcommands.
fn help_texts(binary: &Path, subcommands: &[&str]) -> String {
    let mut text = String::new();
    for args in std::iter::once(vec![])
        .chain(subcommands.iter().map(|s| vec![*s]))
        .map(|mut args| {
            args.push("--help");
            args
        })
    {
        let out = Command::new(binary)
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("run {} {args:?}: {e}", binary.display()));
        assert!(out.status.success(), "{} {args:?} failed", binary.display());
        text.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    text
}

#[test]
fn every_script_a_user_is_told_to_run_is_executable_and_has_a_shebang() {
    // The README and every page of docs/.
    let mut readme = std::fs::read_to_string(Path::new(REPO).join("README.md")).expect("README");
    let docs = std::fs::read_dir(Path::new(REPO).join("docs")).expect("docs/");
    for page in docs.map(|entry| entry.expect("a docs/ entry").path()) {
        if page.extension().is_some_and(|e| e == "md") {
            readme.push_str(&std::fs::read_to_string(&page).expect("a docs/ page"));
        }
    }
    let product = help_texts(
        Path::new(env!("CARGO_BIN_EXE_tidal-scheduler")),
        &["run", "crd", "next", "plan", "calendar"],
    );
    let mut named = mentioned_scripts(&readme);
    named.extend(mentioned_scripts(&product));
    let mut paths: BTreeSet<PathBuf> = tracked_scripts().into_iter().collect();
    let mut unknown = Vec::new();
    for script in &named {
        match resolve(script) {
            Some(path) => {
                paths.insert(path);
            }
            None => unknown.push(script.clone()),
        }
    }
    assert!(
        unknown.is_empty(),
        "the docs name scripts that do not exist: {unknown:?}"
    );
    assert!(
        named.contains("deploy/image/build.sh") && named.contains("tests/control-plane/up.sh"),
        "the docs' scripts were not found in them: {named:?}"
    );
    let problems: Vec<String> = paths.iter().filter_map(|p| problem(p)).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_script_without_its_execute_bit_is_found() {
    let dir = common::target_tmpdir().join(format!("scripts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let script = dir.join("run-me.sh");
    std::fs::write(&script, "#!/usr/bin/env bash\necho hi\n").expect("write script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let found = problem(&script).expect("a problem");
    assert!(found.contains("not executable"), "{found}");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(problem(&script), None);
    std::fs::write(&script, "echo no shebang\n").expect("write script");
    assert!(problem(&script).expect("a problem").contains("shebang"));
    std::fs::remove_dir_all(&dir).expect("remove scratch directory");
}
