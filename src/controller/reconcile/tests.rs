//! Whole reconciles against the in-memory cluster: what each writes, in milliseconds.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use tokio::sync::watch;

use super::fake::{Accepted, FakeCluster};
use super::*;
use crate::api::{ConditionReason, READY, TriggerResult};
use crate::clock::Clock;
use crate::controller::cache::consistency::Consistency;
use crate::controller::cache::slim_scheduler;
use crate::controller::in_flight::InFlight;
use crate::controller::plan::Facts;
use crate::controller::publish::metrics::ControllerMetrics;
use crate::controller::publish::trace::TriggerTracer;
use crate::election::{Term, WriteGate};
use crate::schedule::{Cron, Rule, Tide};

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// A wall clock the test sets.
#[derive(Default)]
struct ManualClock(Mutex<Timestamp>);

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

/// A controller on the fake cluster, leading in terms the test starts.
struct Harness {
    ctx: Arc<Context<FakeCluster>>,
    clock: Arc<ManualClock>,
    terms: watch::Sender<Option<Term>>,
}

impl Harness {
    fn new() -> Harness {
        Harness::with_tracer(TriggerTracer::off())
    }

    /// Deployment `web` at 1 replica and TidalScheduler [`web`] in mode `apply`.
    fn with_web(apply: &str) -> Harness {
        let harness = Harness::new();
        harness.cluster().deployment("web", 1);
        harness.cluster().create(web(apply));
        harness
    }

    fn with_tracer(tracer: TriggerTracer) -> Harness {
        let clock = Arc::new(ManualClock::default());
        let (terms, gate) = watch::channel(None);
        let metrics = ControllerMetrics::default();
        let ctx = Context::new(
            FakeCluster::default(),
            clock.clone(),
            WriteGate::leased(gate),
            InFlight::default(),
            Consistency::new(&[None], &metrics),
            metrics,
        )
        .with_tracer(tracer);
        let harness = Harness {
            ctx: Arc::new(ctx),
            clock,
            terms,
        };
        harness.new_term(1);
        harness
    }

    /// Starts leadership term `number` (its fence is the number too).
    fn new_term(&self, number: u64) {
        self.terms.send_replace(Some(Term {
            number,
            valid_until: tokio::time::Instant::now() + Duration::from_secs(3600),
            fence: number,
        }));
    }

    fn cluster(&self) -> &FakeCluster {
        &self.ctx.cluster
    }

    /// Reconciles the stored `web` at `now`.
    async fn reconcile_at(&self, now: &str) -> Result<Action, Error> {
        self.reconcile_copy(self.cluster().object("web"), now).await
    }

    /// Reconciles `copy` (as a cache might hold it) at `now`.
    async fn reconcile_copy(&self, copy: TidalScheduler, now: &str) -> Result<Action, Error> {
        *self.clock.0.lock().unwrap() = at(now);
        reconcile(Arc::new(copy), self.ctx.clone()).await
    }

    fn levels(&self) -> Vec<(i32, bool)> {
        self.cluster()
            .take_writes()
            .into_iter()
            .filter_map(|written| match written {
                Accepted::Level {
                    replicas, claim, ..
                } => Some((replicas, claim)),
                _ => None,
            })
            .collect()
    }
}

/// `web`, created at midnight, scaling Deployment `web` to 3 at :10 and to 5 at :20 of
/// every minute (UTC).
fn web(apply: &str) -> TidalScheduler {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.tidal.io/v1alpha1",
        "kind": "TidalScheduler",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" },
            "apply": apply,
            "triggers": { "times": { "rules": [
                { "name": "low", "cron": "TZ=UTC 10 * * * * *", "replicas": 3 },
                { "name": "high", "cron": "TZ=UTC 20 * * * * *", "replicas": 5 },
            ] } },
        },
    }))
    .expect("a valid TidalScheduler")
}

fn status(harness: &Harness) -> TidalSchedulerStatus {
    harness.cluster().object("web").status.unwrap_or_default()
}

fn ready_reason(status: &TidalSchedulerStatus) -> String {
    let ready = status.conditions.iter().find(|c| c.type_ == READY);
    ready.map(|c| c.reason.clone()).unwrap_or_default()
}

#[tokio::test]
async fn a_terms_first_write_claims_the_target_and_later_ones_do_not() {
    let harness = Harness::with_web("Scale");
    harness
        .reconcile_at("2026-01-01T00:00:10.001Z")
        .await
        .unwrap();
    assert_eq!(
        harness.levels(),
        [(3, true)],
        "the term's first write claims"
    );
    harness
        .reconcile_at("2026-01-01T00:00:20.001Z")
        .await
        .unwrap();
    assert_eq!(
        harness.levels(),
        [(5, false)],
        "a later one is a plain patch"
    );
    harness.reconcile_at("2026-01-01T00:00:25Z").await.unwrap();
    assert_eq!(
        harness.levels(),
        [],
        "the level written this term is not written again"
    );
    harness.new_term(2);
    harness.reconcile_at("2026-01-01T00:00:30Z").await.unwrap();
    assert_eq!(
        harness.levels(),
        [(5, true)],
        "a new term claims the target again, even at an unchanged level"
    );
    assert_eq!(harness.cluster().replicas("web"), Some(5));
}

