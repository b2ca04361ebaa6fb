//! Read your own writes on a real kube-apiserver and etcd: the controller talks to the API
//! server through a proxy that delays its watch by 2.5 s while every other request goes
//! straight through, with rules firing every 2 s. Its cache is then behind its own last
//! status write when the next instant comes: the reconcile is skipped and retried (counted
//! in `stale_sync_skips_total`) instead of acting on the stale object — no status write
//! is ever rejected for a stale resourceVersion, and every instant is applied once.
//! Nothing but this controller writes the object, so any 409 would be a stale read of
//! its own: two such paths were found and closed (`controller::cache::consistency`) — a copy
//! handed to the reconcile just before the watch delivered our write (the check judged
//! the cache, which had moved on, not the copy), and a status write cancelled in flight
//! when a loaded machine let the term lapse (applied by the API server, never recorded;
//! the next term's reconcile now reads the object from the API server first).
//!
//! And the cache's version also moves with the server's bookmarks, which vouch for changes
//! the watch does not deliver.

use tidal_harness as common;

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use jiff::Timestamp;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use tidal_scheduler::api::TidalScheduler;
use tidal_scheduler::controller::{
    InitialList, Slim, Source, compare_resource_versions, list_watch,
};

use common::audit::replica_writes;
use common::cluster::TestEnv;
use common::lagging_proxy;
use common::replicas::{ALTERNATING, create_web, http_get};
use common::tide::*;
use common::wait::*;

const WATCH_LAG: Duration = Duration::from_millis(2500);

/// The deadline of one step of a test (a request, starting a process) on a loaded machine.
const STEP: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn a_lagging_watch_makes_the_controller_skip_instead_of_acting_on_stale_state() {
    let env = within(STEP, "creating the test's namespace", TestEnv::new()).await;
    let tide = within(
        STEP,
        "creating the object",
        create_web(&env, &ALTERNATING, 100),
    )
    .await;
    let control_plane = env.control_plane();
    let pki = control_plane.pki();
    let proxy = lagging_proxy::start(&pki, control_plane.client().await, WATCH_LAG).await;
    let proxied = env.kubeconfig_for_server("proxied", &format!("https://{proxy}"));
    let mut args = vec!["run", "--namespace", &env.namespace, "--log-format", "json"];
    args.extend(["--lease-namespace", &env.namespace, "--identity", "lagging"]);
    args.extend(["--metrics-address", "127.0.0.1:0"]);
    args.extend(TEST_LEASE);
    let controller = env.run_binary_with("lagging", &args, &proxied);

    let started = Timestamp::now();
    wait_status(&env, "web", "four triggers behind a lagging watch", |s| {
        s.history
            .iter()
            .filter(|h| h.schedule_time.0 > started)
            .count()
            >= 4
    })
    .await;

    let (code, metrics) = http_get(&controller, "/metrics");
    assert_eq!(code, 200);
    let skips: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("tidal_scheduler_stale_sync_skips_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no skip counter:\n{metrics}"));
    assert!(skips > 0, "no reconcile was skipped:\n{metrics}");

    let status_writes: Vec<_> = replica_writes(&env)
        .into_iter()
        .filter(|w| w.replica == "lagging" && w.resource == "tidalschedulers")
        .collect();
    assert!(!status_writes.is_empty(), "no status write audited");
    let rejected: Vec<_> = status_writes.iter().filter(|w| w.code >= 300).collect();
    assert!(
        rejected.is_empty(),
        "writes sent from a stale cache were rejected: {rejected:#?}"
    );
    let object = within(
        STEP,
        "reading the object",
        env.api::<TidalScheduler>().get("web"),
    )
    .await
    .expect("get");
    assert_no_duplicate_history(status(&object));
    assert_every_instant_accounted(&tide, &status(&object).history);
}

/// The API server, read as the controller reads it, with the requests made of it recorded
/// (`list`, `watch`, `stream`).
struct Recorded {
    api: Api<Slim<TidalScheduler>>,
    calls: Arc<Mutex<Vec<&'static str>>>,
}

