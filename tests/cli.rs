//! Runs the `tidal-scheduler` binary: `next`, `plan` over every example manifest, `crd`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn binary(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tidal-scheduler"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// Runs the binary with `input` on stdin.
fn binary_with_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidal-scheduler"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(input.as_bytes()).expect("write stdin");
    drop(stdin);
    child.wait_with_output().expect("the binary exits")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn next_prints_instants_in_utc_one_per_line() {
    let out = binary(&[
        "next",
        "CRON_TZ=America/New_York 0 30 2 * * *",
        "--after",
        "2026-03-06T12:00:00Z",
        "--count",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // 2026-03-08 02:30 does not exist in New York: it fires at 03:00 EDT, right after the gap.
    assert_eq!(
        stdout(&out),
        "2026-03-07T07:30:00Z\n2026-03-08T07:00:00Z\n2026-03-09T06:30:00Z\n"
    );
}

#[test]
fn next_evaluates_zoneless_expressions_in_utc_or_the_given_zone() {
    let utc = binary(&[
        "next",
        "0 0 8 * * *",
        "--after",
        "2026-11-29T00:00:00Z",
        "--count",
        "1",
    ]);
    assert_eq!(stdout(&utc), "2026-11-29T08:00:00Z\n");
    let shanghai = binary(&[
        "next",
        "0 0 8 * * *",
        "--time-zone",
        "Asia/Shanghai",
        "--after",
        "2026-11-29T00:00:00Z",
        "--count",
        "2",
    ]);
    assert_eq!(
        stdout(&shanghai),
        "2026-11-30T00:00:00Z\n2026-12-01T00:00:00Z\n"
    );
    let every = binary(&[
        "next",
        "@every 90m",
        "--after",
        "2026-11-29T00:00:00.5Z",
        "--count",
        "2",
    ]);
    assert_eq!(
        stdout(&every),
        "2026-11-29T01:30:00Z\n2026-11-29T03:00:00Z\n"
    );
}

#[test]
fn next_defaults_to_five_instants_after_now() {
    let out = binary(&["next", "* * * * * *"]);
    assert!(out.status.success());
    assert_eq!(stdout(&out).lines().count(), 5);
    assert!(
        stdout(&out)
            .lines()
            .all(|l| l.ends_with('Z') && l.len() == 20),
        "{}",
        stdout(&out)
    );
}

#[test]
fn next_rejects_bad_input_with_exit_2_and_nothing_on_stdout() {
    let cases: &[(&[&str], &str)] = &[
        (&["next", "0 0 8 * *"], "expected 6 fields"),
        (
            &["next", "0 0 25 * * *"],
            "hour: 25 in `25` is out of range 0-23",
        ),
        (&["next", "0 0 0 L * *"], "day-of-month: `L` uses L, W or #"),
        (
            &["next", "CRON_TZ=Mars/Olympus 0 0 8 * * *"],
            "unknown time zone `Mars/Olympus`",
        ),
        (&["next", "CRON_TZ=UTC"], "must be followed by a space"),
        (&["next", "0 0 0 30 2 *"], "can never fire"),
        (
            &["next", "CRON_TZ=UTC @every 0s"],
            "@every: duration `0s` is not positive",
        ),
        (
            &["next", "CRON_TZ=UTC 0 0 8 * * *", "--time-zone", "UTC"],
            "time zone given twice",
        ),
        (
            &["next", "0 0 8 * * *", "--after", "yesterday"],
            "--after: `yesterday` is not an RFC 3339",
        ),
        (&["next", "0 0 8 * * *", "--count", "0"], "--count"),
    ];
    for (args, message) in cases {
        let out = binary(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stdout(&out).is_empty(), "{args:?} printed {}", stdout(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
}

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn plan_accepts_every_example_and_shows_its_tide() {
    let files = examples();
    assert!(
        files.len() >= 5,
        "expected the seed's five examples, found {files:?}"
    );
    for file in files {
        let out = binary(&[
            "plan",
            "-f",
            file.to_str().unwrap(),
            "--from",
            "2026-11-09T00:00:00Z",
            "--days",
            "7",
        ]);
        assert!(out.status.success(), "{}: {}", file.display(), stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("level changes"), "{}: {text}", file.display());
        assert!(
            text.contains("desiredReplicas"),
            "{}: {text}",
            file.display()
        );
        // Every example changes level at least once a week.
        assert!(
            !text.contains(" 0 level changes"),
            "{}: {text}",
            file.display()
        );
    }
}

#[test]
fn plan_shows_level_changes_in_utc_and_local_time() {
    let out = binary(&[
        "plan",
        "-f",
        "deploy/examples/ecommerce-daily-tide.yaml",
        "--from",
        "2026-11-30T00:00:00Z",
        "--days",
        "1",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("at start: 20 replicas from morning-base"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.contains("evening-rush"))
        .expect("an evening-rush row");
    assert!(
        row.contains("2026-11-30T11:00:00Z")
            && row.contains("19:00:00 CST")
            && row.contains("40 -> 60"),
        "{row}"
    );
    assert!(text.contains("3 level changes"), "{text}");
}

#[test]
fn plan_flags_conflicts() {
    let manifest = r#"
apiVersion: scheduling.tidal.io/v1alpha1
kind: TidalScheduler
metadata: {name: clash, namespace: demo}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  apply: Scale
  triggers:
    times:
      rules:
      - {name: small, cron: "CRON_TZ=UTC 0 0 8 * * *", replicas: 3}
      - {name: large, cron: "CRON_TZ=UTC 0 0 8 * * MON", replicas: 9}
"#;
    let out = binary_with_stdin(
        &[
            "plan",
            "-f",
            "-",
            "--from",
            "2026-11-29T00:00:00Z",
            "--days",
            "2",
        ],
        manifest,
    );
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.contains("CONFLICT"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.contains("2026-11-30T08:00:00Z")
            && row.contains("large")
            && row.contains("large, small"),
        "{row}"
    );
}

#[test]
fn plan_reports_every_problem_of_an_invalid_manifest() {
    let manifest = r#"
apiVersion: scheduling.tidal.io/v1alpha1
kind: TidalScheduler
metadata: {name: broken, namespace: demo}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: elsewhere}
  triggers:
    times:
      rules:
      - {name: a, cron: "CRON_TZ=Asia/Shanghai 0 0 8 * *", replicas: 3}
      - {name: b, cron: "0 0 8 * * *", timeZone: Nowhere/Town, replicas: 1}
      - {name: c, cron: "CRON_TZ=UTC @every -1h", replicas: 2}
"#;
    let out = binary_with_stdin(&["plan", "-f", "-"], manifest);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    for expected in [
        "spec.targetRef.namespace: `elsewhere` differs",
        "spec.triggers.times.rules[0] (a): expected 6 fields",
        "spec.triggers.times.rules[1] (b): unknown time zone `Nowhere/Town`",
        "spec.triggers.times.rules[2] (c): @every: duration `-1h` is not positive",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in {err}");
    }
    let missing = binary(&["plan", "-f", "no/such/file.yaml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("failed to read no/such/file.yaml"));
}

#[test]
fn committed_crd_matches_the_generated_one() {
    let out = binary(&["crd"]);
    assert!(out.status.success());
    let committed =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crd.yaml"))
            .unwrap();
    assert!(
        stdout(&out) == committed,
        "deploy/crd.yaml is stale: regenerate it with `cargo run -- crd > deploy/crd.yaml`"
    );
}

/// Runs the binary, reads the first line of its stdout and closes it, as `| head -1`
/// does; returns that line and the exit.
fn first_line_then_close(args: &[&str]) -> (String, Output) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidal-scheduler"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("read a line");
    drop(reader);
    (line, child.wait_with_output().expect("the binary exits"))
}

#[test]
fn a_closed_stdout_ends_next_and_plan_quietly() {
    // Far more output than a pipe buffers, so the writes after the close fail.
    for args in [
        &["next", "TZ=UTC * * * * * *", "--count", "100000"][..],
        &[
            "plan",
            "-f",
            "deploy/examples/ecommerce-daily-tide.yaml",
            "--days",
            "366",
        ][..],
    ] {
        let (line, out) = first_line_then_close(args);
        assert!(!line.is_empty(), "{args:?} printed nothing");
        assert!(
            out.status.success(),
            "{args:?}: {:?} {}",
            out.status,
            stderr(&out)
        );
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

/// Runs the binary with `KUBECONFIG` pointing at nothing and no in-cluster configuration.
fn binary_without_cluster(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tidal-scheduler"))
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env("HOME", "/nonexistent")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .expect("the binary runs")
}

#[test]
fn runtime_failures_exit_1_and_invalid_input_exits_2_naming_what_failed() {
    let no_cluster = binary_without_cluster(&["run", "--metrics-address", "127.0.0.1:0"]);
    assert_eq!(no_cluster.status.code(), Some(1), "{}", stderr(&no_cluster));
    assert!(
        stderr(&no_cluster).contains("error: failed to load a Kubernetes client configuration"),
        "{}",
        stderr(&no_cluster)
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let address = taken.local_addr().expect("address").to_string();
    let busy = binary_without_cluster(&["run", "--metrics-address", &address]);
    assert_eq!(busy.status.code(), Some(1), "{}", stderr(&busy));
    assert!(
        stderr(&busy).contains(&format!(
            "error: failed to listen on --metrics-address {address}"
        )),
        "{}",
        stderr(&busy)
    );

    let unsafe_timing =
        binary_without_cluster(&["run", "--lease-duration", "3s", "--renew-deadline", "5s"]);
    assert_eq!(unsafe_timing.status.code(), Some(2));
    assert!(
        stderr(&unsafe_timing)
            .contains("lease duration (3s) must be longer than the renew deadline"),
        "{}",
        stderr(&unsafe_timing)
    );
    let bad_duration = binary_without_cluster(&["run", "--retry-period", "soon"]);
    assert_eq!(bad_duration.status.code(), Some(2));
    assert!(
        stderr(&bad_duration).contains("--retry-period"),
        "{}",
        stderr(&bad_duration)
    );
}

/// The picture of docs/cli.md: `deploy/examples/plan.svg`, and the command that draws it.
const PLAN_SVG: &str = "deploy/examples/plan.svg";
const PLAN_SVG_ARGS: [&str; 11] = [
    "plan",
    "-f",
    "deploy/examples/office-hours-skip-holidays.yaml",
    "-f",
    "deploy/examples/promotion-days-only.yaml",
    "--from",
    "2026-12-21T00:00:00Z",
    "--days",
    "10",
    "-o",
    "svg",
];

#[test]
fn calendar_import_turns_govuk_bank_holidays_into_a_manifest_plan_reads() {
    let out = binary(&[
        "calendar",
        "import",
        "deploy/examples/calendars/england-and-wales.ics",
        "--name",
        "uk-bank-holidays",
        "--namespace",
        "support",
        "--time-zone",
        "Europe/London",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let manifest = stdout(&out);
    assert!(
        manifest.starts_with("apiVersion: scheduling.tidal.io/v1alpha1\nkind: TidalCalendar\n")
    );
    assert_eq!(manifest.matches("- date: ").count(), 65, "{manifest}");
    // The imported calendar, and an object skipping its days, planned together: Good
    // Friday 2019 (19 April) is skipped.
    let object = r#"
---
apiVersion: scheduling.tidal.io/v1alpha1
kind: TidalScheduler
metadata: {name: desk, namespace: support}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: desk}
  triggers:
    times:
      rules:
      - name: office
        cron: "CRON_TZ=Europe/London 0 0 9 * * MON-FRI"
        replicas: 12
        skipDays: [{name: uk-bank-holidays}]
      - name: evening
        cron: "CRON_TZ=Europe/London 0 0 18 * * MON-FRI"
        replicas: 3
"#;
    let out = binary_with_stdin(
        &[
            "plan",
            "-f",
            "-",
            "--from",
            "2019-04-15T00:00:00Z",
            "--days",
            "8",
        ],
        &format!("{manifest}{object}"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let skipped: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("TidalCalendar support/uk-bank-holidays"))
        .collect();
    // Good Friday 19 April and Easter Monday 22 April 2019 (09:00 BST = 08:00 UTC).
    assert_eq!(skipped.len(), 2, "{text}");
    assert!(skipped[0].contains("2019-04-19T08:00:00Z"), "{text}");
    assert!(skipped[1].contains("2019-04-22T08:00:00Z"), "{text}");
    assert!(
        !text.contains("2019-04-19T08:00:00Z   Fri"),
        "no trigger that day: {text}"
    );
}

#[test]
fn calendar_import_refuses_bad_input_naming_the_line_and_writes_nothing() {
    let ics = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20261225\nEND:VEVENT\nBEGIN:VEVENT\nDTSTART:20261226T100000Z\nEND:VEVENT\nEND:VCALENDAR\n";
    let out = binary_with_stdin(
        &[
            "calendar",
            "import",
            "-",
            "--name",
            "x",
            "--time-zone",
            "UTC",
        ],
        ics,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).is_empty(), "nothing written: {}", stdout(&out));
    assert!(
        stderr(&out).contains("line 6: DTSTART 20261226T100000Z is not an all-day date"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn plan_names_a_calendar_missing_from_the_files() {
    let manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy/examples/office-hours-skip-holidays.yaml"),
    )
    .unwrap();
    let object_only = manifest.split("\n---\n").nth(1).expect("the object");
    let out = binary_with_stdin(&["plan", "-f", "-"], object_only);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "spec.triggers.times.rules[0].skipDays[0] (office-hours): \
             ClusterTidalCalendar uk-bank-holidays not found"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn plan_prints_json_with_the_skipped_instants() {
    let out = binary(&[
        "plan",
        "-f",
        "deploy/examples/office-hours-skip-holidays.yaml",
        "--from",
        "2026-12-21T00:00:00Z",
        "--days",
        "10",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let object = &report["objects"][0];
    assert_eq!(object["object"], "support/support-desk-tide");
    let skipped: Vec<&str> = object["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["time"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["2026-12-25T09:00:00Z", "2026-12-28T09:00:00Z"]);
    assert_eq!(object["skipped"][0]["by"], "skipDays");
    assert_eq!(object["skipped"][0]["dayStart"], "2026-12-25T00:00:00Z");
    // Ten weekdays minus two bank holidays open the desk.
    let opened = object["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["rule"] == "office-hours")
        .count();
    assert_eq!(opened, 6);
    assert_eq!(report["invalid"], serde_json::json!([]));
}

#[test]
fn plan_draws_an_svg_step_chart_with_triggers_conflicts_and_skipped_days() {
    let out = binary(&PLAN_SVG_ARGS);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = stdout(&out);
    let document = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let panels: Vec<_> = root
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
        .collect();
    let objects: Vec<_> = panels
        .iter()
        .map(|p| p.attribute("data-object").unwrap())
        .collect();
    assert_eq!(
        objects,
        [
            "support/support-desk-tide",
            "production/storefront-promotions"
        ]
    );
    let of = |panel: &roxmltree::Node, class: &str| -> Vec<(String, String)> {
        panel
            .descendants()
            .filter(|n| n.attribute("class") == Some(class))
            .map(|n| {
                (
                    n.attribute("data-rule").unwrap_or_default().to_owned(),
                    n.attribute("data-time")
                        .or(n.attribute("data-day-start"))
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect()
    };
    // The desk: a dot per level change, the two bank holidays hatched, one level line.
    let desk = &panels[0];
    assert_eq!(of(desk, "trigger").len(), 12);
    assert_eq!(
        of(desk, "skipped-day")
            .iter()
            .map(|(_, day)| day.as_str())
            .collect::<Vec<_>>(),
        ["2026-12-25T00:00:00Z", "2026-12-28T00:00:00Z"]
    );
    assert_eq!(
        of(desk, "skipped"),
        [
            ("office-hours".to_owned(), "2026-12-25T09:00:00Z".to_owned()),
            ("office-hours".to_owned(), "2026-12-28T09:00:00Z".to_owned()),
        ]
    );
    let level = desk
        .descendants()
        .find(|n| n.attribute("class") == Some("level"))
        .expect("a level line");
    let path = level.attribute("d").unwrap();
    assert!(
        path.starts_with('M') && path.matches('V').count() == 12,
        "{path}"
    );
    // The promotions: a conflict on Friday 25 December at 20:00 Shanghai, won by 200.
    let promotions = &panels[1];
    assert_eq!(
        of(promotions, "conflict"),
        [(
            "promotion-evening".to_owned(),
            "2026-12-25T12:00:00Z".to_owned()
        )]
    );
    assert!(
        of(promotions, "skipped-day").is_empty(),
        "onlyDays hatch nothing"
    );
    // Its promotion days (24 to 26 December, Shanghai) are shaded instead.
    assert_eq!(
        of(promotions, "only-day")
            .iter()
            .map(|(_, day)| day.as_str())
            .collect::<Vec<_>>(),
        [
            "2026-12-23T16:00:00Z",
            "2026-12-24T16:00:00Z",
            "2026-12-25T16:00:00Z"
        ]
    );
    assert!(of(desk, "only-day").is_empty());
    // Points lie inside the picture.
    let width: f64 = root.attribute("width").unwrap().parse().unwrap();
    for node in root.descendants().filter(|n| n.has_tag_name("circle")) {
        let cx: f64 = node.attribute("cx").unwrap().parse().unwrap();
        assert!((0.0..=width).contains(&cx));
    }
}

#[test]
fn the_readme_picture_is_what_plan_draws() {
    let out = binary(&PLAN_SVG_ARGS);
    let committed =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(PLAN_SVG)).unwrap();
    assert!(
        stdout(&out) == committed,
        "{PLAN_SVG} is stale: regenerate it with `cargo run -- {} > {PLAN_SVG}`",
        PLAN_SVG_ARGS.join(" ")
    );
}

#[test]
fn as_kubectl_tidal_the_binary_is_a_kubectl_plugin() {
    let dir = std::env::temp_dir().join(format!("kubectl-plugin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plugin = dir.join("kubectl-tidal");
    let _ = std::fs::remove_file(&plugin);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tidal-scheduler"), &plugin).unwrap();
    let out = Command::new(&plugin)
        .args(["plan", "--help"])
        .output()
        .expect("the plugin runs");
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("Usage: kubectl tidal plan"),
        "{}",
        stdout(&out)
    );
    let bad = Command::new(&plugin)
        .args(["plan", "--nope"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("kubectl tidal plan"),
        "{}",
        stderr(&bad)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
