//! A real Prometheus (built by `provision.sh`) on a loopback port of its own, scraping
//! the given targets every second with exemplar storage on, and `promtool`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::cluster::provisioned_bin;
use crate::http::{encode, free_port, get_json};
use crate::process::Process;
use crate::wait::{PACE, blocking_poll, eventually_within};

/// A running Prometheus.
pub struct Prometheus {
    process: Process,
    port: u16,
}

impl Prometheus {
    /// Starts Prometheus under `dir`, scraping `targets` (`host:port` of `/metrics`)
    /// every second; waits until it is ready.
    pub fn start(dir: &Path, targets: &[String]) -> Prometheus {
        std::fs::create_dir_all(dir).expect("create the Prometheus directory");
        let port = free_port();
        let config = dir.join("prometheus.yml");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n- job_name: tidal-scheduler\n  static_configs:\n  \
                 - targets: [{}]\n",
                targets.join(", ")
            ),
        )
        .expect("write prometheus.yml");
        let bin = provisioned_bin().expect("provisioned binaries");
        let mut command = Command::new(bin.join("prometheus"));
        command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--enable-feature=exemplar-storage")
            .arg("--log.level=warn");
        let process = Process::spawn("prometheus", command, dir.join("prometheus.log"));
        let mut prometheus = Prometheus { process, port };
        let started = blocking_poll(PACE, Duration::from_secs(60), || {
            if let Some(status) = prometheus.process.try_status() {
                return Ok(Err(status));
            }
            match crate::http::get(&prometheus.address(), "/-/ready") {
                Ok((200, _)) => Ok(Ok(())),
                answer => Err(format!("/-/ready: {answer:?}")),
            }
        });
        if !matches!(started, Ok(Ok(()))) {
            panic!(
                "Prometheus did not start ({started:?}); log:\n{}",
                prometheus.process.log()
            );
        }
        prometheus
    }

    /// `host:port` of its API.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Evaluates `promql` now: the `data` of the answer, or the error Prometheus gave.
    pub fn query(&self, promql: &str) -> Result<Value, String> {
        let path = format!("/api/v1/query?query={}", encode(promql));
        let answer = get_json(&self.address(), &path)?;
        if answer["status"] != "success" {
            return Err(format!("{promql}: {answer}"));
        }
        Ok(answer["data"].clone())
    }

    /// The samples of an instant vector query (empty for no data).
    pub fn vector(&self, promql: &str) -> Result<Vec<Value>, String> {
        let data = self.query(promql)?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// The single value of a query that returns one sample, if it does.
    pub fn value(&self, promql: &str) -> Option<f64> {
        let samples = self.vector(promql).ok()?;
        let sample = samples.first()?;
        sample["value"][1].as_str()?.parse().ok()
    }

    /// The exemplars of `promql` over the last hour.
    pub fn exemplars(&self, promql: &str) -> Result<Vec<Value>, String> {
        let now = jiff::Timestamp::now().as_second();
        let path = format!(
            "/api/v1/query_exemplars?query={}&start={}&end={}",
            encode(promql),
            now - 3600,
            now + 60
        );
        let answer = get_json(&self.address(), &path)?;
        Ok(answer["data"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|series| series["exemplars"].as_array().cloned().unwrap_or_default())
            .collect())
    }

    /// Waits until `promql` returns a value for which `done` holds; returns it.
    pub async fn wait_value(&self, promql: &str, done: impl Fn(f64) -> bool) -> f64 {
        eventually_within(Duration::from_secs(60), promql, || async {
            match self.value(promql) {
                Some(value) if done(value) => Ok(value),
                other => Err(format!("it is {other:?}")),
            }
        })
        .await
    }
}

/// `promtool` with `args`, `stdin` piped in; its exit success and combined output.
pub fn promtool(args: &[&str], stdin: &str) -> (bool, String) {
    use std::io::Write;
    let bin: PathBuf = provisioned_bin().expect("provisioned binaries");
    let mut child = Command::new(bin.join("promtool"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write to promtool");
    let output = child.wait_with_output().expect("wait for promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}
