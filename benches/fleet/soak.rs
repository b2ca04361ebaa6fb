//! Triggers for an hour on a sample of the fleet while the rest waits: the leader's
//! resident set, sampled every minute, must not grow.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tidal_scheduler::api::TidalScheduler;

use common::cluster::TestEnv;
use common::measure::grouped;
use common::process::Process;
use common::tide::rules_json;
use tidal_harness as common;

use crate::{Rule, mib, object_name, summed};

/// Rules added to each sampled object: its level alternates every 30 s.
const RULES: [(&str, &str, i32); 2] = [
    ("soak-a", "CRON_TZ=UTC 0 * * * * *", 1),
    ("soak-b", "CRON_TZ=UTC 30 * * * * *", 2),
];

/// Minutes at the start left out of the steady-state figures: the sample's first
/// triggers fill its histories' turnover and the queues settle.
const WARM_UP: usize = 5;

/// Adds [`RULES`] to the first `sample` objects (beside their `rules`), then samples
/// `leader`'s resident set every minute for `minutes` minutes and prints it, with the
/// triggers applied meanwhile.
pub async fn run(
    env: &TestEnv,
    leader: &Process,
    rules: &[Rule],
    sample: usize,
    minutes: usize,
    concurrency: usize,
) -> anyhow::Result<()> {
    let all: Vec<(&str, &str, i32)> = rules
        .iter()
        .map(Rule::borrowed)
        .chain(RULES.iter().copied())
        .collect();
    let edit = json!({ "spec": { "triggers": { "times": { "rules": rules_json(&all) } } } });
    let api = env.api::<TidalScheduler>();
    stream::iter(0..sample)
        .map(|i| {
            let (api, edit) = (api.clone(), &edit);
            async move {
                api.patch(
                    &object_name(i),
                    &PatchParams::default(),
                    &Patch::Merge(edit),
                )
                .await
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;

    let applied = |result: &str| {
        let series = format!("tidal_scheduler_triggers_total{{result=\"{result}\"");
        summed(leader, &|line: &str| line.starts_with(&series))
    };
    let (succeeded, failed) = (applied("Succeeded"), applied("Failed"));
    let started = Instant::now();
    let pid = leader.pid();
    let mut resident = Vec::with_capacity(minutes + 1);
    for minute in 0..=minutes {
        let at = started + Duration::from_secs(60 * minute as u64);
        tokio::time::sleep_until(at.into()).await;
        resident.push(mib(pid, "VmRSS:"));
    }
    let warm_up = WARM_UP.min(minutes);
    let steady = &resident[warm_up..];
    let (low, high) = steady
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
    println!(
        "- {minutes} min of triggers on {} objects (their level alternating every 30 s, \
         {} instants): {} applied, {} failed",
        grouped(sample as f64),
        grouped((sample * minutes * 2) as f64),
        grouped(applied("Succeeded") - succeeded),
        grouped(applied("Failed") - failed),
    );
    println!(
        "  resident set, MiB, each minute: {}",
        resident
            .iter()
            .map(|r| format!("{r:.1}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "  after minute {warm_up}: {low:.1}–{high:.1} MiB, trend {:+.1} MiB per hour \
         (least squares); peak over the whole run {:.1} MiB",
        60.0 * slope(steady),
        mib(pid, "VmHWM:"),
    );
    Ok(())
}

/// The least-squares slope of `samples` taken one unit apart (0 for fewer than two).
fn slope(samples: &[f64]) -> f64 {
    let n = samples.len() as f64;
    if samples.len() < 2 {
        return 0.0;
    }
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = samples.iter().sum::<f64>() / n;
    let (covariance, variance) = samples
        .iter()
        .enumerate()
        .fold((0.0, 0.0), |(c, v), (x, y)| {
            let dx = x as f64 - mean_x;
            (c + dx * (y - mean_y), v + dx * dx)
        });
    covariance / variance
}
