//! `tidal-chaos`: runs named fault scenarios and reports what the API server saw.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tidal_chaos::catch_up::describe;
use tidal_chaos::in_cluster::Installation;
use tidal_chaos::report::{Report, table};
use tidal_chaos::run::{Limits, Patience, Target, run_mixed};
use tidal_chaos::scenario::{Mode, Scenario};
use tidal_chaos::timeline;
use tidal_chaos::timing::parse_duration;

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Lists the scenarios and the modes they run in.
    List,
    /// Runs scenarios one after the other (without names: all of the mode's).
    Run {
        /// Scenarios to run.
        scenarios: Vec<Scenario>,
        #[command(flatten)]
        target: TargetArgs,
        /// Faults per scenario.
        #[arg(long, default_value_t = 3)]
        faults: usize,
        /// No new fault after this long per scenario, e.g. `90s`, `5m`.
        #[arg(long, default_value = "5m", value_parser = parse_duration)]
        max_duration: Duration,
        /// Where to write `SCENARIO.json` and `SCENARIO.svg`.
        #[arg(long, default_value = "target/chaos")]
        out: PathBuf,
    },
    /// Runs the faults of all the mode's scenarios mixed on one set of replicas
    /// (without the 1,000-object burst, whose workload is another).
    Soak {
        #[command(flatten)]
        target: TargetArgs,
        /// How long to inject faults.
        #[arg(long, value_parser = parse_duration)]
        duration: Duration,
        /// At most this many faults.
        #[arg(long, default_value_t = 10_000)]
        faults: usize,
        /// Where to write `soak.json` and `soak.svg`.
        #[arg(long, default_value = "target/chaos")]
        out: PathBuf,
    },
}

/// Where the replicas run.
#[derive(Args)]
struct TargetArgs {
    /// `local`: replicas as processes on a control plane of the runner's own (every
    /// fault); `in-cluster`: the Deployment of `kubectl apply -k deploy/` on the
    /// cluster of `--kubeconfig`.
    #[arg(long, value_enum, default_value = "local")]
    mode: Mode,
    /// In-cluster: a cluster admin's kubeconfig.
    #[arg(long, env = "KUBECONFIG", default_value = "~/.kube/config")]
    kubeconfig: PathBuf,
    /// In-cluster: the controller's namespace (and its Lease's).
    #[arg(long, default_value = "tidal-system")]
    controller_namespace: String,
    /// In-cluster: the controller's Deployment.
    #[arg(long, default_value = "tidal-scheduler")]
    deployment: String,
    /// In-cluster: the Lease's name.
    #[arg(long, default_value = "tidal-scheduler")]
    lease: String,
    /// In-cluster: the node's containerd socket, for the signal faults (SIGKILL,
    /// SIGSTOP of the controller's container, with `ctr`).
    #[arg(long)]
    containerd_address: Option<String>,
    /// In-cluster: the API server's audit log (JSON lines, write requests with their
    /// User-Agent); without it, writes of ended terms are not judged.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// In-cluster: the image of the workload's pods (must be on the node).
    #[arg(long, default_value = "registry.k8s.io/pause:3.10")]
    workload_image: String,
    /// In-cluster: a command of the `upgrade` scenario (run by `sh -c` with `KUBECONFIG`
    /// set) that moves the Deployment to another version, e.g. `helm upgrade
    /// tidal-scheduler ./chart -n tidal-system`; repeated, the faults run them in turn
    /// (an upgrade, then a rollback).
    #[arg(long)]
    upgrade_command: Vec<String>,
    /// `strict`: lateness and convergence bounds from the Lease timing; `loaded`: on a
    /// machine busy with other work, from the takeover observed, with headroom. The
    /// invariants are exact either way.
    #[arg(long, value_enum, default_value = "strict")]
    patience: Patience,
    /// Seconds between the workload's fire instants (every object fires at each), instead
    /// of the scenario's own (2 s; 30 s for failover-burst): a smaller cluster may need
    /// more to keep up. At most 30, or whole minutes (60, 120, ... 1800).
    #[arg(long, value_parser = parse_period)]
    period: Option<u32>,
    /// Objects of the workload, instead of the scenario's own (3; 1,000 for
    /// failover-burst), e.g. `--objects 10000 --period 120` for a burst at fleet scale.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    objects: Option<u64>,
}

