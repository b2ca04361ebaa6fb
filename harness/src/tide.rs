//! Helpers for the controller's integration tests: run the controller on the test's
//! namespace, create TidalSchedulers, wait (on watches) for their status, read Events,
//! and compute fire instants.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tidal_scheduler::api::{HistoryEntry, TidalScheduler, TidalSchedulerStatus};
use tidal_scheduler::schedule::{Tide, Trigger};

use super::cluster::TestEnv;
use super::fixtures::object;
use super::process::Process;
use super::wait::{eventually, wait_for};

/// Lease timing of test controllers: short, so a restart after SIGKILL waits only a few
/// seconds for the lease to expire, with room for a slow API server under test load.
pub const TEST_LEASE: [&str; 6] = [
    "--lease-duration",
    "6s",
    "--renew-deadline",
    "4s",
    "--retry-period",
    "1s",
];

/// Starts `tidal-scheduler run` watching only the test's namespace, with JSON logs, as
/// replica `name` campaigning for a Lease in that namespace.
pub fn start_controller(env: &TestEnv, name: &str) -> Process {
    start_replica(env, name, &TEST_LEASE)
}

/// Like [`start_controller`], with the given Lease timing flags.
pub fn start_replica(env: &TestEnv, name: &str, timing: &[&str]) -> Process {
    start_replica_via(env, name, timing, env.control_plane().kubeconfig())
}

/// Like [`start_replica`], reaching the API server through `kubeconfig` (a proxy).
pub fn start_replica_via(
    env: &TestEnv,
    name: &str,
    timing: &[&str],
    kubeconfig: &std::path::Path,
) -> Process {
    start_replica_env(env, name, timing, kubeconfig, &[])
}

/// Like [`start_replica_via`], with extra environment variables (e.g. libfaketime's).
pub fn start_replica_env(
    env: &TestEnv,
    name: &str,
    timing: &[&str],
    kubeconfig: &std::path::Path,
    vars: &[(&str, &str)],
) -> Process {
    let mut args = vec![
        "run",
        "--namespace",
        &env.namespace,
        "--log-format",
        "json",
        "--lease-namespace",
        &env.namespace,
        "--identity",
        name,
        "--metrics-address",
        "127.0.0.1:0",
    ];
    args.extend(timing);
    env.run_binary_with_env(name, &args, kubeconfig, vars)
}

/// Creates a TidalScheduler from JSON in the test's namespace.
pub async fn create(env: &TestEnv, manifest: Value) -> TidalScheduler {
    let typed: TidalScheduler =
        serde_json::from_value(serde_json::to_value(object(manifest)).expect("JSON"))
            .expect("a TidalScheduler manifest");
    env.api::<TidalScheduler>()
        .create(&PostParams::default(), &typed)
        .await
        .unwrap_or_else(|e| panic!("create TidalScheduler {}: {e}", typed.name_any()))
}

/// A TidalScheduler manifest: `rules` as `(name, cron, replicas)`, target `kind/name`.
pub fn manifest(
    name: &str,
    api_version: &str,
    kind: &str,
    target: &str,
    apply: &str,
    rules: &[(&str, &str, i32)],
) -> Value {
    let rules = rules_json(rules);
    serde_json::json!({
        "apiVersion": "scheduling.tidal.io/v1alpha1",
        "kind": "TidalScheduler",
        "metadata": {
            "name": name,
            "labels": {
                "elasticscaler.io/name": target,
                "elasticscaler.io/namespace": "test",
            },
        },
        "spec": {
            "targetRef": { "apiVersion": api_version, "kind": kind, "name": target },
            "apply": apply,
            "triggers": { "times": { "rules": rules } },
        },
    })
}

/// `rules` as `(name, cron, replicas)`, as the spec's `triggers.times.rules` holds them.
pub fn rules_json(rules: &[(&str, &str, i32)]) -> Vec<Value> {
    rules
        .iter()
        .map(|(name, cron, replicas)| json!({ "name": name, "cron": cron, "replicas": replicas }))
        .collect()
}

