//! What the controller relies on, checked on a real kube-apiserver + etcd: the CRD's
//! admission rules, the `/scale` subresource, HPA patches, Lease optimistic
//! concurrency, and the RBAC of `deploy/rbac.yaml`.

use tidal_harness as common;

use std::path::Path;

use common::cluster::{REPO, TestEnv, apply, read_manifests};
use common::fixtures::{deployment, hpa, lease, object, stateful_set, valid_tidal_scheduler};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::WatchEvent;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tidal_scheduler::api::{
    ClusterTidalCalendar, HistoryEntry, TidalCalendar, TidalScheduler, TidalSchedulerStatus,
    TriggerResult,
};
use tidal_scheduler::controller::status_patch;

/// The identity `deploy/rbac.yaml` gives the controller.
const CONTROLLER_USER: &str = "system:serviceaccount:tidal-system:tidal-scheduler";
const CONTROLLER_NAMESPACE: &str = "tidal-system";
const LEASE_NAME: &str = "tidal-scheduler";

/// The API error's HTTP code and message, or a panic if the call succeeded.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn crd_is_established_and_served() {
    let env = TestEnv::new().await;
    let crd = Api::<CustomResourceDefinition>::all(env.client.clone())
        .get("tidalschedulers.scheduling.tidal.io")
        .await
        .expect("CRD installed");
    let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
    let established = conditions.iter().find(|c| c.type_ == "Established");
    assert_eq!(established.map(|c| c.status.as_str()), Some("True"));

    // The CRD on the server is the one in deploy/: same versions, subresources.
    let served = &crd.spec.versions[0];
    assert_eq!(served.name, "v1alpha1");
    assert!(
        served
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some())
    );

    // Short names work through discovery, like `kubectl get tides`.
    let created = env
        .raw_api::<TidalScheduler>()
        .create(
            &PostParams::default(),
            &object(valid_tidal_scheduler("web")),
        )
        .await
        .expect("a valid object is accepted");
    // Defaults from the schema are filled in by the apiserver.
    assert_eq!(created.data["spec"]["apply"], "Status");
    assert_eq!(created.data["spec"]["historyLimit"], 10);
}

#[tokio::test]
async fn every_example_manifest_is_accepted() {
    let env = TestEnv::new().await;
    let examples = Path::new(REPO).join("deploy/examples");
    let mut accepted = Vec::new();
    for entry in std::fs::read_dir(&examples).expect("deploy/examples") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        for mut manifest in read_manifests(&path) {
            let kind = manifest
                .types
                .as_ref()
                .map(|t| t.kind.clone())
                .unwrap_or_default();
            if kind == "ClusterTidalCalendar" {
                // Cluster-scoped: named after the test's namespace.
                manifest.metadata.name = Some(format!("{}-{}", env.namespace, manifest.name_any()));
            } else {
                // Into the test's namespace, whatever the example says.
                manifest.metadata.namespace = Some(env.namespace.clone());
            }
            apply(&env.client, &manifest, None)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if kind == "TidalScheduler" {
                accepted.push(manifest.name_any());
            }
        }
    }
    assert!(accepted.len() >= 5, "only {accepted:?} accepted");
    let stored = env
        .raw_api::<TidalScheduler>()
        .list(&ListParams::default())
        .await
        .expect("list");
    assert_eq!(stored.items.len(), accepted.len());
}

