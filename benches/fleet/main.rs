//! One leader with a whole fleet: N TidalSchedulers of 5 rules (default 100,000, none due
//! during the bench), on the local control plane.
//!
//! 1. The bench's parallel client creates them (64 at a time) — how long the API server
//!    needs — and a first replica, alone, plans them all (each one's first status). The
//!    bench then completes every object's history to 10 entries, as after ten days of
//!    triggers: the replicas below cache objects of their size in production.
//! 2. A fresh replica starts while the first one leads, so it lists everything as a
//!    standby; the first gets SIGTERM and hands over. For the new leader: from the Lease
//!    changing hands to every object planned in its term (its successful reconciles
//!    reaching N); its resident set then; its CPU over a minute with no instant due.
//! 3. A cold start: both stopped, one replica started alone — from its start, and from
//!    its taking the Lease, to every object planned.
//! 4. A soak: a sample of the objects fires every 30 s for an hour while the rest waits;
//!    the leader's resident set each minute.
//!
//! Run: `cargo bench --bench fleet` (numbers on stdout; docs/performance.md keeps them).
//! `TIDAL_BENCH_FLEET_OBJECTS=N` (default 100,000), `TIDAL_BENCH_FLEET_HISTORY=N` history
//! entries per object (default 10; 1 leaves the first plan's), `TIDAL_BENCH_IDLE_SECONDS=N`
//! (default 60), `TIDAL_BENCH_SOAK_OBJECTS=N` (default 1,000),
//! `TIDAL_BENCH_SOAK_MINUTES=N` (default 60; 0 skips the soak).

mod history;
mod soak;

use tidal_harness as common;

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use jiff::Timestamp;
use kube::api::{ListParams, PostParams};
use tidal_scheduler::api::TidalScheduler;

use common::api_requests::Requests;
use common::bench_options::parsed_or;
use common::cluster::TestEnv;
use common::fixtures::deployment;
use common::measure::{cpu_seconds, grouped, proc_status_mib, run_heading};
use common::process::Process;
use common::replicas::{http_get, lease_state, logged_metrics_address};
use common::tide::{manifest, start_replica};
use common::wait::{eventually_every, eventually_within};

/// Creations in flight at once (the controller's concurrency too).
const CONCURRENCY: usize = 64;

/// client-go's Lease timing, and no per-object series (100,000 of each would be most of
/// the process's memory and of every scrape).
const FLAGS: [&str; 9] = [
    "--lease-duration",
    "15s",
    "--renew-deadline",
    "10s",
    "--retry-period",
    "2s",
    "--per-object-metrics=false",
    "--concurrency",
    "64",
];

