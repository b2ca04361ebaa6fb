//! Releases as `release/releases` records them (version, commit, date), and the
//! artifacts of one built from its commit: `release/cut.sh` run in a `git worktree` of
//! that commit, cached outside the repository by version and commit like the Go
//! binaries (`$TIDAL_RELEASE_CACHE`, default `~/.cache/tidal-scheduler/releases`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::cluster::{REPO, provisioned_bin};
use super::process::output;

/// One recorded release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// Its version, e.g. `0.1.0`.
    pub version: String,
    /// The commit it was cut from (40 hex digits).
    pub commit: String,
    /// The day it was cut, `YYYY-MM-DD`.
    pub date: String,
}

/// The releases of `release/releases`, oldest first; an error names a malformed line.
pub fn recorded() -> Result<Vec<Release>, String> {
    let path = Path::new(REPO).join("release/releases");
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    parse(&text)
}

/// Parses the record: `VERSION<TAB>COMMIT<TAB>DATE` lines, `#` comments.
pub fn parse(text: &str) -> Result<Vec<Release>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|(index, line)| {
            let fields: Vec<&str> = line.split('\t').collect();
            let [version, commit, date] = fields[..] else {
                return Err(format!(
                    "release/releases line {}: want VERSION<TAB>COMMIT<TAB>DATE, got {line:?}",
                    index + 1
                ));
            };
            if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "release/releases line {}: {commit:?} is not a full commit hash",
                    index + 1
                ));
            }
            Ok(Release {
                version: version.to_owned(),
                commit: commit.to_owned(),
                date: date.to_owned(),
            })
        })
        .collect()
}

/// The newest recorded release older than this tree (the one to upgrade from).
pub fn previous() -> Result<Release, String> {
    recorded()?
        .into_iter()
        .rev()
        .find(|release| release.version != tidal_scheduler::VERSION)
        .ok_or_else(|| {
            format!(
                "release/releases records no release before {}",
                tidal_scheduler::VERSION
            )
        })
}

/// A release's artifacts on this machine.
#[derive(Debug, Clone)]
pub struct Artifacts {
    /// The release.
    pub release: Release,
    /// Its image archive (`tidal-scheduler:VERSION`).
    pub image: PathBuf,
    /// Its packaged Helm chart.
    pub chart: PathBuf,
    /// Its `deploy/` directory (for `kubectl apply -k`).
    pub deploy: PathBuf,
}

/// The artifacts of [`previous`], built on first use (once per machine: minutes, a release
/// build of its own) and cached.
pub fn previous_artifacts() -> &'static Artifacts {
    static BUILT: OnceLock<Result<Artifacts, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| previous().and_then(|release| build(&release)));
    match built {
        Ok(artifacts) => artifacts,
        Err(e) => panic!("the previous release: {e}"),
    }
}

/// Builds `release` from its commit into the cache, unless it is there.
pub fn build(release: &Release) -> Result<Artifacts, String> {
    let root = cache_root()?;
    let dir = root.join(format!("{}-{}", release.version, release.commit));
    let artifacts = Artifacts {
        release: release.clone(),
        image: dir.join(format!("tidal-scheduler-{}.oci.tar", release.version)),
        chart: dir.join(format!("tidal-scheduler-{}.tgz", release.version)),
        deploy: dir.join("deploy"),
    };
    if dir.is_dir() {
        return Ok(artifacts);
    }
    eprintln!(
        "release {} ({}): building it from its commit (cached in {})",
        release.version,
        release.commit,
        dir.display()
    );
    git(&["cat-file", "-e", &format!("{}^{{commit}}", release.commit)]).map_err(|e| {
        format!(
            "{e}: commit {} is not in this clone (a shallow clone? git fetch --unshallow)",
            release.commit
        )
    })?;
    let partial = root.join(format!("{}.partial.{}", release.commit, std::process::id()));
    let worktree = partial.join("source");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(|e| format!("mkdir {}: {e}", partial.display()))?;
    let worktree_str = worktree.to_str().ok_or("non-UTF-8 cache path")?;
    git(&["worktree", "add", "--detach", worktree_str, &release.commit])?;
    let built = cut(&worktree, &partial.join("dist"), &root.join("target"));
    let copied =
        built.and_then(|()| copy_dir(&worktree.join("deploy"), &partial.join("dist/deploy")));
    let _ = git(&["worktree", "remove", "--force", worktree_str]);
    copied?;
    std::fs::rename(partial.join("dist"), &dir)
        .or_else(|e| if dir.is_dir() { Ok(()) } else { Err(e) })
        .map_err(|e| format!("move the release into {}: {e}", dir.display()))?;
    let _ = std::fs::remove_dir_all(&partial);
    Ok(artifacts)
}

/// Runs the release's own `release/cut.sh` in `source` (a target directory of its own:
/// two checkouts of one package must not share one), its artifacts into `out`.
fn cut(source: &Path, out: &Path, target: &Path) -> Result<(), String> {
    let bin = provisioned_bin()?;
    let status = Command::new("bash")
        .arg(source.join("release/cut.sh"))
        .current_dir(source)
        .env("CARGO_TARGET_DIR", target)
        .env("TIDAL_RELEASE_DIR", out)
        .env("HELM", bin.join("helm"))
        .status()
        .map_err(|e| format!("run release/cut.sh: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "release/cut.sh in {}: {status}; see its output above",
            source.display()
        ))
    }
}

fn cache_root() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("TIDAL_RELEASE_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
    Ok(PathBuf::from(home).join(".cache/tidal-scheduler/releases"))
}

/// `git ARGS` in the repository; its stdout, or what git said on failure.
pub fn git(args: &[&str]) -> Result<String, String> {
    let mut command = Command::new("git");
    command.args(args).current_dir(REPO);
    output(command)
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    let mut command = Command::new("cp");
    command.arg("-R").arg(from).arg(to);
    output(command).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_tab_separated_with_comments() {
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let text = format!("# header\n\n0.1.0\t{commit}\t2026-12-03\n");
        assert_eq!(
            parse(&text).unwrap(),
            vec![Release {
                version: "0.1.0".into(),
                commit: commit.into(),
                date: "2026-12-03".into()
            }]
        );
    }

    #[test]
    fn a_malformed_line_is_named() {
        let error = parse("0.1.0 abc 2026-12-03\n").unwrap_err();
        assert!(error.contains("line 1"), "{error}");
        let error = parse("0.1.0\tabc\t2026-12-03\n").unwrap_err();
        assert!(error.contains("not a full commit hash"), "{error}");
    }
}