/// One broken object per schema rule; the apiserver must reject each with a 422
/// whose message names the field (and says what is wrong with it).
#[tokio::test]
async fn invalid_objects_are_rejected_naming_the_field() {
    type Breaker = fn(&mut Value);
    fn rules(o: &mut Value) -> &mut Value {
        &mut o["spec"]["triggers"]["times"]["rules"]
    }
    fn remove(value: &mut Value, key: &str) {
        value.as_object_mut().expect("an object").remove(key);
    }
    let cases: Vec<(&str, Breaker, &[&str])> = vec![
        (
            "no target",
            |o| remove(&mut o["spec"], "targetRef"),
            &["spec.targetRef: Required value"],
        ),
        (
            "no target apiVersion",
            |o| remove(&mut o["spec"]["targetRef"], "apiVersion"),
            &["spec.targetRef.apiVersion: Required value"],
        ),
        (
            "no target kind",
            |o| remove(&mut o["spec"]["targetRef"], "kind"),
            &["spec.targetRef.kind: Required value"],
        ),
        (
            "no target name",
            |o| remove(&mut o["spec"]["targetRef"], "name"),
            &["spec.targetRef.name: Required value"],
        ),
        (
            "empty target name",
            |o| o["spec"]["targetRef"]["name"] = json!(""),
            &["spec.targetRef.name", "at least 1 chars"],
        ),
        (
            "target name too long",
            |o| o["spec"]["targetRef"]["name"] = json!("n".repeat(254)),
            &["spec.targetRef.name", "Too long: may not be more than 253"],
        ),
        (
            "target name with a path in it",
            |o| o["spec"]["targetRef"]["name"] = json!("web/../../secrets"),
            &["spec.targetRef.name", "must be a DNS-1123 subdomain"],
        ),
        (
            "target name escaped",
            |o| o["spec"]["targetRef"]["name"] = json!("web%2Fx?watch=1"),
            &["spec.targetRef.name", "must be a DNS-1123 subdomain"],
        ),
        (
            "target name of dots",
            |o| o["spec"]["targetRef"]["name"] = json!(".."),
            &["spec.targetRef.name", "must be a DNS-1123 subdomain"],
        ),
        (
            "target API version with a path in it",
            |o| o["spec"]["targetRef"]["apiVersion"] = json!("apps/../v1"),
            &[
                "spec.targetRef.apiVersion",
                "must be GROUP/VERSION or VERSION",
            ],
        ),
        (
            "target namespace with a path in it",
            |o| o["spec"]["targetRef"]["namespace"] = json!("a/b"),
            &["spec.targetRef.namespace", "must be a DNS-1123 label"],
        ),
        (
            "no triggers",
            |o| remove(&mut o["spec"], "triggers"),
            &["spec.triggers: Required value"],
        ),
        (
            "no rules",
            |o| *rules(o) = json!([]),
            &["spec.triggers.times.rules", "at least 1 items"],
        ),
        (
            "101 rules",
            |o| {
                *rules(o) = (0..101)
                .map(|i| json!({"name": format!("r{i}"), "cron": "CRON_TZ=UTC 0 0 8 * * *", "replicas": 1}))
                .collect();
            },
            &["spec.triggers.times.rules: Too many", "at most 100"],
        ),
        (
            "duplicate rule names",
            |o| rules(o)[1]["name"] = json!("morning"),
            &["spec.triggers.times.rules[1]: Duplicate value"],
        ),
        (
            "rule name not a DNS label",
            |o| rules(o)[1]["name"] = json!("Bad_Name"),
            &["spec.triggers.times.rules[1].name", "should match"],
        ),
        (
            "no cron",
            |o| remove(&mut rules(o)[0], "cron"),
            &["spec.triggers.times.rules[0].cron: Required value"],
        ),
        (
            "empty cron",
            |o| rules(o)[1]["cron"] = json!(""),
            &["spec.triggers.times.rules[1].cron", "at least 1 chars"],
        ),
        (
            "cron too long",
            |o| rules(o)[1]["cron"] = json!(format!("0 0 8 * * * {}", "x".repeat(256))),
            &[
                "spec.triggers.times.rules[1].cron",
                "Too long: may not be more than 256",
            ],
        ),
        (
            "no replicas",
            |o| remove(&mut rules(o)[0], "replicas"),
            &["spec.triggers.times.rules[0].replicas: Required value"],
        ),
        (
            "negative replicas",
            |o| rules(o)[0]["replicas"] = json!(-1),
            &[
                "spec.triggers.times.rules[0].replicas",
                "greater than or equal to 0",
            ],
        ),
        (
            "historyLimit 0",
            |o| o["spec"]["historyLimit"] = json!(0),
            &["spec.historyLimit", "greater than or equal to 1"],
        ),
        (
            "historyLimit 101",
            |o| o["spec"]["historyLimit"] = json!(101),
            &["spec.historyLimit", "less than or equal to 100"],
        ),
        (
            "unknown apply mode",
            |o| o["spec"]["apply"] = json!("Patch"),
            &[
                "spec.apply: Unsupported value: \"Patch\"",
                "\"Status\", \"Scale\"",
            ],
        ),
        (
            "time zone given twice",
            |o| rules(o)[0]["timeZone"] = json!("UTC"),
            &[
                "spec.triggers.times.rules[0].timeZone",
                "time zone given twice",
            ],
        ),
        (
            "no time zone",
            |o| remove(&mut rules(o)[1], "timeZone"),
            &["spec.triggers.times.rules[1].cron", "no time zone"],
        ),
        (
            "null time zone",
            |o| rules(o)[1]["timeZone"] = Value::Null,
            &["spec.triggers.times.rules[1].cron", "no time zone"],
        ),
        (
            "empty time zone",
            |o| rules(o)[1]["timeZone"] = json!(""),
            &["spec.triggers.times.rules[1].timeZone", "at least 1 chars"],
        ),
        (
            "@every zero",
            |o| rules(o)[0]["cron"] = json!("CRON_TZ=UTC @every 0s"),
            &[
                "spec.triggers.times.rules[0].cron",
                "@every needs a positive duration",
            ],
        ),
        (
            "@every negative",
            |o| rules(o)[1]["cron"] = json!("@every -1h"),
            &[
                "spec.triggers.times.rules[1].cron",
                "@every needs a positive duration",
            ],
        ),
        (
            "@every zero in units",
            |o| rules(o)[1]["cron"] = json!("@every 0h0.0m"),
            &[
                "spec.triggers.times.rules[1].cron",
                "@every needs a positive duration",
            ],
        ),
        (
            "calendar name with a path in it",
            |o| rules(o)[0]["skipDays"] = json!([{"name": "../holidays"}]),
            &[
                "spec.triggers.times.rules[0].skipDays[0].name",
                "must be a DNS-1123 subdomain",
            ],
        ),
        (
            "calendar name in capitals",
            |o| rules(o)[1]["onlyDays"] = json!([{"kind": "ClusterTidalCalendar", "name": "UK"}]),
            &[
                "spec.triggers.times.rules[1].onlyDays[0].name",
                "must be a DNS-1123 subdomain",
            ],
        ),
    ];

    let env = TestEnv::new().await;
    let api = env.raw_api::<TidalScheduler>();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    // The unbroken object passes, so each rejection below is the breaker's doing.
    api.create(&dry_run, &object(valid_tidal_scheduler("valid")))
        .await
        .expect("the base object is valid");
    // Positive durations pass the `@every` rule, sub-second ones too (robfig: one second).
    for every in ["10s", "0.5s", "1h0m", "100ms", "0h1m", "+2s"] {
        let mut value = valid_tidal_scheduler("every");
        rules(&mut value)[0]["cron"] = json!(format!("CRON_TZ=UTC @every {every}"));
        let admitted = api.create(&dry_run, &object(value)).await;
        assert!(admitted.is_ok(), "@every {every}: {admitted:?}");
    }

    let mut failures = Vec::new();
    for (index, (case, break_it, expected)) in cases.iter().enumerate() {
        let mut value = valid_tidal_scheduler(&format!("invalid-{index}"));
        break_it(&mut value);
        match api.create(&dry_run, &object(value)).await {
            Err(kube::Error::Api(status)) if status.code == 422 => {
                let missing: Vec<_> = expected
                    .iter()
                    .filter(|needle| !status.message.contains(**needle))
                    .collect();
                if !missing.is_empty() {
                    failures.push(format!("{case}: {:?} lacks {missing:?}", status.message));
                }
            }
            other => failures.push(format!("{case}: expected 422, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn replicas_patch(replicas: i32) -> Patch<Value> {
    Patch::Merge(json!({ "spec": { "replicas": replicas } }))
}

#[tokio::test]
async fn scale_subresource_patch_changes_spec_replicas() {
    let env = TestEnv::new().await;
    let deployments: Api<Deployment> = env.api();
    deployments
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create Deployment");
    let scale = deployments
        .patch_scale("web", &PatchParams::default(), &replicas_patch(7))
        .await
        .expect("patch /scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(7));
    let stored = deployments.get("web").await.expect("get Deployment");
    assert_eq!(stored.spec.and_then(|s| s.replicas), Some(7));

    let stateful_sets: Api<StatefulSet> = env.api();
    stateful_sets
        .create(&PostParams::default(), &stateful_set("db"))
        .await
        .expect("create StatefulSet");
    stateful_sets
        .patch_scale("db", &PatchParams::default(), &replicas_patch(3))
        .await
        .expect("patch /scale");
    let stored = stateful_sets.get("db").await.expect("get StatefulSet");
    assert_eq!(stored.spec.and_then(|s| s.replicas), Some(3));
}

#[tokio::test]
async fn hpa_min_replicas_can_be_patched() {
    let env = TestEnv::new().await;
    let hpas: Api<HorizontalPodAutoscaler> = env.api();
    hpas.create(&PostParams::default(), &hpa("web", "web"))
        .await
        .expect("create HPA");
    let patch = Patch::Merge(json!({ "spec": { "minReplicas": 6 } }));
    hpas.patch("web", &PatchParams::default(), &patch)
        .await
        .expect("patch minReplicas");
    let stored = hpas.get("web").await.expect("get HPA").spec.expect("spec");
    assert_eq!(stored.min_replicas, Some(6));
    assert_eq!(stored.max_replicas, 20);
}

#[tokio::test]
async fn lease_replace_with_stale_resource_version_conflicts() {
    let env = TestEnv::new().await;
    let leases: Api<Lease> = env.api();
    let first = leases
        .create(&PostParams::default(), &lease("leader", "replica-a"))
        .await
        .expect("create Lease");

    // Replica b takes over with the resourceVersion it read: accepted.
    let mut taken = first.clone();
    taken.spec.as_mut().expect("spec").holder_identity = Some("replica-b".into());
    let after_takeover = leases
        .replace("leader", &PostParams::default(), &taken)
        .await
        .expect("replace with the current resourceVersion");
    assert_ne!(after_takeover.resource_version(), first.resource_version());

    // Replica a renews from its stale read: 409, and the Lease stays b's.
    let (code, message) = api_error(
        leases
            .replace("leader", &PostParams::default(), &first)
            .await,
    );
    assert_eq!(code, 409, "{message}");
    let stored = leases.get("leader").await.expect("get Lease");
    assert_eq!(
        stored.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("replica-b")
    );
}

/// The history entry of rule `r<n>`, scheduled `n` seconds after 2026-12-01.
fn history_entry(n: i64) -> HistoryEntry {
    let at = jiff::Timestamp::from_second(1_764_547_200 + n).expect("an instant");
    HistoryEntry {
        rule: format!("r{n}"),
        schedule_time: Time(at),
        execution_time: MicroTime(at),
        replicas: 3,
        result: TriggerResult::Succeeded,
        catch_up: false,
        superseded: 0,
        message: String::new(),
        trace_id: None,
    }
}

/// The controller writes status as a JSON patch that sets `metadata.resourceVersion` to
/// the version it read and edits the history by index, its cache holding only the
/// newest entry. On the API server: a current version leaves exactly the newest
/// `historyLimit` entries, entries the cache never held included; a stale one is a 409.
#[tokio::test]
async fn the_status_patch_is_conditional_and_edits_a_history_held_short() {
    let env = TestEnv::new().await;
    let api: Api<TidalScheduler> = env.api();
    let mut manifest = valid_tidal_scheduler("web");
    manifest["spec"]["historyLimit"] = json!(3);
    let manifest: TidalScheduler = serde_json::from_value(manifest).expect("a TidalScheduler");
    let created = api
        .create(&PostParams::default(), &manifest)
        .await
        .expect("create");
    let write = |stored: &TidalScheduler, new: &TidalSchedulerStatus| {
        status_patch(
            stored.status.as_ref(),
            new,
            3,
            stored.resource_version().as_deref(),
        )
        .expect("a patch")
    };
    let params = PatchParams::default();

    let first = TidalSchedulerStatus {
        desired_replicas: Some(3),
        history: vec![history_entry(3), history_entry(2), history_entry(1)],
        ..TidalSchedulerStatus::default()
    };
    let stored = api
        .patch_status("web", &params, &Patch::Json::<()>(write(&created, &first)))
        .await
        .expect("the first status write");
    assert_eq!(stored.status.as_ref(), Some(&first));

    // As the cache holds it: the newest entry, two more counted.
    let mut held = stored.clone();
    let status = held.status.as_mut().expect("a status");
    status.history.truncate(1);
    status.history_omitted = 2;
    let mut next = status.clone();
    next.history.insert(0, history_entry(4));
    next.desired_replicas = Some(5);
    let patch = write(&held, &next);
    let written = api
        .patch_status("web", &params, &Patch::Json::<()>(patch.clone()))
        .await
        .expect("the second status write")
        .status
        .expect("a status");
    let expected = [history_entry(4), history_entry(3), history_entry(2)];
    assert_eq!(written.history, expected);
    assert_eq!(written.desired_replicas, Some(5));

    // The same patch again carries a version no longer current: refused, nothing changed.
    let (code, message) = api_error(
        api.patch_status("web", &params, &Patch::Json::<()>(patch))
            .await,
    );
    assert_eq!(code, 409, "{message}");
    let now = api.get_status("web").await.expect("get").status;
    assert_eq!(now.map(|s| s.history), Some(expected.to_vec()));
}

/// Applies `deploy/namespace.yaml` and `deploy/rbac.yaml` (idempotent; the other
/// tests of this binary may share the cluster-scoped objects).
async fn install_rbac(client: &Client) {
    for file in ["deploy/namespace.yaml", "deploy/rbac.yaml"] {
        for manifest in read_manifests(&Path::new(REPO).join(file)) {
            apply(client, &manifest, None)
                .await
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
}

fn assert_forbidden<T: std::fmt::Debug>(what: &str, result: kube::Result<T>) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

#[tokio::test]
async fn rbac_grants_the_controller_what_it_needs_and_nothing_more() {
    let env = TestEnv::new().await;
    install_rbac(&env.client).await;
    let controller = env.control_plane().client_as(CONTROLLER_USER).await;
    let ns = env.namespace.as_str();

    // Objects the controller works on, created by an admin.
    let admin_schedulers = env.raw_api::<TidalScheduler>();
    admin_schedulers
        .create(
            &PostParams::default(),
            &object(valid_tidal_scheduler("web")),
        )
        .await
        .expect("create TidalScheduler");
    env.api::<Deployment>()
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create Deployment");
    env.api::<StatefulSet>()
        .create(&PostParams::default(), &stateful_set("db"))
        .await
        .expect("create StatefulSet");
    env.api::<HorizontalPodAutoscaler>()
        .create(&PostParams::default(), &hpa("web", "web"))
        .await
        .expect("create HPA");
    env.api::<Secret>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": "credentials" }, "stringData": { "token": "s3cr3t" },
            }))
            .expect("a Secret"),
        )
        .await
        .expect("create Secret");

    // --- allowed -------------------------------------------------------------------
    let resource = kube::api::ApiResource::erase::<TidalScheduler>(&());
    let all_schedulers: Api<DynamicObject> = Api::all_with(controller.clone(), &resource);
    let listed = all_schedulers
        .list(&ListParams::default())
        .await
        .expect("list TidalSchedulers in all namespaces");
    let mut watch = Box::pin(
        all_schedulers
            .watch(&kube::api::WatchParams::default().timeout(5), "0")
            .await
            .expect("watch TidalSchedulers"),
    );
    let first = futures::StreamExt::next(&mut watch)
        .await
        .expect("a watch event");
    assert!(
        matches!(first, Ok(WatchEvent::Added(_))),
        "watch started from 0 replays the objects, got {first:?}"
    );
    assert!(!listed.items.is_empty());

    let schedulers: Api<DynamicObject> = Api::namespaced_with(controller.clone(), ns, &resource);
    schedulers
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "desiredReplicas": 10 } })),
        )
        .await
        .expect("patch TidalScheduler status");

    let event: Event = serde_json::from_value(json!({
        "metadata": { "name": "web.tidal-test" },
        "eventTime": "2026-11-29T08:00:00.000000Z",
        "reportingController": "scheduling.tidal.io/tidal-scheduler",
        "reportingInstance": "tidal-scheduler-0",
        "action": "Scale",
        "reason": "Triggered",
        "type": "Normal",
        "note": "rule morning: 10 replicas",
        "regarding": { "apiVersion": "scheduling.tidal.io/v1alpha1", "kind": "TidalScheduler",
                       "name": "web", "namespace": ns },
    }))
    .expect("an Event");
    let events: Api<Event> = Api::namespaced(controller.clone(), ns);
    events
        .create(&PostParams::default(), &event)
        .await
        .expect("create Event");
    events
        .patch("web.tidal-test", &PatchParams::default(),
            &Patch::Merge(json!({ "series": { "count": 2, "lastObservedTime": "2026-11-29T08:00:01.000000Z" } })))
        .await
        .expect("patch Event");

    let deployments: Api<Deployment> = Api::namespaced(controller.clone(), ns);
    deployments
        .get_metadata("web")
        .await
        .expect("get a Deployment (existence check)");
    deployments
        .get_scale("web")
        .await
        .expect("get Deployment /scale");
    deployments
        .patch_scale("web", &PatchParams::default(), &replicas_patch(4))
        .await
        .expect("patch Deployment /scale");
    let stateful_sets: Api<StatefulSet> = Api::namespaced(controller.clone(), ns);
    stateful_sets
        .get_scale("db")
        .await
        .expect("get StatefulSet /scale");
    stateful_sets
        .patch_scale("db", &PatchParams::default(), &replicas_patch(2))
        .await
        .expect("patch StatefulSet /scale");

    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(controller.clone(), ns);
    hpas.list(&ListParams::default()).await.expect("list HPAs");
    hpas.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "minReplicas": 3 } })),
    )
    .await
    .expect("patch HPA minReplicas");

    // The Lease: create (or find, when the cluster is reused), read, renew.
    let leases: Api<Lease> = Api::namespaced(controller.clone(), CONTROLLER_NAMESPACE);
    let held = match leases
        .create(&PostParams::default(), &lease(LEASE_NAME, "replica-a"))
        .await
    {
        Ok(created) => created,
        Err(kube::Error::Api(status)) if status.code == 409 => {
            leases.get(LEASE_NAME).await.expect("get Lease")
        }
        Err(e) => panic!("create Lease: {e}"),
    };
    leases.get(LEASE_NAME).await.expect("get Lease");
    leases
        .replace(LEASE_NAME, &PostParams::default(), &held)
        .await
        .expect("renew (update) Lease");

    // Calendars: read in the namespace and cluster-wide, never written.
    let calendars: Api<TidalCalendar> = Api::namespaced(controller.clone(), ns);
    calendars
        .list(&ListParams::default())
        .await
        .expect("list TidalCalendars");
    Api::<TidalCalendar>::all(controller.clone())
        .list(&ListParams::default())
        .await
        .expect("list TidalCalendars cluster-wide");
    Api::<ClusterTidalCalendar>::all(controller.clone())
        .list(&ListParams::default())
        .await
        .expect("list ClusterTidalCalendars");
    let calendar: TidalCalendar = serde_json::from_value(json!({
        "apiVersion": "scheduling.tidal.io/v1alpha1",
        "kind": "TidalCalendar",
        "metadata": { "name": "holidays" },
        "spec": { "timeZone": "UTC", "days": [] },
    }))
    .unwrap();
    assert_forbidden(
        "create a TidalCalendar",
        calendars.create(&PostParams::default(), &calendar).await,
    );

    // --- forbidden -----------------------------------------------------------------
    assert_forbidden(
        "update a Deployment's spec",
        deployments
            .patch("web", &PatchParams::default(), &replicas_patch(9))
            .await,
    );
    let mut whole = env.api::<Deployment>().get("web").await.expect("admin get");
    whole.metadata.managed_fields = None;
    assert_forbidden(
        "replace a Deployment",
        deployments
            .replace("web", &PostParams::default(), &whole)
            .await,
    );
    let secrets: Api<Secret> = Api::namespaced(controller.clone(), ns);
    assert_forbidden("read a Secret", secrets.get("credentials").await);
    assert_forbidden("list Secrets", secrets.list(&ListParams::default()).await);
    assert_forbidden(
        "list Secrets cluster-wide",
        Api::<Secret>::all(controller.clone())
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "edit a TidalScheduler's spec",
        schedulers
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "historyLimit": 3 } })),
            )
            .await,
    );
    assert_forbidden(
        "read another component's Lease",
        Api::<Lease>::namespaced(controller.clone(), CONTROLLER_NAMESPACE)
            .get("someone-else")
            .await,
    );
    let delete = DeleteParams::default();
    assert_forbidden(
        "delete a TidalScheduler",
        schedulers.delete("web", &delete).await,
    );
    assert_forbidden(
        "delete a Deployment",
        deployments.delete("web", &delete).await,
    );
    assert_forbidden(
        "delete a StatefulSet",
        stateful_sets.delete("db", &delete).await,
    );
    assert_forbidden("delete an HPA", hpas.delete("web", &delete).await);
    assert_forbidden(
        "delete an Event",
        events.delete("web.tidal-test", &delete).await,
    );
    assert_forbidden("delete its Lease", leases.delete(LEASE_NAME, &delete).await);
    assert_forbidden(
        "delete a namespace",
        Api::<k8s_openapi::api::core::v1::Namespace>::all(controller.clone())
            .delete(ns, &delete)
            .await,
    );
    assert_forbidden(
        "delete pods",
        Api::<k8s_openapi::api::core::v1::Pod>::namespaced(controller.clone(), ns)
            .delete_collection(&delete, &ListParams::default())
            .await,
    );

    // The admin sees the controller's writes took effect.
    let stored = admin_schedulers
        .get_status("web")
        .await
        .expect("get status");
    assert_eq!(stored.data["status"]["desiredReplicas"], 10);
}

