//! `tidal-demo` (`cargo run -p tidal-demo`), the README's first command: it starts its own control plane
//! and Jaeger, shows on-time triggers with the Deployment following them and their
//! traces in Jaeger, and on Ctrl-C stops every process it started and removes its
//! directory.

use tidal_harness as common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::process::Process;
use common::reaper::Reaper;
use common::wait::blocking_eventually;

/// Trigger lines of the demo's table: `scheduled rule replicas deployment lateness
/// trace note`.
fn on_time_lines(output: &str) -> Vec<Vec<String>> {
    output
        .lines()
        .filter(|line| line.contains(" ms") && !line.contains("catch-up"))
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// The provisioned binaries, built here on a fresh machine (minutes) before any demo starts,
/// so that no bound of a test below includes the build.
fn provisioned() -> std::path::PathBuf {
    common::cluster::provisioned_bin().unwrap_or_else(|e| panic!("provisioned binaries: {e}"))
}

/// The demo's binary.
fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_tidal-demo")
}

/// Whether `pid` runs (a zombie waiting for init to reap it does not).
fn pid_alive(pid: &str) -> bool {
    let stat = std::fs::read_to_string(Path::new("/proc").join(pid.trim()).join("stat"));
    stat.is_ok_and(|stat| {
        let state = stat.rsplit(')').next().unwrap_or_default().trim_start();
        !state.starts_with('Z') && !state.starts_with('X')
    })
}

#[test]
fn demo_shows_live_triggers_and_cleans_up_on_ctrl_c() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("demo-{}", std::process::id()));
    Reaper::get().watch_control_plane(&dir);
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join("logs/demo.log");
    let mut command = Command::new(binary());
    command
        .arg("--dir")
        .arg(&dir)
        .env("TIDAL_CONTROL_PLANE_BIN", provisioned());
    let mut demo = Process::spawn("demo", command, log);

    // The bound covers starting the control plane and the first triggers, not
    // provisioning: that was done above, before the demo started.
    let lines = blocking_eventually(Duration::from_secs(180), "three live triggers", || {
        let log = demo.log();
        let lines = on_time_lines(&log);
        assert!(demo.try_status().is_none(), "demo exited early:\n{log}");
        match lines.len() {
            3.. => Ok(lines),
            _ => Err(format!("its output:\n{log}")),
        }
    });
    for fields in &lines {
        // scheduled, rule, replicas, deployment replicas, lateness, "ms", ...
        assert!(fields.len() >= 6, "malformed line {fields:?}");
        assert!(
            ["ebb", "flow", "flood", "surge"].contains(&fields[1].as_str()),
            "{fields:?}"
        );
        assert_eq!(
            fields[2], fields[3],
            "the Deployment follows the trigger: {fields:?}"
        );
        let lateness: f64 = fields[4].parse().expect("lateness in ms");
        assert!(lateness >= 0.0, "never early: {fields:?}");
    }
    // Each trigger's trace is in the demo's Jaeger.
    let env = std::fs::read_to_string(dir.join("jaeger.env")).expect("jaeger.env");
    let query = env
        .lines()
        .find_map(|line| line.strip_prefix("JAEGER_QUERY="))
        .expect("the Jaeger query address");
    assert!(demo.log().contains(&format!("Jaeger at http://{query}")));
    for fields in &lines {
        let id = &fields[6];
        assert_eq!(id.len(), 32, "a trace id: {fields:?}");
        let path = format!("/api/traces/{id}");
        blocking_eventually(
            Duration::from_secs(30),
            &format!("trace {id} in Jaeger"),
            || common::http::get_json(query, &path).map_err(|e| format!("{e:?}")),
        );
    }
    let pids: Vec<String> = ["etcd.pid", "kube-apiserver.pid", "jaeger.pid"]
        .iter()
        .map(|file| std::fs::read_to_string(dir.join(file)).expect("control plane pid file"))
        .collect();
    assert!(pids.iter().all(|pid| pid_alive(pid)));

    demo.signal("INT");
    let status = demo.wait(Duration::from_secs(60));
    let output = demo.log();
    assert!(status.success(), "demo failed on Ctrl-C:\n{output}");
    assert!(output.contains("cleaned up"), "{output}");
    assert!(!dir.exists(), "the demo directory is removed");
    for pid in &pids {
        assert!(!pid_alive(pid), "control plane process {pid} still running");
    }
}

