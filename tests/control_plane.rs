//! The test infrastructure itself: provisioning, the control plane's start-up, child
//! processes with their own logs, and no orphans however a test process dies.

use tidal_harness as common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::cluster::{ControlPlane, REPO, TestEnv, control_plane, run_script};
use common::process::Process;
use common::wait::{PACE, blocking_eventually, blocking_poll};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;

fn script(name: &str) -> PathBuf {
    Path::new(REPO).join("tests/control-plane").join(name)
}

/// A fresh directory under Cargo's temporary directory for integration tests.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}

/// Polls `condition` until it holds; panics with `what` after `timeout`.
fn eventually(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    blocking_eventually(timeout, what, || {
        condition()
            .then_some(())
            .ok_or_else(|| "not yet".to_owned())
    });
}

/// The pid written in a pid file.
fn read_pid(file: &Path) -> u32 {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
    text.trim().parse().expect("a pid")
}

/// Running, i.e. present and not a zombie waiting for its parent.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|status| {
            !status
                .lines()
                .any(|l| l.starts_with("State:") && l.contains('Z'))
        })
        .unwrap_or(false)
}

#[test]
fn provision_is_idempotent_and_prints_the_directory_last() {
    let provision = || {
        let output = Command::new("bash")
            .arg(script("provision.sh"))
            .output()
            .expect("run provision.sh");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stderr}");
        let stdout = String::from_utf8(output.stdout).expect("UTF-8");
        (stdout.lines().last().map(PathBuf::from), stderr)
    };
    // The first run builds if this machine has not yet; the second finds it all cached.
    let (first, _) = provision();
    let (second, stderr) = provision();
    assert_eq!(first, second);
    assert!(
        !stderr.contains("building"),
        "second run rebuilt something:\n{stderr}"
    );
    let dir = second.expect("a directory on the last line");

    let version = |tool: &str, args: &[&str]| {
        let output = Command::new(dir.join(tool))
            .args(args)
            .output()
            .expect(tool);
        assert!(output.status.success(), "{tool} {args:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    // The directory is named by the Kubernetes version it holds (bin-kubernetes-vX.Y.Z-etcd-…),
    // which is the one a wrapper module of tests/control-plane/kubernetes/ pins.
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let kubernetes = name
        .strip_prefix("bin-kubernetes-")
        .and_then(|rest| rest.split("-etcd-").next())
        .unwrap_or_else(|| panic!("{name}: not named by its Kubernetes version"));
    let pinned = std::fs::read_dir(Path::new(REPO).join("tests/control-plane/kubernetes"))
        .unwrap()
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path().join("go.mod")).ok())
        .any(|go_mod| go_mod.contains(&format!("k8s.io/kubernetes {kubernetes}\n")));
    assert!(
        pinned,
        "{kubernetes} is pinned by no module of tests/control-plane/kubernetes/"
    );
    assert!(
        version("kube-apiserver", &["--version"]).contains(&format!("Kubernetes {kubernetes}\n"))
    );
    assert!(
        version("kubectl", &["version", "--client"])
            .contains(&format!("Client Version: {kubernetes}\n"))
    );
    assert!(version("etcd", &["--version"]).contains("etcd Version: 3.6."));
}

