//! One reconcile, as a pipeline of named stages: **observe** (the status read back, the
//! calendars, the plan at now), **decide** (pure: what to write to the target — see
//! [`decide`]), **act** (the target write), **record** (the status write, guarded by the
//! object's resourceVersion, so a stale cache can never record a trigger twice) and
//! **announce** (Events, metrics, logs, the trigger's trace). The stages that need the
//! cluster reach it only through [`Cluster`], so whole reconciles are tested against an
//! in-memory fake; what the reconcile learns goes into the object's [`Memory`] by its pure
//! transitions.
//!
//! ```text
//!  observe ─► plan ─┬─ invalid spec ──────────────────────► record invalid ─► announce
//!                   └─ target: resolve, check when due ─► decide ─► act ─► record ─► announce
//! ```

mod cluster;
mod decide;
#[cfg(test)]
mod fake;
mod memory;
mod strategy;
mod target;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use tokio::time::Instant;
use tracing::Instrument as _;

pub use cluster::{Cluster, KubeCluster};
pub use memory::Memory;

use self::decide::TargetStep;
use self::strategy::Strategy;
use crate::api::{NoCalendars, SpecProblem, TidalScheduler, TidalSchedulerStatus, ValidSpec};
use crate::controller::cache::calendars::uses_calendars;
use crate::controller::cache::consistency::Freshness;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::key::{ObjectKey, ObjectName};
use crate::controller::plan::{self, ApplyProblem, Outcome, Plan};
use crate::controller::publish::metrics::ReconcileResult;
use crate::controller::publish::notice;
use crate::controller::publish::reason::Reason;
use crate::controller::publish::trace::TriggerTrace;
use crate::controller::read_back::{ReadBack, read_back};
use crate::controller::status_patch::status_patch;
use crate::election::NotLeading;

/// Longest sleep between reconciles of one object: clamps far-future instants (a timer
/// wheel cannot hold years) and bounds how stale a target check gets.
pub const MAX_SLEEP: Duration = Duration::from_secs(15 * 60);

/// Attempts when the object changed between read and write (409).
const CONFLICT_ATTEMPTS: usize = 3;

/// How soon a reconcile skipped on a stale cache runs again: fixed, not exponential
/// (Kubernetes' backoff path has been seen to stall for minutes).
pub const STALE_RETRY: Duration = Duration::from_millis(100);

