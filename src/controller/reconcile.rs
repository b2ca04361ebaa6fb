//! One reconcile: validate, plan the tide at now, apply the level (Scale mode), write the
//! status if anything changed (guarded by the object's resourceVersion, so a stale cache
//! can never record a trigger twice), send Events, and requeue for the next instant.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use jiff::Timestamp;
use kube::api::{Api, Patch};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tokio::time::Instant;
use tracing::Instrument as _;

use super::calendars::uses_calendars;
use super::consistency::Freshness;
use super::context::{Context, Memory};
use super::error::Error;
use super::key::{ObjectKey, ObjectName};
use super::metrics::ReconcileResult;
use super::notice;
use super::plan::{self, ApplyProblem, Outcome, Plan};
use super::read_back::{ReadBack, read_back};
use super::reason::Reason;
use super::target::{Target, patch_params};
use super::trace::TriggerTrace;
use crate::api::{ApplyMode, Calendars, NoCalendars, TidalScheduler, TidalSchedulerStatus};

/// Longest sleep between reconciles of one object: clamps far-future instants (a timer
/// wheel cannot hold years) and bounds how stale a target check gets.
pub const MAX_SLEEP: Duration = Duration::from_secs(15 * 60);

/// How often an existing target is checked again (existence, HPA conflicts).
const TARGET_RECHECK: Duration = MAX_SLEEP;

/// Attempts when the object changed between read and write (409).
const CONFLICT_ATTEMPTS: usize = 3;

/// How soon a reconcile skipped on a stale cache runs again: fixed, not exponential
/// (Kubernetes' backoff path has been seen to stall for minutes).
pub const STALE_RETRY: Duration = Duration::from_millis(100);

/// Reconciles one TidalScheduler; on a write conflict, re-reads it and tries again.
/// Counted and timed by how it ended.
pub async fn reconcile(object: Arc<TidalScheduler>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _counted = ctx.in_flight.enter();
    let started = Instant::now();
    let (result, ended) = if !ctx.gate.is_open() {
        (Ok(not_acting(&ctx)), ReconcileResult::NotLeading)
    } else {
        let key = ObjectKey::of(&object);
        let snapshot = object.resource_version();
        match ctx.consistency.check(&key, snapshot.as_deref()) {
            Freshness::Stale { written, seen, .. } => {
                ctx.metrics.stale_sync_skip();
                tracing::debug!(tidal = %key, %written, %seen, "cache behind our own write: reconcile skipped");
                (Ok(Action::requeue(STALE_RETRY)), ReconcileResult::StaleSkip)
            }
            freshness => {
                let unsure = freshness == Freshness::Unsure;
                let result = reconcile_fresh(object, unsure, &ctx).await;
                let ended = match &result {
                    Ok(_) => ReconcileResult::Success,
                    Err(Error::NotActing) => ReconcileResult::NotLeading,
                    Err(_) => ReconcileResult::Error,
                };
                (result, ended)
            }
        }
    };
    ctx.metrics.reconciled(ended, started.elapsed());
    result
}

/// Reconciles an object whose cache has seen this replica's writes — or, `unsure` of
/// one (its outcome unknown), after reading it from the API server.
async fn reconcile_fresh(
    object: Arc<TidalScheduler>,
    unsure: bool,
    ctx: &Context,
) -> Result<Action, Error> {
    let namespace = object.namespace().ok_or(Error::MissingNamespace)?;
    let key = ObjectKey::of(&object);
    let api: Api<TidalScheduler> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut object = object;
    if unsure {
        match reread(&api, &key, ctx).await? {
            Some(fresh) => {
                ctx.consistency.settled(&key);
                object = fresh;
            }
            None => return Ok(Action::await_change()),
        }
    }
    for _ in 1..CONFLICT_ATTEMPTS {
        match reconcile_once(&object, &api, ctx).await {
            Err(Error::Conflict) => match reread(&api, &key, ctx).await? {
                Some(fresh) => object = fresh,
                None => return Ok(Action::await_change()),
            },
            other => return other,
        }
    }
    reconcile_once(&object, &api, ctx).await
}

/// The object as the API server has it now; `None` (and its records forgotten) if it is
/// gone.
async fn reread(
    api: &Api<TidalScheduler>,
    key: &ObjectKey,
    ctx: &Context,
) -> Result<Option<Arc<TidalScheduler>>, Error> {
    match api.get_opt(&key.name.name).await {
        Ok(Some(fresh)) => Ok(Some(Arc::new(fresh))),
        Ok(None) => {
            ctx.consistency.forget(key);
            Ok(None)
        }
        Err(source) => Err(Error::Read { source }),
    }
}