#[test]
fn provision_fails_clearly_without_go_or_the_module_proxy() {
    let scratch = scratch_dir("provision-offline");
    let run = |path: &str, proxy: &str| {
        Command::new("bash")
            .arg(script("provision.sh"))
            .env("PATH", path)
            .env("TIDAL_CONTROL_PLANE_CACHE", scratch.join("cache"))
            .env("GOMODCACHE", scratch.join("modules"))
            .env("GOPROXY", proxy)
            .output()
            .expect("run provision.sh")
    };
    let without_go = run("/usr/bin:/bin", "off");
    assert!(!without_go.status.success());
    assert!(String::from_utf8_lossy(&without_go.stderr).contains("Go is required"));

    let path = std::env::var("PATH").expect("PATH");
    let without_proxy = run(&path, "off");
    assert!(!without_proxy.status.success());
    let stderr = String::from_utf8_lossy(&without_proxy.stderr);
    assert!(
        stderr.contains("is the module proxy (GOPROXY=off) reachable?"),
        "{stderr}"
    );
    // Nothing half-built is left to be mistaken for a cache entry.
    let cached: Vec<_> = std::fs::read_dir(scratch.join("cache"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .collect()
        })
        .unwrap_or_default();
    assert!(cached.is_empty(), "left in the cache: {cached:?}");
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn up_and_down_start_and_stop_a_control_plane_by_hand() {
    let bin = PathBuf::from(run_script("provision.sh", &[], None).expect("provision"));
    let dir = scratch_dir("by-hand");
    let dir_arg = dir.to_str().expect("UTF-8 path");
    let up = || run_script("up.sh", &[dir_arg], Some(&bin));
    let down = || {
        let status = Command::new("bash")
            .arg(script("down.sh"))
            .arg(&dir)
            .status()
            .expect("run down.sh");
        assert!(status.success());
    };
    let pids = || ["etcd.pid", "kube-apiserver.pid"].map(|file| read_pid(&dir.join(file)));
    let kubectl = |args: &[&str]| {
        Command::new(bin.join("kubectl"))
            .arg("--kubeconfig")
            .arg(dir.join("kubeconfig"))
            .args(args)
            .output()
            .expect("run kubectl")
    };

    let printed = up().expect("up.sh starts a control plane");
    assert_eq!(PathBuf::from(printed), dir.join("kubeconfig"));
    let ready = kubectl(&["get", "--raw", "/readyz"]);
    assert_eq!(String::from_utf8_lossy(&ready.stdout), "ok");
    let created = kubectl(&["create", "namespace", "kept-across-restarts"]);
    assert!(created.status.success());
    let first = pids();

    // Stop both: no process left behind.
    down();
    for pid in first {
        assert!(!running(pid), "pid {pid} still running after down.sh");
    }

    // Start again on the same directory: same kubeconfig, data kept.
    up().expect("up.sh restarts the control plane");
    let kept = kubectl(&["get", "namespace", "kept-across-restarts"]);
    assert!(
        kept.status.success(),
        "{}",
        String::from_utf8_lossy(&kept.stderr)
    );
    let second = pids();
    down();
    for pid in second {
        assert!(!running(pid), "pid {pid} still running after down.sh");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn each_test_gets_a_fresh_namespace_and_processes_get_their_own_logs() {
    let env = TestEnv::new().await;
    let namespace = Api::<Namespace>::all(env.client.clone())
        .get(&env.namespace)
        .await
        .expect("the test's namespace exists");
    assert!(
        env.namespace
            .starts_with("each-test-gets-a-fresh-namespace")
    );
    assert!(namespace.metadata.creation_timestamp.is_some());

    let mut crd = env.run_binary("crd", &["crd"]);
    let mut bad = env.run_binary("bad-flag", &["next", "--no-such-flag"]);
    assert!(crd.wait(Duration::from_secs(30)).success());
    assert_eq!(bad.wait(Duration::from_secs(30)).code(), Some(2));
    assert!(crd.log().contains("kind: CustomResourceDefinition"));
    assert!(bad.log().contains("--no-such-flag"));
    assert_ne!(crd.log_path(), bad.log_path());
}

/// The process state letter of `/proc/PID/status` (`S` sleeping, `T` stopped, ...).
fn state(pid: u32) -> char {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let line = status
        .lines()
        .find(|l| l.starts_with("State:"))
        .expect("State line");
    line["State:".len()..]
        .trim()
        .chars()
        .next()
        .expect("a state letter")
}

#[test]
fn processes_can_be_stopped_continued_and_terminated() {
    let mut command = Command::new("sleep");
    command.arg("1000");
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join("logs/signals/sleeper.log");
    let mut sleeper = Process::spawn("sleeper", command, log);
    let pid = sleeper.pid();

    sleeper.signal("STOP");
    eventually("stopped", Duration::from_secs(10), || state(pid) == 'T');
    sleeper.signal("CONT");
    eventually("continued", Duration::from_secs(10), || state(pid) != 'T');
    assert!(sleeper.try_status().is_none());
    sleeper.signal("TERM");
    let status = sleeper.wait(Duration::from_secs(10));
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15)
    );
}

/// Set in the child test process of `no_orphans_when_the_test_process_dies`: the
/// directory for its control plane.
const PROBE_DIR: &str = "TIDAL_ORPHAN_PROBE_DIR";

/// The child's part: start a control plane and a long-running child process, say
/// so, then wait to be killed.
fn orphan_probe(dir: &Path) -> ! {
    ControlPlane::start(dir).expect("probe control plane");
    let sleeper = Process::spawn(
        "sleeper",
        {
            let mut command = Command::new("sleep");
            command.arg("1000");
            command
        },
        dir.join("sleeper.log"),
    );
    std::fs::write(dir.join("sleeper.pid"), sleeper.pid().to_string()).expect("write pid");
    std::fs::write(dir.join("probe-ready"), "").expect("write ready file");
    loop {
        std::thread::park();
    }
}

/// Kills a test process that runs a control plane and a child process — with
/// SIGKILL, and with SIGINT to its process group as Ctrl-C in a terminal does — and
/// checks that nothing it started survives it.
#[test]
fn no_orphans_when_the_test_process_dies() {
    if let Some(dir) = std::env::var_os(PROBE_DIR) {
        orphan_probe(Path::new(&dir));
    }
    control_plane(); // provisioned, so the probes only start
    let probes: Vec<_> = ["KILL", "INT"]
        .into_iter()
        .map(|signal| {
            let dir = scratch_dir(&format!("orphan-probe-{signal}"));
            let mut command = Command::new(std::env::current_exe().expect("current_exe"));
            command
                .args([
                    "--exact",
                    "no_orphans_when_the_test_process_dies",
                    "--nocapture",
                ])
                .env(PROBE_DIR, &dir)
                .process_group(0)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // A suite started in the background (`cargo test &`, nohup) inherits SIGINT
            // ignored, and so would the probe: give it the default, as in a terminal.
            // SAFETY: between fork and exec only `signal`, which is async-signal-safe.
            unsafe {
                command.pre_exec(|| {
                    libc::signal(libc::SIGINT, libc::SIG_DFL);
                    Ok(())
                });
            }
            let child = command.spawn().expect("spawn the probe");
            (signal, dir, child)
        })
        .collect();

    for (signal, dir, mut child) in probes {
        eventually("probe ready", Duration::from_secs(120), || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("probe exited early: {status}");
            }
            dir.join("probe-ready").exists()
        });
        let pids: Vec<u32> = ["etcd.pid", "kube-apiserver.pid", "sleeper.pid"]
            .iter()
            .map(|file| read_pid(&dir.join(file)))
            .collect();
        assert!(pids.iter().all(|&pid| running(pid)));

        let target = match signal {
            "INT" => format!("-{}", child.id()), // the whole process group
            _ => child.id().to_string(),
        };
        let killed = Command::new("kill")
            .args(["-s", signal, "--", &target])
            .status()
            .expect("run kill");
        assert!(killed.success());
        let exited = blocking_poll(PACE, Duration::from_secs(30), || {
            let exited = child.try_wait().expect("wait for the probe");
            exited.ok_or_else(|| "running".to_owned())
        });
        let Ok(status) = exited else {
            let _ = child.kill();
            panic!("probe survived SIG{signal} for 30 s");
        };
        assert!(!status.success(), "probe survived SIG{signal}");

        eventually(
            &format!("after SIG{signal}, processes {pids:?} gone"),
            Duration::from_secs(30),
            || pids.iter().all(|&pid| !running(pid)),
        );
        eventually(
            &format!("after SIG{signal}, {} removed", dir.display()),
            Duration::from_secs(30),
            || !dir.exists(),
        );
    }
}