impl Source for Recorded {
    type Object = TidalScheduler;

    async fn list(&self, params: &ListParams) -> kube::Result<ObjectList<TidalScheduler>> {
        self.calls.lock().unwrap().push("list");
        Source::list(&self.api, params).await
    }

    async fn watch(
        &self,
        params: &WatchParams,
        version: &str,
    ) -> kube::Result<BoxStream<'static, kube::Result<WatchEvent<TidalScheduler>>>> {
        let call = if params.send_initial_events {
            "stream"
        } else {
            "watch"
        };
        self.calls.lock().unwrap().push(call);
        Source::watch(&self.api, params, version).await
    }
}

/// A watch of an empty namespace delivers no event for a write in another namespace, but
/// the server's bookmarks (sent 2 s before each watch's timeout, here 5 s) carry a version
/// past it — which is what tells the consistency check that the cache is not behind.
#[tokio::test(flavor = "multi_thread")]
async fn bookmarks_move_the_cache_version_past_writes_the_watch_does_not_deliver() {
    let calls = bookmarks_move_the_version(InitialList::Paged).await;
    assert_eq!(calls.first(), Some(&"list"), "{calls:?}");
    assert!(!calls.contains(&"stream"), "{calls:?}");
}

/// The same with the initial list streamed (`sendInitialEvents`): the API server streams
/// (no LIST is sent), and the version of its end-of-initial-events bookmark is reported.
#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_initial_list_reports_its_version_and_bookmarks_move_it() {
    let calls = bookmarks_move_the_version(InitialList::Streaming).await;
    assert_eq!(calls.first(), Some(&"stream"), "{calls:?}");
    assert!(
        !calls.contains(&"list"),
        "the API server streamed: {calls:?}"
    );
}

/// Lists-and-watches an empty namespace, writes elsewhere, waits for a bookmark past the
/// write; the calls made of the API server.
async fn bookmarks_move_the_version(initial: InitialList) -> Vec<&'static str> {
    // Every wait has a deadline and says what it waited for: a hang names its step.
    let watched = within(STEP, "creating the watched namespace", TestEnv::new()).await;
    let elsewhere = within(STEP, "creating the other namespace", TestEnv::new()).await;
    let (report, mut progress) = tokio::sync::mpsc::unbounded_channel();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let source = Recorded {
        api: watched.api::<Slim<TidalScheduler>>(),
        calls: calls.clone(),
    };
    let mut events = list_watch(source, initial, Duration::from_secs(5), move |version| {
        let _ = report.send(version.to_owned());
    })
    .boxed();
    let (deliver, mut delivered) = tokio::sync::mpsc::unbounded_channel();
    let watch = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let _ = deliver.send(format!("{event:?}"));
        }
    });
    let listed = tokio::time::timeout(Duration::from_secs(30), progress.recv())
        .await
        .expect("the list's version reported within 30 s")
        .expect("a version");

    let written = within(
        STEP,
        "creating an object in the other namespace",
        create(
            &elsewhere,
            manifest(
                "other",
                "apps/v1",
                "Deployment",
                "web",
                "Status",
                &ALTERNATING,
            ),
        ),
    )
    .await
    .resource_version()
    .expect("a resourceVersion");
    assert_eq!(
        compare_resource_versions(&listed, &written),
        Some(Ordering::Less),
        "the write comes after the list"
    );
    let vouched = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let version = progress.recv().await.expect("the watch goes on");
            if compare_resource_versions(&version, &written) >= Some(Ordering::Equal) {
                return version;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no bookmark at or past {written} within 60 s"));
    watch.abort();
    within(STEP, "the watch task to end once aborted", async {
        let _ = watch.await;
    })
    .await;
    let mut seen = Vec::new();
    while let Ok(event) = delivered.try_recv() {
        seen.push(event);
    }
    assert_eq!(
        seen,
        ["Ok(Init)", "Ok(InitDone)"],
        "nothing but the empty list"
    );
    eprintln!("{initial:?}: listed at {listed}, wrote {written} elsewhere, bookmark at {vouched}");
    calls.lock().unwrap().clone()
}
