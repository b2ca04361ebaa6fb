//! Runs robfig/cron v3 (the Go reference program in `tests/robfig-reference`) on a corpus.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::corpus::Case;

/// What robfig says about one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Parse error (or a panic, which robfig has for a prefix without a space).
    Rejected(String),
    /// Fire times as Unix seconds; `None` where robfig gave up (its zero time).
    Fires(Vec<Option<i64>>),
}

/// Builds the reference program once per test binary; fails loudly if Go is missing.
pub fn reference_binary() -> PathBuf {
    let source = PathBuf::from(crate::REPO).join("tests/robfig-reference");
    let binary = crate::target_tmpdir().join("robfig-reference");
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&source)
        .env("GOWORK", "off")
        .env("GOFLAGS", "-mod=readonly")
        .status()
        .expect("the differential test needs Go on PATH (https://go.dev/dl) to build robfig/cron");
    assert!(
        status.success(),
        "go build of tests/robfig-reference failed"
    );
    binary
}

/// Asks robfig for the first `count` fire times of every case, in order.
pub fn ask_robfig(cases: &[Case], count: usize) -> Vec<Answer> {
    let mut child = Command::new(reference_binary())
        .arg(format!("-n={count}"))
        .env("TZ", "UTC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("robfig reference starts");
    let mut input = String::new();
    for case in cases {
        input.push_str(&format!(
            "{}\t{}\n",
            case.expression.replace(['\n', '\t'], " "),
            case.start_nanos
        ));
    }
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("robfig reference runs");
    writer.join().expect("writer thread").expect("write corpus");
    assert!(output.status.success(), "robfig reference failed");
    let text = String::from_utf8(output.stdout).expect("utf-8 output");
    let answers: Vec<Answer> = text.lines().map(parse_answer).collect();
    assert_eq!(answers.len(), cases.len(), "one answer per case");
    answers
}

fn parse_answer(line: &str) -> Answer {
    let mut parts = line.split('\t');
    match parts.next() {
        Some("OK") => Answer::Fires(
            parts
                .map(|p| {
                    if p == "ZERO" {
                        None
                    } else {
                        Some(p.parse().expect("unix seconds"))
                    }
                })
                .collect(),
        ),
        _ => Answer::Rejected(parts.collect::<Vec<_>>().join(" ")),
    }
}