/// Runs node.sh's `claim_machine` for `dir` on behalf of `owner`, with the machine's
/// marker at `marker`, waiting at most `wait` seconds for another node.
fn claim(marker: &Path, dir: &Path, owner: u32, wait: u32) -> std::process::Output {
    let claim = r#"
        here="$1"; dir="$2"
        log() { echo "up: $*" >&2; }
        fail() { log "$*"; return 1; }
        . "$here/common.sh"
        . "$here/node.sh"
        claim_machine
    "#;
    Command::new("bash")
        .args(["-c", claim, "claim"])
        .arg(script(""))
        .arg(dir)
        .env("TIDAL_NODE_MARKER", marker)
        .env("TIDAL_NODE_OWNER", owner.to_string())
        .env("TIDAL_NODE_WAIT", wait.to_string())
        .output()
        .expect("run claim_machine")
}

/// The directory the machine's marker names.
fn claimant(marker: &Path) -> PathBuf {
    let text = std::fs::read_to_string(marker).expect("read the marker");
    PathBuf::from(text.lines().next().expect("the marker names a directory"))
}

#[test]
fn one_node_per_machine_waits_for_a_live_owner_and_takes_over_from_a_dead_one() {
    let scratch = scratch_dir("claim");
    let marker = scratch.join("node");
    let [other, mine, gone] = ["other", "mine", "gone"].map(|name| {
        let dir = scratch.join(name);
        std::fs::create_dir_all(&dir).expect("create a node directory");
        dir
    });
    let me = std::process::id();
    let stderr =
        |output: &std::process::Output| String::from_utf8_lossy(&output.stderr).into_owned();

    // Another node, whose owner runs.
    let mut owner = Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("spawn sleep");
    let claimed = claim(&marker, &other, owner.id(), 1);
    assert!(claimed.status.success(), "{}", stderr(&claimed));
    assert_eq!(claimant(&marker), other);

    // It is waited for, then refused with a message that names it.
    let refused = claim(&marker, &mine, me, 2);
    assert!(
        !refused.status.success(),
        "claimed a machine whose node runs"
    );
    assert!(
        stderr(&refused).contains(&format!(
            "another node runs on this machine ({}",
            other.display()
        )),
        "{}",
        stderr(&refused)
    );
    assert_eq!(claimant(&marker), other);

    // Its owner ends, no reaper tears it down: it is stopped and the machine taken over.
    owner.kill().expect("kill the owner");
    owner.wait().expect("reap the owner");
    let taken = claim(&marker, &mine, me, 120);
    assert!(taken.status.success(), "{}", stderr(&taken));
    assert!(
        stderr(&taken).contains("outlived its owner"),
        "{}",
        stderr(&taken)
    );
    assert_eq!(claimant(&marker), mine);

    // Claiming it again (a component's restart by another process) keeps its owner.
    let owned = std::fs::read_to_string(&marker).expect("read the marker");
    let mut restarter = Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("spawn sleep");
    let again = claim(&marker, &mine, restarter.id(), 1);
    restarter.kill().expect("kill sleep");
    restarter.wait().expect("reap sleep");
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(
        std::fs::read_to_string(&marker).expect("read the marker"),
        owned
    );

    // A node whose directory is gone is taken over at once.
    std::fs::remove_dir(&gone).expect("remove a node directory");
    std::fs::write(&marker, format!("{}\n", gone.display())).expect("write the marker");
    let taken = claim(&marker, &other, me, 120);
    assert!(taken.status.success(), "{}", stderr(&taken));
    assert_eq!(claimant(&marker), other);

    // Two claimants of a free machine: exactly one gets it.
    std::fs::remove_file(&marker).expect("free the machine");
    let [first, second] = [&other, &mine].map(|dir| {
        let (marker, dir) = (marker.clone(), dir.clone());
        std::thread::spawn(move || claim(&marker, &dir, me, 3))
    });
    let outcomes = [first, second].map(|claimant| claimant.join().expect("claimant thread"));
    let winners = outcomes.iter().filter(|o| o.status.success()).count();
    assert_eq!(winners, 1, "{:?}", outcomes.each_ref().map(stderr));
    let _ = std::fs::remove_dir_all(&scratch);
}