/// Longest the bench waits for any one step.
const LIMIT: Duration = Duration::from_secs(1800);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let objects: usize =
        parsed_or("TIDAL_BENCH_FLEET_OBJECTS", 100_000).map_err(anyhow::Error::msg)?;
    let entries: usize = parsed_or("TIDAL_BENCH_FLEET_HISTORY", 10).map_err(anyhow::Error::msg)?;
    let idle: u64 = parsed_or("TIDAL_BENCH_IDLE_SECONDS", 60).map_err(anyhow::Error::msg)?;
    let sample: usize = parsed_or("TIDAL_BENCH_SOAK_OBJECTS", 1000).map_err(anyhow::Error::msg)?;
    let minutes: usize = parsed_or("TIDAL_BENCH_SOAK_MINUTES", 60).map_err(anyhow::Error::msg)?;
    let env = TestEnv::new().await;
    println!(
        "{}\n\nfleet of {} objects of 5 rules",
        run_heading(),
        grouped(objects as f64)
    );

    let rules = daily_rules()?;
    let started = Instant::now();
    create_fleet(&env, objects, &rules).await?;
    println!(
        "- created by the bench's client, {CONCURRENCY} at a time: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let mut first = start_replica(&env, "first", &FLAGS);
    let planned = wait_active(&first, objects, started).await;
    println!(
        "- planned by a first replica, alone (each object's first status write, a catch-up \
         of its latest rule, in its watch cache): {:.0} s after its start",
        planned.as_secs_f64()
    );
    all_ready(&env).await?;
    let started = Instant::now();
    let patched = history::fill(&env, &rules, entries, CONCURRENCY).await?;
    println!(
        "- histories completed to {entries} entries by the bench's client ({} objects): {:.0} s",
        grouped(patched as f64),
        started.elapsed().as_secs_f64()
    );

    let mut second = start_replica(&env, "second", &FLAGS);
    eventually_within(LIMIT, "the standby's cache listed", || async {
        ready(&second).then_some(()).ok_or_else(String::new)
    })
    .await;
    first.signal("TERM");
    let handed = Instant::now();
    wait_holder(&env, "second").await;
    let took = handed.elapsed();
    let before = Requests::of(&second);
    let planned = wait_planned(&second, objects, handed).await - took;
    println!(
        "- a warm standby taking over (SIGTERM of the leader): the Lease changed hands \
         after {:.1} s, every object planned {:.1} s after that; requests per object: {}",
        took.as_secs_f64(),
        planned.as_secs_f64(),
        Requests::of(&second).per_trigger_since(&before, objects),
    );
    let pid = second.pid();
    println!(
        "- its resident set: {:.1} MiB (peak {:.1} MiB)",
        mib(pid, "VmRSS:"),
        mib(pid, "VmHWM:")
    );
    let before = cpu_seconds(pid).map_err(anyhow::Error::msg)?;
    tokio::time::sleep(Duration::from_secs(idle)).await;
    let spent = cpu_seconds(pid).map_err(anyhow::Error::msg)? - before;
    println!(
        "- idle (no instant due) for {idle} s: {:.2} % of a core; resident set then {:.1} MiB",
        100.0 * spent / idle as f64,
        mib(pid, "VmRSS:"),
    );

    second.signal("TERM");
    first.wait(LIMIT);
    second.wait(LIMIT);
    let started = Instant::now();
    let cold = start_replica(&env, "cold", &FLAGS);
    wait_holder(&env, "cold").await;
    let leading = started.elapsed();
    let planned = wait_planned(&cold, objects, started).await;
    println!(
        "- a cold start (nobody else running): the Lease {:.1} s after its start, every \
         object planned {:.1} s after its start ({:.1} s after the Lease); resident set \
         {:.1} MiB (peak {:.1} MiB); requests per object: {}",
        leading.as_secs_f64(),
        planned.as_secs_f64(),
        (planned - leading).as_secs_f64(),
        mib(cold.pid(), "VmRSS:"),
        mib(cold.pid(), "VmHWM:"),
        Requests::of(&cold).per_trigger_since(&Requests::default(), objects),
    );
    if minutes > 0 {
        soak::run(
            &env,
            &cold,
            &rules,
            sample.min(objects),
            minutes,
            CONCURRENCY,
        )
        .await?;
    }
    Ok(())
}

/// One of the fleet's daily rules.
struct Rule {
    name: String,
    /// Its hour of the day, UTC.
    hour: i8,
    cron: String,
    replicas: i32,
}

impl Rule {
    /// `(name, cron, replicas)`, as the harness's manifests take rules.
    fn borrowed(&self) -> (&str, &str, i32) {
        (&self.name, &self.cron, self.replicas)
    }
}

/// The fleet's 5 rules: daily, 6–10 hours from now (none due during the bench).
fn daily_rules() -> anyhow::Result<Vec<Rule>> {
    let hour: i8 = Timestamp::now().strftime("%H").to_string().parse()?;
    Ok((0..5)
        .map(|i| {
            let hour = (hour + 6 + i) % 24;
            Rule {
                name: format!("rule-{i}"),
                hour,
                cron: format!("CRON_TZ=UTC 0 0 {hour} * * *"),
                replicas: 1 + i32::from(i),
            }
        })
        .collect())
}

/// The name of object `i` of the fleet.
fn object_name(i: usize) -> String {
    format!("tide-{i:06}")
}

fn mib(pid: u32, field: &str) -> f64 {
    proc_status_mib(&pid.to_string(), field)
}

