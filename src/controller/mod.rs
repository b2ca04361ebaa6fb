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
//!                                           ├──► status patch, guarded by resourceVersion
//!                                           └──► Events (background queue)
//! ```
//!
//! Every write passes the [`WriteGate`] first: with leader election, only the leader
//! writes, and each new leadership term reconciles every object anew (timers rebuilt from
//! status, missed triggers caught up).

mod calendars;
mod consistency;
mod context;
mod error;
mod event;
mod in_flight;
mod key;
mod list_watch;
mod metrics;
pub mod notice;
pub mod plan;
pub mod read_back;
mod reason;
mod reconcile;
mod recorder;
mod strategy;
mod target;
mod trace;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, Store};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

pub use calendars::{CalendarCaches, CalendarsByScope};
pub use consistency::{
    CacheVersion, Consistency, ConsistencyStore, Freshness, TIDAL_SCHEDULERS,
    compare_resource_versions,
};
pub use context::Context;
pub use error::Error;
pub use event::EventSink;
pub use in_flight::InFlight;
pub use key::{ObjectKey, ObjectName};
pub use list_watch::{InitialList, Source, WATCH_TIMEOUT, list_watch};
pub use metrics::ControllerMetrics;
pub use reason::Reason;
pub use reconcile::{Cluster, KubeCluster, MAX_SLEEP, error_policy, reconcile};
pub use recorder::{Recorder, Reporter};
pub use trace::{TriggerTrace, TriggerTracer};

use crate::api::{CalendarKind, ClusterTidalCalendar, TidalCalendar, TidalScheduler};
use crate::clock::SystemClock;
use crate::election::WriteGate;
use crate::task::{self, TaskEnded};
use crate::telemetry::server::Readiness;

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
    // One watch for all namespaces (scope None), or one per namespace.
    let scopes: Vec<Option<String>> = if settings.namespaces.is_empty() {
        vec![None]
    } else {
        settings.namespaces.iter().cloned().map(Some).collect()
    };
    let consistency = Consistency::new(&scopes, &settings.metrics);
    // Calendars: one pair of caches per scope, each feeding its scope's controller.
    let mut calendar_watches = Vec::new();
    let mut calendars = CalendarsByScope::default();
    for scope in &scopes {
        let namespaced: Api<TidalCalendar> = match scope {
            None => Api::all(client.clone()),
            Some(namespace) => Api::namespaced(client.clone(), namespace),
        };
        let (namespaced_reader, namespaced_writer) = reflector::store();
        let (cluster_reader, cluster_writer) = reflector::store();
        calendars.insert(
            scope.clone(),
            CalendarCaches {
                namespaced: namespaced_reader,
                cluster: cluster_reader,
            },
        );
        calendar_watches.push((
            calendar_changes(namespaced, namespaced_writer),
            calendar_changes(
                Api::<ClusterTidalCalendar>::all(client.clone()),
                cluster_writer,
            ),
        ));
    }
    let ctx = Arc::new(
        Context::new(
            KubeCluster::new(client.clone(), events),
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
    let controllers = scopes.into_iter().zip(calendar_watches).map(
        |(scope, (namespaced_calendars, cluster_calendars))| {
            let api: Api<TidalScheduler> = match &scope {
                None => Api::all(client.clone()),
                Some(namespace) => Api::namespaced(client.clone(), namespace),
            };
            let (reader, writer) = reflector::store();
            let (echoes, observer) = (ctx.clone(), ctx.clone());
            let progress = ctx.consistency.progress(&scope);
            let objects = list_watch(api, settings.initial_list, WATCH_TIMEOUT, progress)
                .default_backoff()
                .modify(slim)
                .reflect(writer)
                // Counted once the event is in the cache: a reconcile on another thread must
                // not see a version counted before its object is there.
                .map_ok(move |event| {
                    observer.consistency.observe(&scope, &event);
                    event
                })
                .applied_objects()
                .try_filter(move |object| std::future::ready(!echoes.consistency.is_echo(object)));
            let (for_namespaced, for_cluster) = (reader.clone(), reader.clone());
            let controller = Controller::for_stream(objects, reader)
                .with_config(config.clone())
                // A calendar's change (or deletion) re-plans every object that uses it.
                .watches_stream(namespaced_calendars, move |calendar| {
                    calendars::users_of(&for_namespaced, &calendar, CalendarKind::TidalCalendar)
                })
                .watches_stream(cluster_calendars, move |calendar| {
                    calendars::users_of(&for_cluster, &calendar, CalendarKind::ClusterTidalCalendar)
                })
                .reconcile_all_on(gate.openings())
                .graceful_shutdown_on(changed_to_true(shutdown.clone()));
            stores.push(controller.store());
            controller
                .run(reconcile, error_policy, ctx.clone())
                .for_each(|result| {
                    log_outcome(result.err());
                    std::future::ready(())
                })
        },
    );
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

/// The objects of `api`, cached in `writer`; every change yields the object (a deleted one
/// too, already gone from the cache).
fn calendar_changes<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
) -> impl futures::Stream<Item = Result<K, kube::runtime::watcher::Error>> + Send + 'static
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    kube::runtime::watcher(api, kube::runtime::watcher::Config::default())
        .default_backoff()
        .modify(slim)
        .reflect(writer)
        .touched_objects()
        // Failures are logged here and never reach the Controller: an error in one of its
        // trigger streams holds back its other inputs, timers included, until consumed.
        .filter_map(|change| {
            std::future::ready(match change {
                Ok(calendar) => Some(Ok(calendar)),
                Err(error) => {
                    tracing::warn!(
                        kind = K::kind(&()).as_ref(),
                        %error,
                        "watching calendars failed; retrying with backoff (objects using calendars wait)"
                    );
                    None
                }
            })
        })
}

/// Drops what the controller never reads from a cached object: managedFields and
/// kubectl's last-applied annotation are most of an object's size (measured: without
/// them the cache of 10,000 objects takes a fraction of the memory).
fn slim<K: ResourceExt>(object: &mut K) {
    object.managed_fields_mut().clear();
    object
        .annotations_mut()
        .remove("kubectl.kubernetes.io/last-applied-configuration");
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
