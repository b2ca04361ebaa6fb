//! Runs a scenario: creates its workload, starts three replicas (local mode) or finds
//! the installed ones, waits for steady state, injects its fault a bounded number of
//! times (or until a time limit), waits for the level to converge, then checks what the
//! API server saw.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{DynamicObject, ListParams, PostParams};
use tidal_harness::fixtures::{
    deployment, deployment_of_pods, install_widget_crd, widget, widget_resource,
};
use tidal_harness::measure::random_below;
use tidal_harness::tide::manifest;
use tidal_scheduler::api::{NoCalendars, TidalScheduler, validate};
use tidal_scheduler::schedule::Tide;

use crate::catch_up::catch_ups;
use crate::check::{Observations, check, holdings};
use crate::cluster::Cluster;
use crate::in_cluster::{InCluster, Installation};
use crate::local::Local;
use crate::observe::Observer;
use crate::report::{Percentiles, Report, problems};
use crate::scenario::{Scenario, Targets, Workload};
use crate::scenarios::{Drill, inject};
use crate::timing::LeaseTiming;

/// How a run is bounded.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Faults per scenario.
    pub faults: usize,
    /// No new fault after this long (the one under way finishes).
    pub duration: Duration,
    /// How its timing bounds are set.
    pub patience: Patience,
    /// Seconds between the workload's fire instants, instead of the first scenario's own
    /// (its objects fire together: a burst of all of them each period).
    pub period: Option<u32>,
    /// Objects of the workload, instead of the first scenario's own.
    pub objects: Option<usize>,
}

/// How a run's timing bounds are set. The invariants — nothing lost, applied twice or
/// early, no zombie write, no skewed leader, convergence reached — are exact either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Patience {
    /// The scenario's bounds from the Lease timing: a drill on a cluster with room to
    /// spare, where a slow takeover or a slow catch-up is itself a finding.
    Strict,
    /// For a machine busy with other work (a laptop, a shared CI runner, the test suite
    /// beside a build): the takeover the run itself observed where it was slower than the
    /// Lease timing allows, and headroom for the scenario's own work (twice its
    /// allowance and 10 s). The tight figures stay in the report's percentiles.
    Loaded,
}

impl Patience {
    /// Extra time a scenario with `allowance` may take beyond its bounds.
    pub fn headroom(self, allowance: Duration) -> Duration {
        match self {
            Patience::Strict => Duration::ZERO,
            Patience::Loaded => allowance * 2 + Duration::from_secs(10),
        }
    }

    /// How long to wait, beyond one period of the workload, for every object's first
    /// trigger before any fault.
    pub fn steady(self) -> Duration {
        match self {
            Patience::Strict => Duration::from_secs(120),
            Patience::Loaded => Duration::from_secs(300),
        }
    }

    /// The takeover the bounds count with: the Lease timing's, or — loaded — the slowest
    /// takeover observed plus a second to apply, if that is later.
    pub fn takeover(self, timing: &LeaseTiming, failovers_ms: &[f64]) -> Duration {
        let nominal = timing.takeover();
        match self {
            Patience::Strict => nominal,
            Patience::Loaded => {
                let slowest = failovers_ms.iter().copied().fold(0.0, f64::max);
                (Duration::from_secs_f64(slowest / 1000.0) + Duration::from_secs(1)).max(nominal)
            }
        }
    }
}

/// Replicas of the controller in every scenario, as the Deployment has.
const REPLICAS: usize = 3;

/// Slack on a loaded machine beyond a bound, before the runner stops waiting.
const SETTLE_SLACK: Duration = Duration::from_secs(30);

/// Where the replicas run.
#[derive(Debug, Clone)]
pub enum Target {
    /// Processes on this process's own control plane.
    Local,
    /// The installed Deployment.
    InCluster(Installation),
}

/// Runs `scenario` in local mode within `limits`, printing progress on stderr.
pub async fn run_local(scenario: Scenario, limits: Limits) -> Result<Report, String> {
    run_mixed(&[scenario], limits, &Target::Local).await
}