/// What a reconcile that may not write does next. A standby keeps its cache warm but
/// arms no timers: the next leadership term reconciles every object anew. A leader whose
/// gate only the clock bound shut tries again soon: its clock may come back within the
/// bound before it steps down, and then no new term would reconcile this object.
fn not_acting(ctx: &Context) -> Action {
    if ctx.gate.in_term() {
        Action::requeue(CLOCK_RETRY)
    } else {
        Action::await_change()
    }
}

/// How soon a leader whose clock is beyond its bound looks again.
const CLOCK_RETRY: Duration = Duration::from_secs(1);

/// What the controller does after a failed reconcile: retry soon, then back off.
pub fn error_policy(object: Arc<TidalScheduler>, error: &Error, ctx: Arc<Context>) -> Action {
    if matches!(error, Error::NotActing) {
        tracing::debug!(tidal = %ObjectName::of(&object), "leadership lost during the reconcile");
        return not_acting(&ctx);
    }
    let key = ObjectKey::of(&object);
    let mut memory = ctx.recall(&key);
    memory.failures = memory.failures.saturating_add(1);
    let delay = retry_delay(memory.failures);
    tracing::warn!(tidal = %key, %error, retry_ms = delay.as_millis() as u64, "reconcile failed");
    ctx.remember(&key, memory);
    Action::requeue(delay)
}

async fn reconcile_once(
    object: &TidalScheduler,
    api: &Api<TidalScheduler>,
    ctx: &Context,
) -> Result<Action, Error> {
    let key = ObjectKey::of(object);
    let namespace = object.namespace().ok_or(Error::MissingNamespace)?;
    let mut memory = ctx.recall(&key);
    let now = ctx.clock.now();
    let generation = object.metadata.generation;
    // `stored` is what the API server has (the patch is computed from it); `old` the same
    // with any value this controller cannot have written corrected (read_back).
    let stored = object.status.clone().unwrap_or_default();
    let ReadBack {
        status: old,
        findings,
    } = read_back(&stored, generation, now, ctx.status_tolerance);

    let calendars = ctx.calendars.for_namespace(&namespace);
    if uses_calendars(object) && !matches!(calendars, Some(caches) if caches.listed().await) {
        return Err(Error::CalendarsNotListed);
    }
    let lookup: &dyn Calendars = match calendars {
        Some(caches) => caches,
        None => &NoCalendars,
    };
    let (valid, plan) = match plan::plan_object(object, lookup, &old, memory.armed, now) {
        Ok(planned) => planned,
        Err(problems) => {
            let new = plan::status_invalid(&old, &problems, generation, now);
            if new != stored {
                write_status(ctx, api, object, &stored, &new).await?;
                if let Some((reason, note)) = notice::invalid(&old, &new) {
                    send(ctx, object, reason, note);
                }
                announce_corrections(ctx, object, &findings);
            }
            memory.armed = None;
            memory.failures = 0;
            ctx.remember(&key, memory);
            return Ok(Action::await_change());
        }
    };
    let trace = plan.new_trigger.as_ref().and_then(|new| {
        ctx.tracer
            .trace(memory.trace.as_ref(), object, &namespace, new)
    });
    if trace.is_some() {
        // Kept before any write: if the status write fails, the retry continues this trace.
        memory.trace = trace.clone();
        ctx.remember(&key, memory.clone());
    }
    let (problem, mut warnings) = if plan.suspended {
        (None, Vec::new())
    } else {
        apply(object, &plan, &old, &mut memory, ctx, trace.as_ref()).await?
    };
    warnings.splice(0..0, valid.warnings);
    // The Ready message of the write that corrects the status names each correction.
    let shown: Vec<String> = warnings.iter().chain(&findings).cloned().collect();

    let trace_id = trace.as_ref().and_then(TriggerTrace::trace_id);
    // executionTime: the instant the status write starts (its span starts there too).
    let execution = ctx.clock.now();
    let outcome = Outcome {
        generation,
        history_limit: object.spec.history_limit,
        warnings: &shown,
        problem: problem.as_ref(),
        now: execution,
        trace_id: trace_id.as_deref(),
    };
    let new = plan::status_after(&old, &plan, outcome);
    if new != stored {
        let span = trace
            .as_ref()
            .map(|trace| trace.child("write status", execution));
        let written = write_status(ctx, api, object, &stored, &new)
            .instrument(
                span.as_ref()
                    .map_or_else(tracing::Span::none, |s| s.carrier()),
            )
            .await;
        let acknowledged = ctx.clock.now();
        if let Some(span) = span {
            span.end(
                acknowledged,
                written.as_ref().err().map(ToString::to_string),
            );
        }
        written?;
        if let Some(new_trigger) = &plan.new_trigger {
            let failure = problem.as_ref().map(|problem| problem.message.as_str());
            if let Some(trace) = memory.trace.take() {
                trace.finish(acknowledged, failure);
            }
            let latency = acknowledged.duration_since(new_trigger.trigger.schedule_time);
            ctx.metrics
                .trigger(new_trigger, failure.is_none(), latency, trace_id.as_deref());
        }
        log_trigger(
            &key,
            &plan,
            problem.as_ref(),
            acknowledged,
            trace_id.as_deref(),
        );
        for (reason, note) in notice::after(&plan, &old, &new, problem.as_ref()) {
            send(ctx, object, reason, note);
        }
        announce_corrections(ctx, object, &findings);
    }
    for (reason, note) in notice::warnings(&warnings, &memory.warned) {
        send(ctx, object, reason, note);
    }
    memory.warned = warnings;
    memory.armed = plan.next.as_ref().map(|next| next.schedule_time);
    memory.failures = if problem.is_some() {
        memory.failures.saturating_add(1)
    } else {
        0
    };
    let action = requeue(&plan, &memory, ctx.clock.now());
    ctx.remember(&key, memory);
    Ok(action)
}

