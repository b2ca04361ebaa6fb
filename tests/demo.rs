//! `tidal-scheduler demo`, the README's first command: it starts its own control plane,
//! shows on-time triggers with the Deployment following them, and on Ctrl-C stops every
//! process it started and removes its directory.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{BINARY, Process};
use common::reaper::Reaper;

/// Trigger lines of the demo's table: `scheduled rule replicas deployment lateness note`.
fn on_time_lines(output: &str) -> Vec<Vec<String>> {
    output
        .lines()
        .filter(|line| line.contains(" ms") && !line.contains("catch-up"))
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect()
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
    let mut command = Command::new(BINARY);
    command.arg("demo").arg("--dir").arg(&dir);
    let mut demo = Process::spawn("demo", command, log);

    // Provisioning is cached by the time tests run (.ci/run provisions first).
    let deadline = Instant::now() + Duration::from_secs(180);
    let lines = loop {
        let lines = on_time_lines(&demo.log());
        if lines.len() >= 3 {
            break lines;
        }
        assert!(
            demo.try_status().is_none(),
            "demo exited early:\n{}",
            demo.log()
        );
        assert!(
            Instant::now() < deadline,
            "no live triggers within 180 s:\n{}",
            demo.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
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
    let pids: Vec<String> = ["etcd.pid", "kube-apiserver.pid"]
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