#[tokio::test]
async fn a_failed_status_write_keeps_its_trace_and_retry_memory() {
    use opentelemetry::trace::TracerProvider as _;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let harness = Harness::with_tracer(TriggerTracer::new(Some(provider.tracer("test"))));
    harness.cluster().deployment("web", 1);
    let object = harness.cluster().create(web("Scale"));
    let key = ObjectKey::of(&object);
    harness.cluster().fail_status_writes(1);

    let failed = harness.reconcile_at("2026-01-01T00:00:10.001Z").await;
    assert!(
        matches!(failed, Err(Error::WriteStatus { .. })),
        "{failed:?}"
    );
    let action = error_policy(Arc::new(object), &failed.unwrap_err(), harness.ctx.clone());
    assert_eq!(action, Action::requeue(Duration::from_secs(1)));
    let memory = harness.ctx.recall(&key);
    assert_eq!(memory.failures, 1, "the retry backs off");
    let trace_id = memory.trace.as_ref().and_then(TriggerTrace::trace_id);
    assert!(
        trace_id.is_some(),
        "the trigger's trace is kept for the retry"
    );
    assert_eq!(status(&harness).history, [], "nothing recorded yet");

    harness.reconcile_at("2026-01-01T00:00:11Z").await.unwrap();
    let history = status(&harness).history;
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(
        history[0].trace_id, trace_id,
        "the retry continues the same trace"
    );
    assert_eq!(history[0].result, TriggerResult::Succeeded);
    let memory = harness.ctx.recall(&key);
    assert!(memory.trace.is_none() && memory.failures == 0, "{memory:?}");
    // What the target stage learned is lost with the failed reconcile: the retry claims
    // again (one apply more, never one less).
    assert_eq!(harness.levels(), [(3, true), (3, true)]);
}

#[tokio::test]
async fn a_reconcile_on_a_cache_behind_its_own_write_is_skipped() {
    let harness = Harness::new();
    harness.cluster().deployment("web", 1);
    let before = harness.cluster().create(web("Scale"));
    harness
        .reconcile_at("2026-01-01T00:00:10.001Z")
        .await
        .unwrap();
    harness.cluster().take_writes();

    let skipped = harness
        .reconcile_copy(before, "2026-01-01T00:00:20.001Z")
        .await
        .unwrap();
    assert_eq!(skipped, Action::requeue(STALE_RETRY));
    assert_eq!(
        harness.cluster().take_writes(),
        [],
        "a stale copy writes nothing"
    );

    harness
        .reconcile_at("2026-01-01T00:00:20.001Z")
        .await
        .unwrap();
    let history = status(&harness).history;
    assert_eq!(history.len(), 2, "each instant recorded once: {history:?}");
}

#[tokio::test]
async fn a_cache_holding_only_the_newest_history_entry_keeps_the_stored_history_whole() {
    let harness = Harness::new();
    harness.cluster().deployment("web", 1);
    let mut object = web("Scale");
    object.spec.history_limit = 3;
    harness.cluster().create(object);
    let instants = ["00:00:10", "00:00:20", "00:01:10", "00:01:20", "00:02:10"];
    for instant in instants {
        let mut cached = harness.cluster().object("web");
        slim_scheduler(&mut cached);
        let now = format!("2026-01-01T{instant}.001Z");
        harness.reconcile_copy(cached, &now).await.unwrap();
    }
    let recorded: Vec<String> = (status(&harness).history.iter())
        .map(|entry| entry.schedule_time.0.to_string())
        .collect();
    assert_eq!(
        recorded,
        [
            "2026-01-01T00:02:10Z",
            "2026-01-01T00:01:20Z",
            "2026-01-01T00:01:10Z"
        ],
        "the newest three, each once"
    );
}

