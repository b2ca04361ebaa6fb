//! Releases: every place that carries the version agrees, the record of releases
//! (`release/releases`) names commits of this history that carry their versions, each
//! with its CHANGELOG section, and `release/cut.sh` builds an image archive and a
//! packaged chart that agree — or refuses, naming what disagrees — and the previous
//! release builds from its recorded commit (what `tests/upgrade.rs` installs).

use std::path::Path;
use std::process::Command;

use tidal_harness as common;

use common::cluster::{REPO, provisioned_bin};
use common::release::{git, previous_artifacts, recorded};

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(REPO).join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `version = "..."` of a Cargo.toml's package.
fn cargo_version(manifest: &str) -> Option<String> {
    manifest
        .lines()
        .find_map(|line| line.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .map(str::to_owned)
}

/// A version's numbers, for ordering (`0.2.0-dev` sorts as 0.2.0 with a pre-release).
fn numbers(version: &str) -> (Vec<u64>, bool) {
    let (core, pre) = version
        .split_once('-')
        .map_or((version, false), |(c, _)| (c, true));
    let numbers = core
        .split('.')
        .map(|n| n.parse().unwrap_or_else(|_| panic!("version {version:?}")))
        .collect();
    (numbers, pre)
}

#[test]
fn every_place_carrying_the_version_agrees() {
    let version = tidal_scheduler::VERSION;
    let chart = read("deploy/helm/tidal-scheduler/Chart.yaml");
    assert!(
        chart.lines().any(|l| l == format!("version: {version}")),
        "Chart.yaml version ≠ {version}"
    );
    assert!(
        chart
            .lines()
            .any(|l| l == format!("appVersion: \"{version}\"")),
        "Chart.yaml appVersion ≠ {version}"
    );
    let controller = read("deploy/controller.yaml");
    assert!(
        controller.contains(&format!("image: tidal-scheduler:{version}\n")),
        "deploy/controller.yaml does not run tidal-scheduler:{version}"
    );
    for member in [
        "harness/Cargo.toml",
        "chaos/Cargo.toml",
        "control-plane/Cargo.toml",
        "demo/Cargo.toml",
    ] {
        assert_eq!(
            cargo_version(&read(member)).as_deref(),
            Some(version),
            "{member}"
        );
    }
    let changelog = read("CHANGELOG.md");
    assert!(
        changelog.contains("\n## [Unreleased]\n"),
        "CHANGELOG.md has no Unreleased section"
    );
    if !version.contains('-') {
        assert!(
            changelog.contains(&format!("\n## [{version}] - ")),
            "{version} is a release version, but CHANGELOG.md has no section for it"
        );
    }
}

#[test]
fn each_recorded_release_is_a_commit_of_this_history_carrying_its_version() {
    let releases = recorded().expect("release/releases");
    let changelog = read("CHANGELOG.md");
    let mut previous: Option<(Vec<u64>, bool)> = None;
    for release in &releases {
        let manifest = git(&["show", &format!("{}:Cargo.toml", release.commit)]).unwrap_or_else(|e| {
            panic!(
                "release {} names commit {}, not in this clone (a shallow clone? git fetch --unshallow): {e}",
                release.version, release.commit
            )
        });
        assert_eq!(
            cargo_version(&manifest).as_deref(),
            Some(release.version.as_str()),
            "commit {} is not version {}",
            release.commit,
            release.version
        );
        git(&["merge-base", "--is-ancestor", &release.commit, "HEAD"]).unwrap_or_else(|e| {
            panic!(
                "release {} is not an ancestor of HEAD: {e}",
                release.version
            )
        });
        assert!(
            changelog.contains(&format!("\n## [{}] - {}\n", release.version, release.date)),
            "CHANGELOG.md has no section '## [{}] - {}'",
            release.version,
            release.date
        );
        let this = numbers(&release.version);
        assert!(
            !this.1,
            "release {} has a pre-release suffix",
            release.version
        );
        if let Some(before) = &previous {
            assert!(
                this.0 > before.0,
                "release {} is not newer than the one before",
                release.version
            );
        }
        previous = Some(this);
    }
    if let Some((newest, _)) = previous {
        let (current, pre) = numbers(tidal_scheduler::VERSION);
        assert!(
            current > newest || (current == newest && !pre),
            "this tree's version {} is older than the newest release",
            tidal_scheduler::VERSION
        );
    }
}

/// Runs `release/cut.sh ARGS` of the repository at `repo`; (success, stdout, stderr).
fn cut(repo: &Path, args: &[&str], out: &Path) -> (bool, String, String) {
    let bin = provisioned_bin().unwrap_or_else(|e| panic!("provisioned binaries: {e}"));
    let output = Command::new("bash")
        .arg(repo.join("release/cut.sh"))
        .args(args)
        .env("TIDAL_RELEASE_DIR", out)
        .env("HELM", bin.join("helm"))
        .output()
        .expect("run release/cut.sh");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn cut_builds_an_image_and_a_chart_that_agree() {
    let out = common::target_tmpdir().join(format!("release-{}", std::process::id()));
    let (ok, stdout, stderr) = cut(Path::new(REPO), &["--snapshot"], &out);
    assert!(ok, "release/cut.sh --snapshot failed:\n{stderr}");
    assert_eq!(stdout.lines().last(), out.to_str(), "prints its directory");
    let version = tidal_scheduler::VERSION;
    for artifact in [
        format!("tidal-scheduler-{version}.oci.tar"),
        format!("tidal-scheduler-{version}.tgz"),
    ] {
        assert!(out.join(&artifact).is_file(), "{artifact} missing");
    }
    let sums = Command::new("sha256sum")
        .args(["-c", "SHA256SUMS"])
        .current_dir(&out)
        .output()
        .expect("sha256sum");
    assert!(
        sums.status.success(),
        "SHA256SUMS: {}",
        String::from_utf8_lossy(&sums.stdout)
    );
    let env = std::fs::read_to_string(out.join("release.env")).expect("release.env");
    let head = git(&["rev-parse", "HEAD"]).expect("HEAD");
    assert!(env.contains(&format!("COMMIT={}", head.trim())), "{env}");
    assert!(env.contains(&format!("VERSION={version}\n")), "{env}");
    std::fs::remove_dir_all(&out).expect("remove the artifacts");
}

#[test]
fn the_previous_release_builds_from_its_recorded_commit() {
    let artifacts = previous_artifacts();
    let release = &artifacts.release;
    assert_ne!(
        release.version,
        tidal_scheduler::VERSION,
        "an older release"
    );
    assert!(
        artifacts.image.is_file(),
        "{} missing",
        artifacts.image.display()
    );
    assert!(
        artifacts.chart.is_file(),
        "{} missing",
        artifacts.chart.display()
    );
    let dir = artifacts.image.parent().expect("the release's directory");
    let env = std::fs::read_to_string(dir.join("release.env")).expect("release.env");
    assert!(
        env.contains(&format!("COMMIT={}\n", release.commit)),
        "{env}"
    );
    assert!(
        env.contains(&format!("VERSION={}\n", release.version)),
        "{env}"
    );
    let controller = std::fs::read_to_string(artifacts.deploy.join("controller.yaml"))
        .expect("the release's deploy/controller.yaml");
    assert!(
        controller.contains(&format!("image: tidal-scheduler:{}\n", release.version)),
        "its kustomize installation runs its own image"
    );
}

/// A copy of the files cut.sh checks before it builds, in a repository of its own,
/// with `edit` applied; cut.sh's stderr when it refuses.
fn refusal(edit: impl FnOnce(&Path)) -> String {
    let dir = common::target_tmpdir().join(format!(
        "release-refusal-{}-{}",
        std::process::id(),
        next_id()
    ));
    for file in [
        "Cargo.toml",
        "CHANGELOG.md",
        "release/cut.sh",
        "release/releases",
        "deploy/crd.yaml",
        "deploy/controller.yaml",
        "deploy/helm/tidal-scheduler/Chart.yaml",
        "deploy/helm/tidal-scheduler/crds/crds.yaml",
    ] {
        let to = dir.join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(Path::new(REPO).join(file), &to).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    edit(&dir);
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "t",
        ],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
    let (ok, _, stderr) = cut(&dir, &[], &dir.join("out"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!ok, "cut.sh accepted it:\n{stderr}");
    stderr
}

fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// `path` of `dir` with `from` replaced by `to` (which must occur).
fn replace(dir: &Path, path: &str, from: &str, to: &str) {
    let file = dir.join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(from), "{path} has no {from:?}");
    std::fs::write(&file, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn cut_refuses_what_disagrees_naming_it() {
    let version = tidal_scheduler::VERSION;
    let stderr = refusal(|dir| {
        replace(
            dir,
            "deploy/helm/tidal-scheduler/Chart.yaml",
            &format!("version: {version}"),
            "version: 9.9.9",
        )
    });
    assert!(stderr.contains("Chart.yaml version is '9.9.9'"), "{stderr}");
    let stderr = refusal(|dir| {
        replace(
            dir,
            "deploy/controller.yaml",
            &format!("tidal-scheduler:{version}"),
            "tidal-scheduler:latest",
        )
    });
    assert!(
        stderr.contains("deploy/controller.yaml runs 'tidal-scheduler:latest'"),
        "{stderr}"
    );
    let stderr = refusal(|dir| {
        std::fs::write(
            dir.join("deploy/helm/tidal-scheduler/crds/crds.yaml"),
            "# another CRD\n",
        )
        .unwrap()
    });
    assert!(
        stderr.contains("crds/crds.yaml differs from deploy/crd.yaml"),
        "{stderr}"
    );
    // A release (no --snapshot) needs a dated CHANGELOG section for a release version.
    let stderr = refusal(|dir| {
        for path in [
            "Cargo.toml",
            "deploy/helm/tidal-scheduler/Chart.yaml",
            "deploy/controller.yaml",
        ] {
            let file = dir.join(path);
            let text = std::fs::read_to_string(&file).unwrap();
            std::fs::write(&file, text.replace(version, "9.9.9")).unwrap();
        }
    });
    assert!(
        stderr.contains("CHANGELOG.md has no dated section '## [9.9.9]"),
        "{stderr}"
    );
}