/// Waits until `holder` holds the Lease (polled often: the moment matters).
async fn wait_holder(env: &TestEnv, holder: &str) {
    eventually_every(
        Duration::from_millis(50),
        LIMIT,
        "the Lease's holder",
        || async {
            let (held, _) = lease_state(env).await;
            (held == holder).then_some(()).ok_or(held)
        },
    )
    .await;
}

/// Creates `objects` objects of `rules`, all in `Status` mode for the Deployment `web`
/// (created first: a missing target would be a fleet of failing objects, each checked
/// again with backoff).
async fn create_fleet(env: &TestEnv, objects: usize, rules: &[Rule]) -> anyhow::Result<()> {
    env.api()
        .create(&PostParams::default(), &deployment("web"))
        .await?;
    let borrowed: Vec<(&str, &str, i32)> = rules.iter().map(Rule::borrowed).collect();
    let api = env.api::<TidalScheduler>();
    let results: Vec<anyhow::Result<()>> = stream::iter(0..objects)
        .map(|i| {
            let manifest = manifest(
                &object_name(i),
                "apps/v1",
                "Deployment",
                "web",
                "Status",
                &borrowed,
            );
            let api = api.clone();
            async move {
                let object: TidalScheduler = serde_json::from_value(manifest)?;
                api.create(&PostParams::default(), &object).await?;
                Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Fails unless the first page of objects is `Ready` (a level in effect, no problem):
/// the bench measures a healthy fleet.
async fn all_ready(env: &TestEnv) -> anyhow::Result<()> {
    let page = env
        .api::<TidalScheduler>()
        .list(&ListParams::default().limit(500))
        .await?;
    for object in &page.items {
        let ready = object.status.as_ref().and_then(|s| s.ready());
        if ready.is_none_or(|c| c.status != "True") {
            anyhow::bail!(
                "{} is not Ready: {:?}",
                object.metadata.name.as_deref().unwrap_or_default(),
                ready
            );
        }
    }
    Ok(())
}

/// Whether `replica` is ready (`/readyz`: every watch cache listed).
fn ready(replica: &Process) -> bool {
    logged_metrics_address(replica).is_some() && http_get(replica, "/readyz").0 == 200
}

/// Waits until `replica`'s cache shows `objects` objects `Ready` with a level in effect
/// (its `tidal_scheduler_objects{reason="TriggerActive"}`); how long since `since`. A
/// count of reconciles would not do here: each status write comes back through the watch
/// as one more reconcile.
async fn wait_active(replica: &Process, objects: usize, since: Instant) -> Duration {
    let series = "tidal_scheduler_objects{reason=\"TriggerActive\"} ";
    wait_count(replica, objects, since, Duration::from_secs(1), |line| {
        line.starts_with(series)
    })
    .await
}

/// Waits until `replica` has reconciled `objects` objects successfully — every object once
/// when their status is already current, as after a first replica planned them: nothing
/// is written, so no reconcile comes back through the watch (the requests printed beside
/// show it); how long since `since`.
async fn wait_planned(replica: &Process, objects: usize, since: Instant) -> Duration {
    wait_count(
        replica,
        objects,
        since,
        Duration::from_millis(200),
        |line| {
            line.starts_with("tidal_scheduler_reconcile_total{")
                && line.contains("result=\"success\"")
        },
    )
    .await
}

/// Waits, polling every `every`, until the metric samples of `replica` that `counted`
/// keeps sum to `objects`; how long since `since`.
async fn wait_count(
    replica: &Process,
    objects: usize,
    since: Instant,
    every: Duration,
    counted: impl Fn(&str) -> bool,
) -> Duration {
    let what = format!("{} planning {objects} objects", replica.name());
    eventually_every(every, LIMIT, &what, || async {
        let done = summed(replica, &counted);
        (done >= objects as f64)
            .then(|| since.elapsed())
            .ok_or_else(|| format!("{done} so far"))
    })
    .await
}

/// The sum of the metric samples `replica` exports now whose line `counted` keeps.
fn summed(replica: &Process, counted: &impl Fn(&str) -> bool) -> f64 {
    if logged_metrics_address(replica).is_none() {
        return 0.0;
    }
    http_get(replica, "/metrics")
        .1
        .lines()
        .filter(|line| counted(line))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