#[test]
fn demo_ends_quietly_and_cleans_up_when_its_output_is_closed() {
    use std::io::{BufRead, BufReader};
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("demo-head-{}", std::process::id()));
    Reaper::get().watch_control_plane(&dir);
    let errors = Path::new(env!("CARGO_TARGET_TMPDIR")).join("logs/demo-head.stderr");
    std::fs::create_dir_all(errors.parent().unwrap()).expect("log directory");
    let mut demo = Command::new(binary())
        .arg("--dir")
        .arg(&dir)
        .env("TIDAL_CONTROL_PLANE_BIN", provisioned())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&errors).expect("stderr file"))
        .spawn()
        .expect("start demo");
    Reaper::get().watch_pid(demo.id());
    // `demo | head -6`: the banner lines, the table header and the first triggers.
    let mut lines = BufReader::new(demo.stdout.take().expect("stdout")).lines();
    let head: Vec<String> = lines.by_ref().take(6).map(|l| l.expect("a line")).collect();
    assert!(
        head.iter().any(|l| l.contains(" ms")),
        "no trigger line: {head:#?}"
    );
    let pids: Vec<String> = ["etcd.pid", "kube-apiserver.pid"]
        .iter()
        .map(|file| std::fs::read_to_string(dir.join(file)).expect("control plane pid file"))
        .collect();
    drop(lines);

    let status = blocking_eventually(Duration::from_secs(90), "end after stdout closed", || {
        let exited = demo.try_wait().expect("try_wait");
        exited.ok_or_else(|| "still running".to_owned())
    });
    Reaper::get().forget_pid(demo.id());
    let stderr = std::fs::read_to_string(&errors).unwrap_or_default();
    assert!(status.success(), "{status:?}:\n{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("error"),
        "{stderr}"
    );
    assert!(stderr.contains("cleaned up"), "{stderr}");
    assert!(!dir.exists(), "the demo directory is removed");
    for pid in &pids {
        assert!(!pid_alive(pid), "control plane process {pid} still running");
    }
}

/// Control-plane scripts standing in for the real ones: `up.sh` runs `up` (bash), and
/// `down.sh` leaves a mark in `marks`.
fn fake_scripts(name: &str, up: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let root =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let (scripts, marks) = (root.join("scripts"), root.join("marks"));
    std::fs::create_dir_all(&scripts).expect("scripts directory");
    std::fs::create_dir_all(&marks).expect("marks directory");
    std::fs::write(scripts.join("provision.sh"), "echo /nonexistent\n").expect("provision.sh");
    std::fs::write(
        scripts.join("up.sh"),
        format!("touch {}/up\n{up}\n", marks.display()),
    )
    .expect("up.sh");
    std::fs::write(
        scripts.join("down.sh"),
        format!("touch {}/down-\"$(basename \"$1\")\"\n", marks.display()),
    )
    .expect("down.sh");
    (scripts, marks)
}

/// Runs `demo` with fake scripts in directory `dir`.
fn fake_demo(name: &str, scripts: &Path, dir: &Path) -> Process {
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("logs/{name}.log"));
    let mut command = Command::new(binary());
    command
        .arg("--scripts")
        .arg(scripts)
        .arg("--dir")
        .arg(dir)
        .env_remove("TIDAL_CONTROL_PLANE_BIN");
    Process::spawn(name, command, log)
}

#[test]
fn demo_cleans_up_on_sigterm_while_the_control_plane_starts() {
    let (scripts, marks) = fake_scripts("demo-sigterm", "exec sleep 600");
    let dir = marks.parent().unwrap().join("state");
    let mut demo = fake_demo("demo-sigterm", &scripts, &dir);
    blocking_eventually(Duration::from_secs(30), "a run of up.sh", || {
        match marks.join("up").exists() {
            true => Ok(()),
            false => Err(format!("demo's log:\n{}", demo.log())),
        }
    });
    demo.signal("TERM");
    let status = demo.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?}:\n{}", demo.log());
    assert!(
        marks.join("down-state").exists(),
        "down.sh did not run:\n{}",
        demo.log()
    );
    assert!(!dir.exists(), "the demo directory is removed");
}

#[test]
fn demo_cleans_up_after_a_failed_start() {
    let (scripts, marks) = fake_scripts("demo-failed", "echo 'up: etcd did not start' >&2; exit 1");
    let dir = marks.parent().unwrap().join("state");
    let mut demo = fake_demo("demo-failed", &scripts, &dir);
    let status = demo.wait(Duration::from_secs(30));
    let log = demo.log();
    assert_eq!(status.code(), Some(1), "a failure at run time: {log}");
    assert!(
        log.contains("demo: failed to run a control-plane script"),
        "{log}"
    );
    assert!(log.contains("up.sh exited with"), "{log}");
    assert!(
        marks.join("down-state").exists(),
        "down.sh did not run:\n{log}"
    );
    assert!(!dir.exists(), "the demo directory is removed");
}