/// Runs `scenarios` mixed on one set of replicas (a soak; one scenario: a run of it):
/// each fault is the next scenario's, round robin. The workload is the first one's.
pub async fn run_mixed(
    scenarios: &[Scenario],
    limits: Limits,
    target: &Target,
) -> Result<Report, String> {
    let first = *scenarios.first().ok_or("no scenario")?;
    let mut workload = first.workload();
    if let Some(period) = limits.period {
        workload.period = period;
    }
    if let Some(objects) = limits.objects {
        workload.objects = objects;
    }
    let mut cluster = match target {
        Target::Local => Cluster::Local(Local::new(LeaseTiming::CHAOS, scenarios).await?),
        Target::InCluster(installation) => {
            Cluster::InCluster(InCluster::new(installation.clone()).await?)
        }
    };
    if let Some(unsupported) = scenarios
        .iter()
        .find(|s| !s.modes().contains(&cluster.mode()))
    {
        return Err(format!(
            "{unsupported} does not run in {:?} mode",
            cluster.mode()
        ));
    }
    let timing = cluster.timing();
    if workload.targets == Targets::Widgets {
        install_widget_crd(&cluster.client()).await;
        if let Cluster::InCluster(in_cluster) = &mut cluster {
            in_cluster.allow_widgets().await?;
        }
    }
    let tides = create_workload(&cluster, workload, target).await?;
    let names: Vec<String> = tides.keys().cloned().collect();
    let observer = Observer::start(cluster.client(), cluster.namespace(), cluster.lease());
    if let Cluster::Local(local) = &mut cluster {
        for _ in 0..REPLICAS {
            local.add().await?;
        }
    }
    let started = Timestamp::now();
    // A workload's first trigger may be a whole period away (`--period 120`), and its
    // writes take their burst after that.
    let steady = limits.patience.steady() + Duration::from_secs(workload.period.into());
    if !observer.wait_applied_after(&names, started, steady).await {
        return Err(format!(
            "no steady state within {steady:?}: not every object had a trigger"
        ));
    }
    let from = Timestamp::now();
    // One burst of the workload's writes without a fault: what this cluster needs for
    // it (10,000 objects take an API server tens of seconds) is added to every bound.
    if !observer.wait_applied_after(&names, from, steady).await {
        return Err(format!(
            "no burst without a fault within {steady:?} of the steady state"
        ));
    }
    let burst = observer.burst_after(from);
    log(
        first,
        &format!(
            "steady: {} objects, leader {}; a burst of their writes took {:.1} s",
            names.len(),
            observer.holder(),
            burst.as_secs_f64()
        ),
    );

    let mut faults = Vec::new();
    let begun = Instant::now();
    let mut drill = Drill {
        cluster: &mut cluster,
        observer: &observer,
        timing,
        period: workload.period,
        round: 0,
    };
    for round in 0..limits.faults {
        if begun.elapsed() > limits.duration {
            log(first, &format!("time limit reached after {round} faults"));
            break;
        }
        let scenario = scenarios[round % scenarios.len()];
        drill.round = round;
        tokio::time::sleep(random_below(Duration::from_millis(2500))).await;
        let injected = inject(scenario, &mut drill).await?;
        for fault in &injected {
            log(
                scenario,
                &format!(
                    "fault {}/{}: {} {}{} for {:.1} s; leader now {}",
                    round + 1,
                    limits.faults,
                    fault.kind,
                    fault.target,
                    if fault.leader { " (leader)" } else { "" },
                    fault.end.duration_since(fault.start).as_secs_f64(),
                    observer.holder()
                ),
            );
        }
        // The next fault only once the level is applied again after this one.
        let healed = injected
            .iter()
            .map(|f| f.end)
            .max()
            .unwrap_or_else(Timestamp::now);
        let settle = timing.takeover()
            + burst
            + scenario.allowance()
            + limits.patience.headroom(scenario.allowance())
            + SETTLE_SLACK;
        observer.wait_applied_after(&names, healed, settle).await;
        faults.extend(injected);
    }

    let longest = faults
        .iter()
        .map(|f| Duration::try_from(f.end.duration_since(f.start)).unwrap_or_default())
        .max()
        .unwrap_or_default();
    let allowance = scenarios
        .iter()
        .map(|s| s.allowance())
        .max()
        .unwrap_or_default();
    let headroom = limits.patience.headroom(allowance);
    // Waited for as long as a takeover twice as slow as the Lease timing's would need;
    // judged below against the takeover observed.
    let convergence_wait = timing.takeover() * 2 + burst + allowance + headroom;
    let converged = converge(&cluster, &observer, &tides, workload, convergence_wait).await;
    // Every instant up to convergence must be accounted for (without it, up to now).
    let (converged, until) = match converged {
        Some((took, at)) => (Some(took), at),
        None => (None, Timestamp::now()),
    };
    log(
        first,
        &match converged {
            Some(took) => format!("converged {:.1} s after the last fault", took.as_secs_f64()),
            None => format!("not converged within {convergence_wait:?}"),
        },
    );
    let observed = observer.finish();
    let writes = cluster.writes().transpose()?;
    if let Cluster::InCluster(in_cluster) = &cluster {
        in_cluster.remove_workload().await?;
    }
    let observations = Observations {
        tides,
        seen: observed.seen,
        rewritten: observed.rewritten,
        lease_updates: observed.updates,
        audited: writes.is_some(),
        writes: writes.unwrap_or_default(),
        faults: faults.clone(),
        from,
        until,
    };
    let verdict = check(&observations);
    let takeover = limits.patience.takeover(&timing, &verdict.failover_ms);
    let convergence_bound = takeover + burst + allowance + headroom;
    let lateness_bound = takeover + longest + burst + allowance + headroom;
    let triggers: Vec<(Timestamp, f64)> = observations
        .seen
        .iter()
        .filter(|s| s.entry.schedule_time.0 > from)
        .map(|s| {
            let late = s.observed.duration_since(s.entry.schedule_time.0);
            (s.entry.schedule_time.0, late.as_secs_f64() * 1000.0)
        })
        .collect();
    let catch_ups = catch_ups(
        &faults,
        &observations.lease_updates,
        &triggers,
        observations
            .audited
            .then_some(observations.writes.as_slice()),
    );
    let failures_expected = scenarios.iter().any(|s| s.failures_expected());
    let problems = problems(
        &verdict,
        converged,
        lateness_bound,
        convergence_bound,
        failures_expected,
    );
    Ok(Report {
        name: match scenarios {
            [one] => one.name().to_owned(),
            _ => "soak".to_owned(),
        },
        scenario: first,
        mode: cluster.mode(),
        faults,
        lateness: Percentiles::of(&verdict.lateness_ms),
        failover: Percentiles::of(&verdict.failover_ms),
        catch_ups,
        verdict,
        convergence_ms: converged.map(|d| d.as_secs_f64() * 1000.0),
        burst_ms: burst.as_secs_f64() * 1000.0,
        lateness_bound_ms: lateness_bound.as_secs_f64() * 1000.0,
        convergence_bound_ms: convergence_bound.as_secs_f64() * 1000.0,
        problems,
        holdings: holdings(&observations.lease_updates),
        triggers,
    })
}