/// Replaces the rules of `name` (merge patch) and waits until the controller saw the edit.
pub async fn set_rules(env: &TestEnv, name: &str, rules: &[(&str, &str, i32)]) {
    let edit = json!({ "spec": { "triggers": { "times": { "rules": rules_json(rules) } } } });
    let edited = env
        .api::<TidalScheduler>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("edit the rules");
    let generation = edited.metadata.generation;
    wait_status(env, name, "the edit reconciled", move |s| {
        s.observed_generation == generation
    })
    .await;
}

/// Waits until the status of `name` satisfies `test`.
pub async fn wait_status(
    env: &TestEnv,
    name: &str,
    what: &str,
    test: impl Fn(&TidalSchedulerStatus) -> bool,
) -> TidalScheduler {
    wait_for(
        &env.api::<TidalScheduler>(),
        name,
        what,
        move |object: Option<&TidalScheduler>| {
            object.and_then(|o| o.status.as_ref()).is_some_and(&test)
        },
    )
    .await
}

/// The status of a TidalScheduler, which must have one.
pub fn status(object: &TidalScheduler) -> &TidalSchedulerStatus {
    object.status.as_ref().expect("a status")
}

/// `(status, reason, message)` of the Ready condition.
pub fn ready(status: &TidalSchedulerStatus) -> (String, String, String) {
    let ready = status.ready().expect("a Ready condition");
    (
        ready.status.clone(),
        ready.reason.clone(),
        ready.message.clone(),
    )
}

/// Whether the Ready condition has `reason`.
pub fn ready_reason_is(status: &TidalSchedulerStatus, reason: &str) -> bool {
    status.ready().is_some_and(|c| c.reason == reason)
}

/// The history entry of `(rule, at)`, if recorded.
pub fn entry<'a>(
    status: &'a TidalSchedulerStatus,
    rule: &str,
    at: Timestamp,
) -> Option<&'a HistoryEntry> {
    status
        .history
        .iter()
        .find(|h| h.rule == rule && h.schedule_time.0 == at)
}

/// Panics if a `(rule, scheduleTime)` appears twice in history.
pub fn assert_no_duplicate_history(status: &TidalSchedulerStatus) {
    let mut seen = std::collections::HashSet::new();
    for h in &status.history {
        assert!(
            seen.insert((h.rule.clone(), h.schedule_time.0)),
            "({}, {}) recorded twice: {:#?}",
            h.rule,
            h.schedule_time.0,
            status.history
        );
    }
}

/// Events about the object `name`, oldest first.
pub async fn events_about(env: &TestEnv, name: &str) -> Vec<Event> {
    let events: Api<Event> = env.api();
    let mut about: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect();
    about.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    about
}

/// Polls until an Event about `name` with `reason` (and a note containing `note`) exists.
pub async fn wait_event(env: &TestEnv, name: &str, reason: &str, note: &str) -> Event {
    let what = format!("{reason} event about {name} containing {note:?}");
    eventually(&what, || async {
        let events = events_about(env, name).await;
        let wanted = |e: &Event| {
            e.reason.as_deref() == Some(reason)
                && e.note.as_deref().unwrap_or_default().contains(note)
        };
        match events.iter().find(|e| wanted(e)) {
            Some(event) => Ok(event.clone()),
            None => {
                let seen: Vec<_> = events.iter().map(|e| (&e.reason, &e.note)).collect();
                Err(format!("events: {seen:#?}"))
            }
        }
    })
    .await
}

/// A cron expression (UTC) firing once a year, exactly at `at` (whole seconds).
pub fn once_at(at: Timestamp) -> String {
    let t = at.to_zoned(jiff::tz::TimeZone::UTC);
    format!(
        "CRON_TZ=UTC {} {} {} {} {} *",
        t.second(),
        t.minute(),
        t.hour(),
        t.day(),
        t.month()
    )
}

/// The first whole second at least `margin` from now.
pub fn second_after(margin: Duration) -> Timestamp {
    let earliest = Timestamp::now() + SignedDuration::try_from(margin).expect("small margin");
    let whole = Timestamp::from_second(earliest.as_second()).expect("in range");
    if whole < earliest {
        whole + SignedDuration::from_secs(1)
    } else {
        whole
    }
}

