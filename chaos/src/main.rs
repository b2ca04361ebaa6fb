//! `tidal-chaos`: runs named fault scenarios and reports what the API server saw.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tidal_chaos::report::{Report, table};
use tidal_chaos::run::{Limits, run_local, run_mixed};
use tidal_chaos::scenario::{Mode, Scenario};
use tidal_chaos::timeline;

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
    /// Runs scenarios one after the other (all of them without names).
    Run {
        /// Scenarios to run.
        scenarios: Vec<Scenario>,
        /// Where the replicas run.
        #[arg(long, value_enum, default_value = "local")]
        mode: Mode,
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
    /// Runs the faults of all local scenarios mixed on one set of replicas.
    Soak {
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

fn parse_duration(text: &str) -> Result<Duration, String> {
    let nanos =
        tidal_scheduler::schedule::parse_go_duration(text).map_err(|e| format!("{text}: {e}"))?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("{text}: a duration cannot be negative"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::List => {
            for scenario in Scenario::ALL {
                let modes: Vec<&str> = scenario
                    .modes()
                    .iter()
                    .map(|m| match m {
                        Mode::Local => "local",
                        Mode::InCluster => "in-cluster",
                    })
                    .collect();
                println!("{:<22} {}", scenario.name(), modes.join(", "));
            }
            Ok(())
        }
        Command::Run {
            scenarios,
            mode,
            faults,
            max_duration,
            out,
        } => {
            anyhow::ensure!(
                mode == Mode::Local,
                "in-cluster mode is not implemented yet; run --mode local"
            );
            let scenarios = if scenarios.is_empty() {
                Scenario::ALL.to_vec()
            } else {
                scenarios
            };
            let limits = Limits {
                faults,
                duration: max_duration,
            };
            let mut reports = Vec::new();
            for scenario in scenarios {
                let report = run_local(scenario, limits)
                    .await
                    .map_err(|e| anyhow::anyhow!("{scenario}: {e}"))?;
                write_outputs(&out, scenario.name(), &report)?;
                reports.push(report);
            }
            finish(&reports)
        }
        Command::Soak {
            duration,
            faults,
            out,
        } => {
            let scenarios: Vec<Scenario> = Scenario::ALL
                .into_iter()
                .filter(|s| *s != Scenario::FailoverBurst)
                .collect();
            let limits = Limits { faults, duration };
            let report = run_mixed(&scenarios, limits)
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
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.scenario.name())
        .collect();
    anyhow::ensure!(failed.is_empty(), "failed: {}", failed.join(", "));
    Ok(())
}