/// Checks the target when due and, in Scale mode, writes the level when it is new to
/// this process. Returns the problem found, if any, and warnings.
async fn apply(
    object: &TidalScheduler,
    plan: &Plan,
    old: &TidalSchedulerStatus,
    memory: &mut Memory,
    ctx: &Context,
    trace: Option<&TriggerTrace>,
) -> Result<(Option<ApplyProblem>, Vec<String>), Error> {
    let namespace = object.namespace().ok_or(Error::MissingNamespace)?;
    let scale_mode = object.spec.apply == ApplyMode::Scale;
    let target = match ctx
        .targets
        .resolve(&object.spec.target_ref, &namespace)
        .await
    {
        Ok(target) => target,
        Err(problem) => {
            memory.checked = None;
            return Ok((Some(problem), Vec::new()));
        }
    };
    let spec_changed = old.observed_generation != object.metadata.generation;
    let check_due = spec_changed
        || match &memory.checked {
            None | Some((_, Err(_))) => true,
            Some((at, Ok(_))) => at.elapsed() >= TARGET_RECHECK,
        };
    if check_due {
        let found = ctx.targets.check(&target, scale_mode).await;
        memory.checked = Some((Instant::now(), found));
    }
    let warnings = match &memory.checked {
        Some((_, Ok(warnings))) => warnings.clone(),
        Some((_, Err(problem))) => return Ok((Some(problem.clone()), Vec::new())),
        None => Vec::new(),
    };
    let Some(level) = plan.level.as_ref().filter(|_| scale_mode) else {
        return Ok((None, warnings));
    };
    if plan.new_trigger.is_none() && memory.applied == Some(level.replicas) {
        return Ok((None, warnings));
    }
    let claim = memory.claimed.as_deref() != Some(target.id().as_str());
    let span = trace.map(|trace| trace.child("write target", ctx.clock.now()));
    let scaled = scale(ctx, &target, level.replicas, claim)
        .instrument(
            span.as_ref()
                .map_or_else(tracing::Span::none, |s| s.carrier()),
        )
        .await;
    if let Some(span) = span {
        let failure = match &scaled {
            Ok(Ok(())) => None,
            Ok(Err(problem)) => Some(problem.message.clone()),
            Err(error) => Some(error.to_string()),
        };
        span.end(ctx.clock.now(), failure);
    }
    match scaled? {
        Ok(()) => {
            memory.applied = Some(level.replicas);
            memory.claimed = Some(target.id());
            Ok((None, warnings))
        }
        Err(problem) => {
            memory.applied = None;
            memory.checked = None;
            Ok((Some(problem), warnings))
        }
    }
}

async fn scale(
    ctx: &Context,
    target: &Target,
    replicas: i32,
    claim: bool,
) -> Result<Result<(), ApplyProblem>, Error> {
    Ok(ctx
        .gate
        .guard(ctx.targets.scale(target, replicas, &ctx.gate, claim))
        .await??)
}