/// A daily cron whose instants fall 12 hours from now's time of day: a base level that a
/// new object catches up with at once and that is never due while a test or bench runs
/// (a midnight base crossed by a run added a trigger, or superseded the run's own).
pub fn daily_far_from_now() -> String {
    let far = (Timestamp::now() + SignedDuration::from_hours(12)).to_zoned(jiff::tz::TimeZone::UTC);
    format!(
        "CRON_TZ=UTC {} {} {} * * *",
        far.second(),
        far.minute(),
        far.hour()
    )
}

/// Sleeps until the wall clock has passed `at` — for scenarios that need time to pass
/// (missed instants), not to wait for the controller.
pub async fn sleep_past(at: Timestamp) {
    let wait = at.duration_since(Timestamp::now());
    if wait > SignedDuration::ZERO {
        tokio::time::sleep(wait.unsigned_abs() + Duration::from_millis(50)).await;
    }
}

/// What [`restart_after_missed_instants`] leaves: the object as it stood while nobody
/// acted, the restarted controller, the object once it caught up, and the instants missed.
pub struct Restarted {
    /// The object once it had an on-time trigger, before the kill.
    pub on_time: TidalScheduler,
    /// The object after the kill, before the restart.
    pub stopped: TidalScheduler,
    /// The controller started after the missed instants (`controller-2`).
    pub controller: Process,
    /// The object once its watermark passed the first missed instant.
    pub caught_up: TidalScheduler,
    /// The first two triggers that came due with nobody acting.
    pub missed: Vec<Trigger>,
}

/// Restart catch-up: waits for an on-time trigger of the object `name` (whose rules are
/// `tide`) under `controller`, SIGKILLs it, lets two triggers pass with nobody acting,
/// starts `controller-2` and waits until it has caught up.
pub async fn restart_after_missed_instants(
    env: &TestEnv,
    mut controller: Process,
    name: &str,
    tide: &Tide,
) -> Restarted {
    let on_time = wait_status(env, name, "an on-time trigger", |s| {
        s.history.iter().any(|h| !h.catch_up)
    })
    .await;
    controller.signal("KILL");
    controller.wait(Duration::from_secs(10));
    let missed = tide.triggers_between(Timestamp::now(), Timestamp::MAX, 2);
    sleep_past(missed[1].schedule_time).await;
    let stopped = env.api::<TidalScheduler>().get(name).await.expect("get");
    let controller = start_controller(env, "controller-2");
    let first_missed = missed[0].schedule_time;
    let caught_up = wait_status(env, name, "a catch-up", move |s| {
        s.last_trigger_time
            .as_ref()
            .is_some_and(|t| t.0 > first_missed)
    })
    .await;
    Restarted {
        on_time,
        stopped,
        controller,
        caught_up,
        missed,
    }
}

/// Polls `process`'s log until it contains `message`; fails the test after [`PATIENCE`].
pub async fn wait_logged(process: &Process, message: &str) {
    let what = format!("{message:?} logged by {}", process.name());
    eventually(&what, || async {
        match process.log() {
            log if log.contains(message) => Ok(()),
            log => Err(format!("its log:\n{log}")),
        }
    })
    .await;
}

/// Checks that `history` accounts for every fire instant of `tide` between its oldest and
/// newest entries exactly once: each entry's `superseded` counts the instants since the
/// previous entry, so none was lost and none applied twice.
pub fn assert_every_instant_accounted(tide: &Tide, history: &[HistoryEntry]) {
    let mut entries: Vec<&HistoryEntry> = history.iter().collect();
    entries.sort_by_key(|h| h.schedule_time.0);
    for pair in entries.windows(2) {
        let (previous, entry) = (pair[0], pair[1]);
        assert!(
            previous.schedule_time.0 < entry.schedule_time.0,
            "two entries at {}: {history:#?}",
            entry.schedule_time.0
        );
        let missed = tide.superseded_between(previous.schedule_time.0, entry.schedule_time.0);
        assert_eq!(
            entry.superseded, missed as i64,
            "{} at {} supersedes {} instants, but {missed} passed since {}: {history:#?}",
            entry.rule, entry.schedule_time.0, entry.superseded, previous.schedule_time.0
        );
        assert!(
            entry.catch_up || missed == 0,
            "an on-time entry after missed instants: {entry:#?}"
        );
    }
}