/// Reconciles one TidalScheduler; on a write conflict, re-reads it and tries again.
/// Counted and timed by how it ended.
pub async fn reconcile<C: Cluster>(
    object: Arc<TidalScheduler>,
    ctx: Arc<Context<C>>,
) -> Result<Action, Error> {
    let _counted = ctx.in_flight.enter();
    let started = Instant::now();
    let (result, ended) = if !ctx.gate.is_open() {
        ctx.cluster.warm(&object).await;
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
async fn reconcile_fresh<C: Cluster>(
    object: Arc<TidalScheduler>,
    unsure: bool,
    ctx: &Context<C>,
) -> Result<Action, Error> {
    object.namespace().ok_or(Error::MissingNamespace)?;
    let key = ObjectKey::of(&object);
    let mut object = object;
    if unsure {
        match reread(&key, ctx).await? {
            Some(fresh) => {
                ctx.consistency.settled(&key);
                object = fresh;
            }
            None => return Ok(Action::await_change()),
        }
    }
    for _ in 1..CONFLICT_ATTEMPTS {
        match reconcile_once(&object, ctx).await {
            Err(Error::Conflict) => match reread(&key, ctx).await? {
                Some(fresh) => object = fresh,
                None => return Ok(Action::await_change()),
            },
            other => return other,
        }
    }
    reconcile_once(&object, ctx).await
}

/// The object as the API server has it now; `None` (and its records forgotten) if it is
/// gone.
async fn reread<C: Cluster>(
    key: &ObjectKey,
    ctx: &Context<C>,
) -> Result<Option<Arc<TidalScheduler>>, Error> {
    match ctx.cluster.read(&key.name).await {
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
fn not_acting<C>(ctx: &Context<C>) -> Action {
    if ctx.gate.in_term() {
        Action::requeue(CLOCK_RETRY)
    } else {
        Action::await_change()
    }
}

/// How soon a leader whose clock is beyond its bound looks again.
const CLOCK_RETRY: Duration = Duration::from_secs(1);

/// What the controller does after a failed reconcile: retry soon, then back off.
pub fn error_policy<C: Cluster>(
    object: Arc<TidalScheduler>,
    error: &Error,
    ctx: Arc<Context<C>>,
) -> Action {
    if matches!(error, Error::NotActing) {
        tracing::debug!(tidal = %ObjectName::of(&object), "leadership lost during the reconcile");
        return not_acting(&ctx);
    }
    let key = ObjectKey::of(&object);
    let memory = ctx.recall(&key).failed();
    let delay = retry_delay(memory.failures);
    tracing::warn!(tidal = %key, %error, retry_ms = delay.as_millis() as u64, "reconcile failed");
    ctx.remember(&key, memory);
    Action::requeue(delay)
}

/// What the observe stage found.
struct Observed {
    /// The status as stored: the status patch is computed from it.
    stored: TidalSchedulerStatus,
    /// The same with any value this controller cannot have written corrected.
    old: TidalSchedulerStatus,
    /// Each correction, for the Ready message and a Warning Event.
    findings: Vec<String>,
}

/// The valid spec and its plan at now, or what is wrong with the spec.
type Planned = Result<(ValidSpec, Plan), Vec<SpecProblem>>;

/// What the target stage found and did besides the memory it learned.
#[derive(Default)]
struct Applied {
    /// The problem found, if any: the trigger is recorded as failed.
    problem: Option<ApplyProblem>,
    /// Warnings for the Ready message and Events.
    warnings: Vec<String>,
}

impl Applied {
    fn problem(problem: ApplyProblem) -> Applied {
        Applied {
            problem: Some(problem),
            warnings: Vec::new(),
        }
    }

    fn warnings(warnings: Vec<String>) -> Applied {
        Applied {
            problem: None,
            warnings,
        }
    }
}

/// One pass of the pipeline over `object` as read.
async fn reconcile_once<C: Cluster>(
    object: &TidalScheduler,
    ctx: &Context<C>,
) -> Result<Action, Error> {
    let key = ObjectKey::of(object);
    let memory = ctx.recall(&key);
    let (observed, planned) = observe(object, &memory, ctx).await?;
    let (valid, plan) = match planned {
        Ok(planned) => planned,
        Err(problems) => {
            record_invalid(object, &observed, &problems, ctx).await?;
            ctx.remember(&key, memory.invalid());
            return Ok(Action::await_change());
        }
    };
    let namespace = object.namespace().ok_or(Error::MissingNamespace)?;
    let trace = plan.new_trigger.as_ref().and_then(|new| {
        ctx.tracer
            .trace(memory.trace.as_ref(), object, &namespace, new)
    });
    let memory = memory.traced(trace.clone());
    if trace.is_some() {
        // Kept before any write: if the status write fails, the retry continues this trace.
        ctx.remember(&key, memory.clone());
    }
    let (memory, mut applied) = if plan.suspended {
        (memory, Applied::default())
    } else {
        apply(object, &plan, &observed.old, memory, ctx, trace.as_ref()).await?
    };
    applied.warnings.splice(0..0, valid.warnings);
    let memory = record(
        object,
        &plan,
        &observed,
        &applied,
        memory,
        trace.as_ref(),
        ctx,
    )
    .await?;
    for (reason, note) in notice::warnings(&applied.warnings, &memory.warned) {
        send(ctx, object, reason, note);
    }
    let memory = memory.reconciled(&plan, applied.warnings, applied.problem.is_some());
    let action = requeue(&plan, &memory, ctx.clock.now());
    ctx.remember(&key, memory);
    Ok(action)
}

/// Observe: the status read back, the calendars the object uses, and the plan at now.
async fn observe<C: Cluster>(
    object: &TidalScheduler,
    memory: &Memory,
    ctx: &Context<C>,
) -> Result<(Observed, Planned), Error> {
    let namespace = object.namespace().ok_or(Error::MissingNamespace)?;
    let now = ctx.clock.now();
    let stored = object.status.clone().unwrap_or_default();
    let ReadBack {
        status: old,
        findings,
    } = read_back(
        &stored,
        object.metadata.generation,
        now,
        ctx.status_tolerance,
    );
    let planned = if uses_calendars(object) {
        let calendars = match ctx.calendars.for_namespace(&namespace) {
            Some(caches) if caches.listed().await => caches.clone(),
            _ => return Err(Error::CalendarsNotListed),
        };
        // A rule's calendars can make its plan a search over years of days: it runs on
        // the blocking pool, where it delays this object alone — never the threads that
        // serve other objects' triggers and the Lease.
        let (object, old, armed) = (object.clone(), old.clone(), memory.armed);
        tokio::task::spawn_blocking(move || {
            plan::plan_object(&object, &calendars, &old, armed, now)
        })
        .await
        .map_err(|_| Error::PlanPanicked)?
    } else {
        plan::plan_object(object, &NoCalendars, &old, memory.armed, now)
    };
    let observed = Observed {
        stored,
        old,
        findings,
    };
    Ok((observed, planned))
}

/// Record and announce an invalid spec: the status says what is wrong, once.
async fn record_invalid<C: Cluster>(
    object: &TidalScheduler,
    observed: &Observed,
    problems: &[SpecProblem],
    ctx: &Context<C>,
) -> Result<(), Error> {
    let now = ctx.clock.now();
    let new = plan::status_invalid(&observed.old, problems, object.metadata.generation, now);
    if new != observed.stored {
        write_status(ctx, object, &new).await?;
        if let Some((reason, note)) = notice::invalid(&observed.old, &new) {
            send(ctx, object, reason, note);
        }
        announce_corrections(ctx, object, &observed.findings);
    }
    Ok(())
}

/// Resolves the target and checks it when due (observe), decides what to write to it
/// (decide) and writes it (act). Returns the memory learned and what was found.
async fn apply<C: Cluster>(
    object: &TidalScheduler,
    plan: &Plan,
    old: &TidalSchedulerStatus,
    memory: Memory,
    ctx: &Context<C>,
    trace: Option<&TriggerTrace>,
) -> Result<(Memory, Applied), Error> {
    let namespace = object.namespace().ok_or(Error::MissingNamespace)?;
    let target = match ctx
        .cluster
        .resolve(&object.spec.target_ref, &namespace)
        .await
    {
        Ok(target) => target,
        Err(problem) => return Ok((memory.unresolved(), Applied::problem(problem))),
    };
    let strategy = Strategy::of(object.spec.apply, &target);
    let spec_changed = old.observed_generation != object.metadata.generation;
    let mut memory = memory;
    if decide::check_due(&memory, spec_changed, Instant::now()) {
        let found = ctx.cluster.check(&target, strategy).await;
        memory = memory.checked(Instant::now(), found);
    }
    let target_id = target.id();
    let (replicas, claim, warnings) = match decide::target_step(plan, strategy, &memory, &target_id)
    {
        TargetStep::Blocked(problem) => return Ok((memory, Applied::problem(problem))),
        TargetStep::Keep(warnings) => return Ok((memory, Applied::warnings(warnings))),
        TargetStep::Write {
            replicas,
            claim,
            warnings,
        } => (replicas, claim, warnings),
    };
    let span = trace.map(|trace| trace.child("write target", ctx.clock.now()));
    let written = ctx
        .gate
        .guard(
            ctx.cluster
                .write_level(&target, strategy, replicas, &ctx.gate, claim),
        )
        .instrument(
            span.as_ref()
                .map_or_else(tracing::Span::none, |s| s.carrier()),
        )
        .await
        .and_then(|written| written);
    if let Some(span) = span {
        let failure = match &written {
            Ok(Ok(())) => None,
            Ok(Err(problem)) => Some(problem.message.clone()),
            Err(NotLeading) => Some(Error::NotActing.to_string()),
        };
        span.end(ctx.clock.now(), failure);
    }
    match written? {
        Ok(()) => Ok((
            memory.level_written(replicas, target_id),
            Applied::warnings(warnings),
        )),
        Err(problem) => Ok((
            memory.level_failed(),
            Applied {
                problem: Some(problem),
                warnings,
            },
        )),
    }
}

/// Record: writes the status the plan and the target's outcome make, if it changed;
/// then announces the trigger (its trace, metrics, log line, Events).
async fn record<C: Cluster>(
    object: &TidalScheduler,
    plan: &Plan,
    observed: &Observed,
    applied: &Applied,
    memory: Memory,
    trace: Option<&TriggerTrace>,
    ctx: &Context<C>,
) -> Result<Memory, Error> {
    let problem = applied.problem.as_ref();
    // The Ready message of the write that corrects the status names each correction.
    let shown: Vec<String> = (applied.warnings.iter())
        .chain(&observed.findings)
        .cloned()
        .collect();
    let trace_id = trace.and_then(TriggerTrace::trace_id);
    // executionTime: the instant the status write starts (its span starts there too).
    let execution = ctx.clock.now();
    let outcome = Outcome {
        generation: object.metadata.generation,
        history_limit: object.spec.history_entries(),
        warnings: &shown,
        problem,
        now: execution,
        trace_id: trace_id.as_deref(),
    };
    let new = plan::status_after(&observed.old, plan, outcome);
    if new == observed.stored {
        return Ok(memory);
    }
    let span = trace.map(|trace| trace.child("write status", execution));
    let written = write_status(ctx, object, &new)
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
    let memory = match &plan.new_trigger {
        Some(new_trigger) => {
            let (memory, recorded) = memory.recorded();
            let failure = problem.map(|problem| problem.message.as_str());
            if let Some(trace) = recorded {
                trace.finish(acknowledged, failure);
            }
            let latency = acknowledged.duration_since(new_trigger.trigger.schedule_time);
            ctx.metrics
                .trigger(new_trigger, failure.is_none(), latency, trace_id.as_deref());
            memory
        }
        None => memory,
    };
    let key = ObjectKey::of(object);
    log_trigger(&key, plan, problem, acknowledged, trace_id.as_deref());
    for (reason, note) in notice::after(plan, &observed.old, &new, problem) {
        send(ctx, object, reason, note);
    }
    announce_corrections(ctx, object, &observed.findings);
    Ok(memory)
}

/// Patches the status, conditional on the resourceVersion read: if the object changed
/// since (or the cache was stale), the write fails with a conflict instead of recording a
/// trigger twice.
async fn write_status<C: Cluster>(
    ctx: &Context<C>,
    object: &TidalScheduler,
    new: &TidalSchedulerStatus,
) -> Result<(), Error> {
    let patch = status_patch(
        object.status.as_ref(),
        new,
        object.spec.history_entries(),
        object.resource_version().as_deref(),
    )
    .map_err(Error::Serialize)?;
    let key = ObjectKey::of(object);
    let unsure = || ctx.consistency.unsure(&key);
    ctx.gate.check()?;
    let Ok(answer) = ctx
        .gate
        .guard(ctx.cluster.patch_status(&key.name, patch))
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
fn announce_corrections<C: Cluster>(
    ctx: &Context<C>,
    object: &TidalScheduler,
    findings: &[String],
) {
    for finding in findings {
        tracing::warn!(tidal = %ObjectName::of(object), finding, "impossible status corrected");
        send(ctx, object, Reason::ImpossibleStatus, finding.clone());
    }
}

fn send<C: Cluster>(ctx: &Context<C>, object: &TidalScheduler, reason: Reason, note: String) {
    if ctx.gate.check().is_ok() {
        ctx.cluster.event(&cluster::regarding(object), reason, note);
    }
}