/// Merge-patches the status, conditional on the resourceVersion read: if the object
/// changed since (or the cache was stale), the write fails with a conflict instead of
/// recording a trigger twice.
async fn write_status(
    ctx: &Context,
    api: &Api<TidalScheduler>,
    object: &TidalScheduler,
    old: &TidalSchedulerStatus,
    new: &TidalSchedulerStatus,
) -> Result<(), Error> {
    let patch = plan::status_patch(old, new, object.resource_version().as_deref())
        .map_err(Error::Serialize)?;
    let params = patch_params();
    let (name, patch) = (object.name_any(), Patch::Merge(&patch));
    let unsure = || ctx.consistency.unsure(&ObjectKey::of(object));
    ctx.gate.check()?;
    let Ok(answer) = ctx
        .gate
        .guard(api.patch_status(&name, &params, &patch))
        .await
    else {
        // Cancelled in flight: the API server may still have applied it.
        unsure();
        return Err(Error::NotActing);
    };
    match answer {
        Ok(written) => {
            ctx.consistency.wrote(&written);
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Err(Error::Conflict),
        Err(source) => {
            if !refused(&source) {
                unsure();
            }
            Err(Error::WriteStatus { source })
        }
    }
}

/// Whether the API server answered that it did not apply a write (a 4xx status); after
/// anything else — no answer, a timeout, a 5xx such as etcd's "may still be processing"
/// — it may have.
fn refused(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if (400..500).contains(&status.code))
}

/// The next wake-up: the next trigger, sooner after a problem, never later than
/// [`MAX_SLEEP`].
fn requeue(plan: &Plan, memory: &Memory, now: Timestamp) -> Action {
    let mut wait = plan
        .next
        .as_ref()
        .map_or(MAX_SLEEP, |next| plan::until(next.schedule_time, now));
    if memory.failures > 0 {
        wait = wait.min(retry_delay(memory.failures));
    }
    Action::requeue(wait.clamp(Duration::from_millis(1), MAX_SLEEP))
}

/// Exponential backoff after `failures` consecutive failures: 1 s, 2 s, 4 s, ... 60 s.
fn retry_delay(failures: u32) -> Duration {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(60))
        .without_max_times()
        .build()
        .nth(failures.saturating_sub(1) as usize)
        .unwrap_or(Duration::from_secs(60))
}

fn log_trigger(
    key: &ObjectKey,
    plan: &Plan,
    problem: Option<&ApplyProblem>,
    acknowledged: Timestamp,
    trace_id: Option<&str>,
) {
    let Some(new) = &plan.new_trigger else {
        return;
    };
    let lateness = acknowledged.duration_since(new.trigger.schedule_time);
    let lateness_ms = lateness.as_secs_f64() * 1000.0;
    let schedule_time = new.trigger.schedule_time.to_string();
    match problem {
        None => tracing::info!(
            tidal = %key,
            rule = new.trigger.rule,
            replicas = new.trigger.replicas,
            %schedule_time,
            lateness_ms,
            catch_up = new.catch_up,
            superseded = new.superseded,
            trace_id,
            "trigger applied"
        ),
        Some(problem) => tracing::warn!(
            tidal = %key,
            rule = new.trigger.rule,
            replicas = new.trigger.replicas,
            %schedule_time,
            reason = problem.reason.as_str(),
            message = problem.message,
            trace_id,
            "trigger failed"
        ),
    }
}

/// A Warning Event per correction of the stored status, once it is written right.
fn announce_corrections(ctx: &Context, object: &TidalScheduler, findings: &[String]) {
    for finding in findings {
        tracing::warn!(tidal = %ObjectName::of(object), finding, "impossible status corrected");
        send(ctx, object, Reason::ImpossibleStatus, finding.clone());
    }
}

fn send(ctx: &Context, object: &TidalScheduler, reason: Reason, note: String) {
    if ctx.gate.check().is_ok() {
        // With its resourceVersion (kube's object_ref leaves it out): Events about one
        // version are counted as a series, a later version's are Events of their own —
        // each trigger's, with its own note and trace id.
        let mut regarding = object.object_ref(&());
        regarding.resource_version = object.resource_version();
        ctx.events.send(&regarding, reason, note);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::plan::Facts;
    use crate::schedule::{Cron, Rule, Tide};

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
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
}
