//! The controller: keeps every TidalScheduler's status — and, in `Scale` mode, its
//! target — at the tide level the rules dictate now, and wakes up at the next fire
//! instant (docs/design.md §4–§5).
//!
//! ```text
//!  watch ──► kube-runtime Controller ──► reconcile ──► validate ─► plan (pure, at now)
//!  (cache)    (one timer per object:        │          (calendars      │
//!              requeue at the next instant; │           from their     │
//!  calendars ─► a calendar's change         │           caches)        │
//!  (caches)     re-plans its users)         │◄── Action::requeue ──────┤
//!                                           ├──► target: /scale or HPA floor (Scale mode)
//!                                           ├──► status JSON patch, guarded by resourceVersion
//!                                           └──► Events (background queue)
//! ```
//!
//! Every write passes the [`WriteGate`] first: with leader election, only the leader
//! writes, and each new leadership term reconciles every object anew (timers rebuilt from
//! status, missed triggers caught up).

mod cache;
mod context;
mod error;
mod in_flight;
mod key;
pub mod plan;
mod publish;
pub(crate) mod read_back;
mod reconcile;
mod status_patch;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, Store};
use tokio::sync::watch;

pub use cache::Slim;
pub use cache::consistency::compare_resource_versions;
pub use cache::list_watch::{InitialList, Source, WATCH_TIMEOUT, list_watch};
pub use error::Error;
pub(crate) use publish::metrics::ControllerMetrics;
pub(crate) use publish::reason::Reason;
pub(crate) use publish::recorder::{Recorder, Reporter};
pub(crate) use publish::trace::TriggerTracer;
pub use status_patch::status_patch;

use crate::api::{CalendarKind, TidalScheduler};
use crate::clock::SystemClock;
use crate::election::WriteGate;
use crate::task::{self, TaskEnded};
use crate::telemetry::server::Readiness;
use cache::Scope;
use cache::calendars::{self, CalendarsByScope};
use cache::consistency::Consistency;
use cache::target_versions::TargetVersions;
use context::Context;
use in_flight::InFlight;
use key::ObjectName;
use publish::event::EventSink;
use reconcile::{KubeCluster, error_policy, reconcile};

/// How often the memory of deleted objects is dropped.
const FORGET_EVERY: Duration = Duration::from_secs(300);

/// Longest wait for running reconciles after a shutdown request (Kubernetes gives a pod
/// 30 s between SIGTERM and SIGKILL by default).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Reconciles running at once (per watched namespace); 0 means unbounded.
    pub concurrency: u16,
    /// How each watch cache's initial list is fetched.
    pub initial_list: InitialList,
    /// Whether the targets written through `/scale` are watched (metadata only), so that
    /// a write needs no read first.
    pub watch_targets: bool,
    /// Who reports Events (`reportingInstance`), e.g. the pod name.
    pub instance: String,
    /// Set once every watch cache has listed, cleared at shutdown (`/readyz`).
    pub readiness: Readiness,
    /// Where stale-cache skips and cache versions are counted.
    pub metrics: ControllerMetrics,
    /// Traces each trigger, or nothing.
    pub tracer: TriggerTracer,
    /// How far in the future a time read back from status may be
    /// ([`read_back::future_tolerance`]).
    pub status_tolerance: jiff::SignedDuration,
}

/// Runs the controller until `shutdown` turns true, then lets running reconciles finish.
/// It writes only while `gate` is open. Fails if its Event publisher ends meanwhile.
pub async fn run(
    client: Client,
    settings: Settings,
    gate: WriteGate,
    shutdown: watch::Receiver<bool>,
) -> Result<(), TaskEnded> {
    let reporter = Reporter {
        controller: "tidal-scheduler".to_owned(),
        instance: settings.instance.clone(),
    };
    let in_flight = InFlight::default();
    let (events, publisher) = EventSink::spawn(
        client.clone(),
        reporter,
        in_flight.clone(),
        gate.clone(),
        settings.metrics.events_dropped(),
    );
    let mut background = [publisher];
    let scopes = Scope::all(&client, &settings.namespaces);
    let target_versions = if settings.watch_targets {
        TargetVersions::watching(client.clone(), &settings.namespaces)
    } else {
        TargetVersions::off()
    };
    let names: Vec<Option<String>> = scopes.iter().map(|s| s.namespace.clone()).collect();
    let consistency = Consistency::new(&names, &settings.metrics);
    let mut calendars = CalendarsByScope::default();
    for scope in &scopes {
        calendars.insert(scope.namespace.clone(), scope.calendars.clone());
    }
    let ctx = Arc::new(
        Context::new(
            KubeCluster::new(client.clone(), events, target_versions),
            Arc::new(SystemClock),
            gate.clone(),
            in_flight.clone(),
            consistency,
            settings.metrics.clone(),
        )
        .with_tracer(settings.tracer.clone())
        .with_calendars(calendars)
        .with_status_tolerance(settings.status_tolerance),
    );
    let config = Config::default()
        .concurrency(settings.concurrency)
        .debounce(Duration::ZERO);
    let mut stores = Vec::new();
    let controllers = scopes.into_iter().map(|scope| {
        let controller = scope_controller(scope, &ctx, &settings, &config, &gate, &shutdown);
        stores.push(controller.store());
        controller
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|result| {
                log_outcome(result.err());
                std::future::ready(())
            })
    });
    let controllers = futures::future::join_all(controllers.collect::<Vec<_>>());
    settings.metrics.read_objects_from(stores.clone());
    tracing::info!(namespaces = ?settings.namespaces, concurrency = settings.concurrency, "controller started");
    let readiness = settings.readiness.clone();
    tokio::select! {
        _ = controllers => {}
        () = forget_deleted(ctx.clone(), stores.clone()) => {}
        () = ready_once_listed(stores, readiness.clone()) => {}
        () = drained_after(shutdown, in_flight, readiness.clone()) => {}
        ended = task::first_ended(&mut background) => {
            readiness.set(false);
            return Err(ended);
        }
    }
    readiness.set(false);
    tracing::info!("controller stopped");
    Ok(())
}