#[tokio::test]
async fn a_new_term_catches_up_the_instant_missed_between_terms() {
    let harness = Harness::with_web("Scale");
    harness.reconcile_at("2026-01-01T00:00:05Z").await.unwrap();
    harness.cluster().take_writes();
    harness
        .reconcile_at("2026-01-01T00:00:10.001Z")
        .await
        .unwrap();
    assert_eq!(
        harness.levels(),
        [(3, false)],
        "on time, at the instant armed"
    );

    harness.terms.send_replace(None);
    let idle = harness
        .reconcile_at("2026-01-01T00:00:20.001Z")
        .await
        .unwrap();
    assert_eq!(idle, Action::await_change(), "a standby arms no timer");
    assert_eq!(harness.cluster().take_writes(), [], "and writes nothing");
    assert_eq!(
        harness.cluster().take_warmed(),
        ["web"],
        "but warms what its first reconcile as leader will read"
    );

    harness.new_term(2);
    harness.reconcile_at("2026-01-01T00:00:35Z").await.unwrap();
    assert_eq!(
        harness.levels(),
        [(5, true)],
        "the missed level, claimed by the new term"
    );
    let history = status(&harness).history;
    let caught_up: Vec<_> = history
        .iter()
        .map(|e| (e.rule.as_str(), e.catch_up))
        .collect();
    // Newest first; the oldest is the level in effect when the object was created.
    assert_eq!(caught_up, [("high", true), ("low", false), ("high", true)]);
}

#[tokio::test]
async fn a_target_that_disappears_fails_the_trigger_and_is_pursued_once_back() {
    let harness = Harness::with_web("Scale");
    harness
        .reconcile_at("2026-01-01T00:00:10.001Z")
        .await
        .unwrap();
    assert_eq!(harness.levels(), [(3, true)]);

    harness.cluster().delete_deployment("web");
    harness
        .reconcile_at("2026-01-01T00:00:20.001Z")
        .await
        .unwrap();
    let status_now = status(&harness);
    assert_eq!(status_now.history[0].result, TriggerResult::Failed);
    assert_eq!(
        ready_reason(&status_now),
        ConditionReason::TargetNotFound.as_str()
    );
    harness.cluster().take_writes();

    harness.reconcile_at("2026-01-01T00:00:25Z").await.unwrap();
    assert_eq!(
        harness.levels(),
        [],
        "checked again, still missing: nothing written"
    );

    harness.cluster().deployment("web", 1);
    harness.reconcile_at("2026-01-01T00:00:26Z").await.unwrap();
    assert_eq!(
        harness.levels(),
        [(5, false)],
        "the level in effect, once it is back"
    );
    assert_eq!(harness.cluster().replicas("web"), Some(5));
    assert_eq!(
        ready_reason(&status(&harness)),
        ConditionReason::TriggerActive.as_str()
    );
}

#[tokio::test]
async fn status_mode_records_the_level_and_never_writes_the_target() {
    let harness = Harness::with_web("Status");
    harness
        .reconcile_at("2026-01-01T00:00:10.001Z")
        .await
        .unwrap();
    assert_eq!(harness.levels(), []);
    assert_eq!(status(&harness).desired_replicas, Some(3));
    assert_eq!(harness.cluster().replicas("web"), Some(1));
}

fn plan_at(cron: &str, now: &str) -> Plan {
    let tide = Tide::new(vec![Rule {
        name: "r".to_owned(),
        cron: Cron::parse(cron, None).unwrap(),
        replicas: 1,
        suspended: false,
        days: Default::default(),
    }]);
    let status = TidalSchedulerStatus::default();
    let facts = Facts {
        status: &status,
        created: at("2020-01-01T00:00:00Z"),
        suspended: false,
        armed: None,
    };
    plan::plan(&tide, facts, at(now))
}

#[test]
fn a_far_future_instant_is_clamped_to_the_longest_sleep() {
    let plan = plan_at("TZ=UTC 0 0 0 29 2 *", "2029-03-01T00:00:00Z");
    assert_eq!(
        plan.next.as_ref().unwrap().schedule_time,
        at("2032-02-29T00:00:00Z")
    );
    let action = requeue(&plan, &Memory::default(), at("2029-03-01T00:00:00Z"));
    assert_eq!(action, Action::requeue(MAX_SLEEP));
}

#[test]
fn waking_early_does_not_fire_and_sleeps_the_rest() {
    let woke = "2026-01-01T00:00:09.997Z";
    let plan = plan_at("TZ=UTC */10 * * * * *", woke);
    assert_eq!(
        plan.level.as_ref().unwrap().schedule_time,
        at("2026-01-01T00:00:00Z")
    );
    let action = requeue(&plan, &Memory::default(), at(woke));
    assert_eq!(action, Action::requeue(Duration::from_millis(3)));
}

#[test]
fn failures_shorten_the_sleep_with_exponential_backoff() {
    let plan = plan_at("TZ=UTC 0 0 0 * * *", "2026-01-01T00:00:01Z");
    let memory = |failures| Memory {
        failures,
        ..Memory::default()
    };
    let now = at("2026-01-01T00:00:01Z");
    assert_eq!(
        requeue(&plan, &memory(1), now),
        Action::requeue(Duration::from_secs(1))
    );
    assert_eq!(
        requeue(&plan, &memory(3), now),
        Action::requeue(Duration::from_secs(4))
    );
    assert_eq!(
        requeue(&plan, &memory(30), now),
        Action::requeue(Duration::from_secs(60))
    );
}