#[tokio::test]
async fn the_controller_deployment_is_accepted_and_hardened() {
    use clap::Parser;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use tidal_scheduler::cli::Cli;
    use tidal_scheduler::controller::SHUTDOWN_GRACE;

    let env = TestEnv::new().await;
    install_rbac(&env.client).await;
    for manifest in read_manifests(&Path::new(REPO).join("deploy/controller.yaml")) {
        apply(&env.client, &manifest, None)
            .await
            .unwrap_or_else(|e| panic!("deploy/controller.yaml: {e}"));
    }
    let system = |client: &Client| -> (Api<Deployment>, Api<ServiceAccount>) {
        (
            Api::namespaced(client.clone(), "tidal-system"),
            Api::namespaced(client.clone(), "tidal-system"),
        )
    };
    let (deployments, accounts) = system(&env.client);
    let stored = deployments
        .get("tidal-scheduler")
        .await
        .expect("Deployment");
    let spec = stored.spec.expect("spec");
    assert!(spec.replicas.unwrap_or(1) >= 2, "several replicas");
    let pod = spec.template.spec.expect("pod spec");
    let account = pod.service_account_name.clone().expect("a ServiceAccount");
    accounts
        .get(&account)
        .await
        .expect("the ServiceAccount of rbac.yaml");
    let grace = pod.termination_grace_period_seconds.expect("grace period");
    assert!(
        grace as u64 > SHUTDOWN_GRACE.as_secs(),
        "drain fits the grace period"
    );
    let pod_security = pod.security_context.clone().expect("pod securityContext");
    assert_eq!(pod_security.run_as_non_root, Some(true));

    let container = &pod.containers[0];
    let mut argv = vec!["tidal-scheduler".to_owned()];
    argv.extend(container.args.clone().unwrap_or_default());
    Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("args {argv:?}: {e}"));
    let from_field = |name: &str| {
        container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.clone())
    };
    assert_eq!(from_field("POD_NAME").as_deref(), Some("metadata.name"));
    assert_eq!(
        from_field("POD_NAMESPACE").as_deref(),
        Some("metadata.namespace")
    );
    let port = &container.ports.as_ref().expect("ports")[0];
    assert_eq!(
        port.container_port, 8080,
        "the default --metrics-address port"
    );
    let probe_path = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.path.clone())
    };
    assert_eq!(
        probe_path(&container.liveness_probe).as_deref(),
        Some("/healthz")
    );
    assert_eq!(
        probe_path(&container.readiness_probe).as_deref(),
        Some("/readyz")
    );
    let security = container.security_context.clone().expect("securityContext");
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(
        security.capabilities.and_then(|c| c.drop),
        Some(vec!["ALL".to_owned()])
    );

    let budgets: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), "tidal-system");
    let budget = budgets
        .get("tidal-scheduler")
        .await
        .expect("PodDisruptionBudget");
    assert!(budget.spec.and_then(|s| s.max_unavailable).is_some());
}