/// The Controller of one watched scope: its TidalSchedulers' watch (counted for
/// read-your-writes, our own echoes filtered out), re-planned on a calendar's change and
/// on each new leadership term, stopped by `shutdown`.
fn scope_controller(
    scope: Scope,
    ctx: &Arc<Context<KubeCluster>>,
    settings: &Settings,
    config: &Config,
    gate: &WriteGate,
    shutdown: &watch::Receiver<bool>,
) -> Controller<TidalScheduler> {
    let Scope {
        namespace,
        objects: api,
        calendars: _,
        namespaced_calendars,
        cluster_calendars,
    } = scope;
    let (reader, writer) = reflector::store();
    let (echoes, observer) = (ctx.clone(), ctx.clone());
    let progress = ctx.consistency.progress(&namespace);
    let objects = list_watch(api, settings.initial_list, WATCH_TIMEOUT, progress)
        .default_backoff()
        .modify(cache::slim_scheduler)
        .reflect(writer)
        // Counted once the event is in the cache: a reconcile on another thread must not
        // see a version counted before its object is there.
        .map_ok(move |event| {
            observer.consistency.observe(&namespace, &event);
            event
        })
        .applied_objects()
        .try_filter(move |object| std::future::ready(!echoes.consistency.is_echo(object)));
    let (for_namespaced, for_cluster) = (reader.clone(), reader.clone());
    Controller::for_stream(objects, reader)
        .with_config(config.clone())
        // A calendar's change (or deletion) re-plans every object that uses it.
        .watches_stream(namespaced_calendars, move |calendar| {
            calendars::users_of(&for_namespaced, &calendar, CalendarKind::TidalCalendar)
        })
        .watches_stream(cluster_calendars, move |calendar| {
            calendars::users_of(&for_cluster, &calendar, CalendarKind::ClusterTidalCalendar)
        })
        .reconcile_all_on(gate.openings())
        .graceful_shutdown_on(changed_to_true(shutdown.clone()))
}

/// Drops, now and then, the memory of objects gone from every watch cache.
async fn forget_deleted(ctx: Arc<Context<KubeCluster>>, stores: Vec<Store<TidalScheduler>>) {
    let mut tick = tokio::time::interval(FORGET_EVERY);
    loop {
        tick.tick().await;
        let existing: HashSet<ObjectName> = stores
            .iter()
            .flat_map(|store| store.state())
            .map(|object| ObjectName::of(&object))
            .collect();
        ctx.forget_all_but(&existing);
        tracing::debug!(remembered = ctx.remembered(), "forgot deleted objects");
    }
}

/// Marks the process ready once every watch cache has listed, then waits forever.
async fn ready_once_listed(stores: Vec<Store<TidalScheduler>>, readiness: Readiness) {
    for store in &stores {
        if store.wait_until_ready().await.is_err() {
            return std::future::pending().await;
        }
    }
    readiness.set(true);
    tracing::info!("watch caches listed: ready");
    std::future::pending().await
}

/// Logs what the Controller stream reports: watch failures (a missing CRD, missing RBAC,
/// an unreachable API server) are warnings; failed reconciles were already logged by
/// [`error_policy`]; a wake-up for a deleted object is routine.
fn log_outcome<Q: std::fmt::Display>(error: Option<kube::runtime::controller::Error<Error, Q>>) {
    use kube::runtime::controller::Error as Outcome;
    match error {
        None | Some(Outcome::ReconcilerFailed(..)) => {}
        Some(Outcome::ObjectNotFound(object)) => {
            tracing::debug!(%object, "wake-up for an object no longer cached");
        }
        Some(error @ (Outcome::QueueError(_) | Outcome::RunnerError(_))) => {
            tracing::warn!(%error, "watching TidalSchedulers failed; retrying with backoff");
        }
    }
}

/// Resolves once shutdown was requested (from then on the process is not ready) and no
/// reconcile runs (or after [`SHUTDOWN_GRACE`]). kube-runtime's own graceful shutdown
/// waits for the first list of the cache, which never comes while, say, the CRD is
/// missing.
async fn drained_after(shutdown: watch::Receiver<bool>, in_flight: InFlight, readiness: Readiness) {
    changed_to_true(shutdown).await;
    readiness.set(false);
    if tokio::time::timeout(SHUTDOWN_GRACE, in_flight.drained())
        .await
        .is_err()
    {
        tracing::warn!(
            running = in_flight.count(),
            "reconciles still running after the grace period"
        );
    }
}

async fn changed_to_true(mut flag: watch::Receiver<bool>) {
    // An error means the sender is gone: nobody can ask for shutdown any more, but the
    // process is ending anyway.
    let _ = flag.wait_for(|value| *value).await;
}