/// A `--period`: 1–30 s, or whole minutes up to 30.
fn parse_period(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(period @ 1..=30) => Ok(period),
        Ok(period) if period % 60 == 0 && (60..=1800).contains(&period) => Ok(period),
        _ => Err(format!(
            "`{text}`: 1 to 30 seconds, or whole minutes (60, 120, ... 1800)"
        )),
    }
}

impl TargetArgs {
    fn target(&self) -> Target {
        match self.mode {
            Mode::Local => Target::Local,
            Mode::InCluster => {
                let home = std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_default();
                let kubeconfig = match self.kubeconfig.strip_prefix("~") {
                    Ok(rest) => home.join(rest),
                    Err(_) => self.kubeconfig.clone(),
                };
                Target::InCluster(Installation {
                    kubeconfig,
                    namespace: self.controller_namespace.clone(),
                    deployment: self.deployment.clone(),
                    lease: self.lease.clone(),
                    containerd: self.containerd_address.clone(),
                    audit_log: self.audit_log.clone(),
                    workload_image: self.workload_image.clone(),
                    upgrades: self.upgrade_command.clone(),
                })
            }
        }
    }

    /// The scenarios of this mode among `scenarios` (all of them if empty).
    fn scenarios(&self, scenarios: Vec<Scenario>) -> Vec<Scenario> {
        let all = Scenario::ALL
            .into_iter()
            .filter(|s| s.modes().contains(&self.mode));
        if scenarios.is_empty() {
            all.collect()
        } else {
            scenarios
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::List => {
            for scenario in Scenario::ALL.into_iter().chain([Scenario::Upgrade]) {
                let mut modes: Vec<&str> = scenario
                    .modes()
                    .iter()
                    .map(|m| match m {
                        Mode::Local => "local",
                        Mode::InCluster => "in-cluster",
                    })
                    .collect();
                if !Scenario::ALL.contains(&scenario) {
                    modes.push("only when named");
                }
                println!("{:<22} {}", scenario.name(), modes.join(", "));
            }
            Ok(())
        }
        Command::Run {
            scenarios,
            target,
            faults,
            max_duration,
            out,
        } => {
            let scenarios = target.scenarios(scenarios);
            let where_ = target.target();
            let limits = Limits {
                faults,
                duration: max_duration,
                patience: target.patience,
                period: target.period,
                objects: target.objects.map(|n| n as usize),
            };
            let mut reports = Vec::new();
            for scenario in scenarios {
                let report = run_mixed(&[scenario], limits, &where_)
                    .await
                    .map_err(|e| anyhow::anyhow!("{scenario}: {e}"))?;
                write_outputs(&out, scenario.name(), &report)?;
                reports.push(report);
            }
            finish(&reports)
        }
        Command::Soak {
            target,
            duration,
            faults,
            out,
        } => {
            let scenarios: Vec<Scenario> = target
                .scenarios(Vec::new())
                .into_iter()
                .filter(|s| *s != Scenario::FailoverBurst)
                .collect();
            let limits = Limits {
                faults,
                duration,
                patience: target.patience,
                period: target.period,
                objects: target.objects.map(|n| n as usize),
            };
            let report = run_mixed(&scenarios, limits, &target.target())
                .await
                .map_err(|e| anyhow::anyhow!("soak: {e}"))?;
            write_outputs(&out, "soak", &report)?;
            finish(&[report])
        }
    }
}

/// Writes `NAME.json` and `NAME.svg` under `out`.
fn write_outputs(out: &std::path::Path, name: &str, report: &Report) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(
        out.join(format!("{name}.json")),
        serde_json::to_string_pretty(report)?,
    )?;
    std::fs::write(out.join(format!("{name}.svg")), timeline::svg(report))?;
    Ok(())
}

/// Prints the table; fails if any scenario did.
fn finish(reports: &[Report]) -> anyhow::Result<()> {
    print!("{}", table(reports));
    for report in reports.iter().filter(|r| !r.catch_ups.is_empty()) {
        print!(
            "{}: catch-ups (a fault-free burst of the same writes took {:.1} s)\n{}",
            report.name,
            report.burst_ms / 1000.0,
            describe(&report.catch_ups, report.burst_ms)
        );
    }
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.name.as_str())
        .collect();
    anyhow::ensure!(failed.is_empty(), "failed: {}", failed.join(", "));
    Ok(())
}