#[tokio::test]
async fn kubectl_get_shows_the_next_trigger_instant() {
    let env = TestEnv::new().await;
    env.raw_api::<TidalScheduler>()
        .create(
            &PostParams::default(),
            &object(valid_tidal_scheduler("web")),
        )
        .await
        .expect("create");
    // An instant in the future, as the controller writes it: kubectl prints `<invalid>`
    // for a future value of a `date` column.
    let next = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(3))
        .expect("in range")
        .round(jiff::Unit::Second)
        .expect("round");
    let status = json!({ "status": {
        "desiredReplicas": 10,
        "activeRule": "morning",
        "nextTriggerTime": next.to_string(),
        "nextTriggerRule": "night",
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "TriggerActive", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }],
    }});
    env.raw_api::<TidalScheduler>()
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch status");

    let output = env
        .control_plane()
        .kubectl()
        .args(["get", "tidal", "web", "--namespace", &env.namespace])
        .output()
        .expect("run kubectl");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines.first().map(|header| header.join(" ")),
        Some("NAME TARGET DESIRED ACTIVE RULE NEXT TRIGGER READY AGE".to_owned()),
        "{stdout}"
    );
    let row = lines.get(1).unwrap_or_else(|| panic!("no row: {stdout}"));
    assert_eq!(
        &row[..6],
        ["web", "web", "10", "morning", &next.to_string(), "True"],
        "{stdout}"
    );
    assert!(!stdout.contains("<invalid>"), "{stdout}");
}
