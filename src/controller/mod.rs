//! The controller: keeps every TidalScheduler's status — and, in `Scale` mode, its
//! target — at the tide level the rules dictate now, and wakes up at the next fire
//! instant (DESIGN §4–§5).
//!
//! ```text
//!  watch ──► kube-runtime Controller ──► reconcile ──► validate ─► plan (pure, at now)
//!  (cache)    (one timer per object:        │                          │
//!              requeue at the next instant) │◄── Action::requeue ──────┤
//!                                           ├──► target: /scale or HPA floor (Scale mode)
//!                                           ├──► status patch, guarded by resourceVersion
//!                                           └──► Events (background queue)
//! ```
//!
//! Every write passes the [`WriteGate`] first, the place leader election plugs in.

mod context;
mod event;
pub mod plan;
mod reconcile;
mod target;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

pub use context::{Context, WriteGate};
pub use event::EventSink;
pub use reconcile::{MAX_SLEEP, error_policy, reconcile};

use crate::api::TidalScheduler;
use crate::clock::SystemClock;

/// How often the memory of deleted objects is dropped.
const FORGET_EVERY: Duration = Duration::from_secs(300);

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object changed between read and write (HTTP 409); it is read again.
    #[error("the object changed while being reconciled")]
    Conflict,
    /// This process may not write now (not the leader).
    #[error("not acting: writes are gated off")]
    NotActing,
    /// The object has no namespace (TidalScheduler is namespaced; a malformed event).
    #[error("object without a namespace")]
    MissingNamespace,
    /// Reading the object failed.
    #[error("failed to read the object: {source}")]
    Read {
        /// The API error.
        source: kube::Error,
    },
    /// Writing the status failed.
    #[error("failed to write status: {source}")]
    WriteStatus {
        /// The API error.
        source: kube::Error,
    },
    /// The status could not be serialized (a bug).
    #[error("failed to serialize status: {0}")]
    Serialize(serde_json::Error),
}

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Reconciles running at once (per watched namespace); 0 means unbounded.
    pub concurrency: u16,
    /// Who reports Events (`reportingInstance`), e.g. the pod name.
    pub instance: String,
}

/// Runs the controller until `shutdown` turns true, then lets running reconciles finish.
pub async fn run(client: Client, settings: Settings, shutdown: watch::Receiver<bool>) {
    let reporter = Reporter {
        controller: "tidal-scheduler".to_owned(),
        instance: Some(settings.instance.clone()),
    };
    let events = EventSink::spawn(client.clone(), reporter);
    let ctx = Arc::new(Context::new(
        client.clone(),
        Arc::new(SystemClock),
        events,
        WriteGate::always_open(),
    ));
    let apis: Vec<Api<TidalScheduler>> = if settings.namespaces.is_empty() {
        vec![Api::all(client)]
    } else {
        settings
            .namespaces
            .iter()
            .map(|namespace| Api::namespaced(client.clone(), namespace))
            .collect()
    };
    let config = Config::default()
        .concurrency(settings.concurrency)
        .debounce(Duration::ZERO);
    let mut stores = Vec::new();
    let controllers = apis.into_iter().map(|api| {
        let (reader, writer) = reflector::store();
        let objects = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(slim)
            .reflect(writer)
            .applied_objects();
        let controller = Controller::for_stream(objects, reader)
            .with_config(config.clone())
            .graceful_shutdown_on(changed_to_true(shutdown.clone()));
        stores.push(controller.store());
        controller
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|result| {
                if let Err(error) = result {
                    tracing::debug!(%error, "reconcile request not completed");
                }
                std::future::ready(())
            })
    });
    let controllers = futures::future::join_all(controllers.collect::<Vec<_>>());
    tracing::info!(namespaces = ?settings.namespaces, concurrency = settings.concurrency, "controller started");
    tokio::select! {
        _ = controllers => {}
        () = forget_deleted(ctx.clone(), stores) => {}
    }
    tracing::info!("controller stopped");
}

/// Drops what the controller never reads from a cached object: managedFields and
/// kubectl's last-applied annotation are most of an object's size (measured: without
/// them the cache of 10,000 objects takes a fraction of the memory).
fn slim(object: &mut TidalScheduler) {
    object.managed_fields_mut().clear();
    object
        .annotations_mut()
        .remove("kubectl.kubernetes.io/last-applied-configuration");
}

/// Drops, now and then, the memory of objects gone from every watch cache.
async fn forget_deleted(ctx: Arc<Context>, stores: Vec<Store<TidalScheduler>>) {
    let mut tick = tokio::time::interval(FORGET_EVERY);
    loop {
        tick.tick().await;
        let existing: HashSet<String> = stores
            .iter()
            .flat_map(|store| store.state())
            .map(|object| reconcile::key_of(&object))
            .collect();
        ctx.forget_all_but(&existing);
        tracing::debug!(remembered = ctx.remembered(), "forgot deleted objects");
    }
}

async fn changed_to_true(mut flag: watch::Receiver<bool>) {
    // An error means the sender is gone: nobody can ask for shutdown any more, but the
    // process is ending anyway.
    let _ = flag.wait_for(|value| *value).await;
}