/// Progress on stderr.
pub fn log(scenario: Scenario, message: &str) {
    eprintln!(
        "chaos {}: {scenario}: {message}",
        Timestamp::now().strftime("%H:%M:%S%.3f")
    );
}

/// Creates the objects of `workload`, each with a target of its own (which must exist
/// in `Status` mode too; in a cluster, a Deployment of real pods); returns each object's
/// tide.
async fn create_workload(
    cluster: &Cluster,
    workload: Workload,
    target: &Target,
) -> Result<BTreeMap<String, Tide>, String> {
    let period = workload.period;
    let [even, odd] = workload.levels;
    // A period of whole minutes steps the minutes field; a shorter one, the seconds.
    let (even_cron, odd_cron) = if period >= 60 {
        let minutes = period / 60;
        (
            format!("CRON_TZ=UTC 0 0/{} * * * *", 2 * minutes),
            format!("CRON_TZ=UTC 0 {minutes}/{} * * * *", 2 * minutes),
        )
    } else {
        (
            format!("CRON_TZ=UTC 0/{} * * * * *", 2 * period),
            format!("CRON_TZ=UTC {period}/{} * * * * *", 2 * period),
        )
    };
    let rules = [("even", even_cron, even), ("odd", odd_cron, odd)];
    let rules: Vec<(&str, &str, i32)> =
        rules.iter().map(|(n, c, r)| (*n, c.as_str(), *r)).collect();
    let apply = if workload.scale { "Scale" } else { "Status" };
    let client = cluster.client();
    let namespace = cluster.namespace();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &widget_resource());
    let objects: Api<TidalScheduler> = Api::namespaced(client, namespace);
    let created: Vec<Result<(String, Tide), String>> = stream::iter(0..workload.objects)
        .map(|i| {
            let (rules, deployments, widgets, objects) =
                (rules.clone(), &deployments, &widgets, &objects);
            async move {
                let name = format!("web-{i:04}");
                let (api_version, kind) = match workload.targets {
                    Targets::Deployments => {
                        let target_deployment = match target {
                            Target::Local => deployment(&name),
                            Target::InCluster(installation) => {
                                deployment_of_pods(&name, &installation.workload_image, 1)
                            }
                        };
                        deployments
                            .create(&PostParams::default(), &target_deployment)
                            .await
                            .map_err(|e| format!("create Deployment {name}: {e}"))?;
                        ("apps/v1", "Deployment")
                    }
                    Targets::Widgets => {
                        widgets
                            .create(&PostParams::default(), &widget(&name, 1))
                            .await
                            .map_err(|e| format!("create Widget {name}: {e}"))?;
                        ("example.com/v1", "Widget")
                    }
                };
                let mut object = manifest(&name, api_version, kind, &name, apply, &rules);
                object["spec"]["historyLimit"] = 100.into();
                let object: TidalScheduler =
                    serde_json::from_value(object).map_err(|e| e.to_string())?;
                let created = objects
                    .create(&PostParams::default(), &object)
                    .await
                    .map_err(|e| format!("create TidalScheduler {name}: {e}"))?;
                let tide = validate(&created, &NoCalendars, Timestamp::now())
                    .map_err(|e| format!("{name}: {e:?}"))?
                    .tide;
                Ok((name, tide))
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    created.into_iter().collect()
}

/// Each target's `spec.replicas` by name, `None` if it cannot be listed.
async fn target_replicas(cluster: &Cluster, targets: Targets) -> Option<BTreeMap<String, i64>> {
    let (client, namespace) = (cluster.client(), cluster.namespace());
    let params = ListParams::default();
    let replicas: Vec<(String, Option<i64>)> = match targets {
        Targets::Deployments => Api::<Deployment>::namespaced(client, namespace)
            .list(&params)
            .await
            .ok()?
            .items
            .into_iter()
            .map(|d| {
                let replicas = d.spec.as_ref().and_then(|s| s.replicas).map(i64::from);
                (d.metadata.name.unwrap_or_default(), replicas)
            })
            .collect(),
        Targets::Widgets => {
            Api::<DynamicObject>::namespaced_with(client, namespace, &widget_resource())
                .list(&params)
                .await
                .ok()?
                .items
                .into_iter()
                .map(|w| {
                    let replicas = w.data["spec"]["replicas"].as_i64();
                    (w.metadata.name.unwrap_or_default(), replicas)
                })
                .collect()
        }
    };
    Some(
        replicas
            .into_iter()
            .filter_map(|(name, replicas)| Some((name, replicas?)))
            .collect(),
    )
}

/// Waits until every object has an entry for the latest instant of its rules and its
/// `desiredReplicas` (and in `Scale` mode its target's replicas) is that level; how
/// long that took and the moment that was judged at, or `None` after `bound`.
async fn converge(
    cluster: &Cluster,
    observer: &Observer,
    tides: &BTreeMap<String, Tide>,
    workload: Workload,
    bound: Duration,
) -> Option<(Duration, Timestamp)> {
    let start = Instant::now();
    while start.elapsed() < bound {
        let now = Timestamp::now();
        let desired = observer.desired();
        let mut level_ok = tides.iter().all(|(name, tide)| {
            let level = tide.level_at(now);
            level
                .as_ref()
                .is_some_and(|level| observer.has_entry(name, level.schedule_time))
                && desired.get(name).copied().flatten() == level.map(|t| t.replicas)
        });
        if level_ok && workload.scale {
            level_ok = target_replicas(cluster, workload.targets)
                .await
                .is_some_and(|replicas| {
                    tides.iter().all(|(name, tide)| {
                        let level = tide.level_at(now).map(|t| i64::from(t.replicas));
                        replicas.get(name).copied() == level
                    })
                });
        }
        if level_ok {
            return Some((start.elapsed(), now));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_bounds_come_from_the_lease_timing_alone() {
        let timing = LeaseTiming::CHAOS;
        let slow = [9000.0];
        assert_eq!(Patience::Strict.takeover(&timing, &slow), timing.takeover());
        assert_eq!(
            Patience::Strict.headroom(Duration::from_secs(15)),
            Duration::ZERO
        );
    }

    #[test]
    fn loaded_bounds_stretch_to_the_takeover_observed_never_below_the_timing() {
        let timing = LeaseTiming::CHAOS;
        assert_eq!(
            Patience::Loaded.takeover(&timing, &[5500.0, 3000.0]),
            Duration::from_millis(6500)
        );
        assert_eq!(
            Patience::Loaded.takeover(&timing, &[1200.0]),
            timing.takeover()
        );
        assert_eq!(Patience::Loaded.takeover(&timing, &[]), timing.takeover());
        assert_eq!(
            Patience::Loaded.headroom(Duration::from_secs(1)),
            Duration::from_secs(12)
        );
    }
}
