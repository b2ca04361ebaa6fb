//! The controller (`tidal-scheduler run`) against a real kube-apiserver and etcd: status
//! right after create, on-time triggers, edits, conflicts, each apply mode, invalid
//! specs, missing targets, restart catch-up, suspension, deletion, and 200 objects
//! firing in the same second. Each test runs its own controller on its own namespace.

use tidal_harness as common;

use std::sync::LazyLock;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use tidal_scheduler::api::{NoCalendars, TidalScheduler, TriggerResult, validate};

use common::api_requests::Requests;
use common::cluster::TestEnv;
use common::fixtures::{
    deployment, hpa, install_widget_crd, stateful_set, widget, widget_resource,
};
use common::holding_proxy::HoldingProxy;
use common::tide::*;
use common::wait::*;

/// The base rule's cron: daily, 12 hours away from when the tests started.
static DAILY: LazyLock<String> = LazyLock::new(daily_far_from_now);

/// A manifest whose one rule, `base`, sets `replicas` daily (at a time of day far from the
/// tests), on the target `(apiVersion, kind, name)`.
fn daily(name: &str, target: (&str, &str, &str), apply: &str, replicas: i32) -> serde_json::Value {
    let (api_version, kind, target) = target;
    manifest(
        name,
        api_version,
        kind,
        target,
        apply,
        &[("base", DAILY.as_str(), replicas)],
    )
}

async fn create_deployment(env: &TestEnv, name: &str) {
    env.api::<Deployment>()
        .create(&PostParams::default(), &deployment(name))
        .await
        .expect("create Deployment");
}

/// Creates `name` (Status mode, target Deployment `web`) with the daily base rule and
/// waits until the controller has reconciled it: the controller is up and acting.
async fn create_running(env: &TestEnv, name: &str) {
    create(
        env,
        daily(name, ("apps/v1", "Deployment", "web"), "Status", 1),
    )
    .await;
    wait_status(env, name, "the first reconcile", |s| {
        s.observed_generation == Some(1)
    })
    .await;
}

/// Creates the Deployment `web` and the HPA `web-hpa` (1 to 20) scaling it.
async fn create_deployment_with_hpa(env: &TestEnv) -> Api<HorizontalPodAutoscaler> {
    create_deployment(env, "web").await;
    let hpas: Api<HorizontalPodAutoscaler> = env.api();
    hpas.create(&PostParams::default(), &hpa("web-hpa", "web"))
        .await
        .expect("create HPA");
    hpas
}

/// Waits until HPA `web-hpa` has `minReplicas` `min`.
async fn wait_hpa_min(hpas: &Api<HorizontalPodAutoscaler>, min: i32) -> HorizontalPodAutoscaler {
    let what = format!("minReplicas {min}");
    wait_for(
        hpas,
        "web-hpa",
        &what,
        |h: Option<&HorizontalPodAutoscaler>| {
            h.and_then(|h| h.spec.as_ref())
                .is_some_and(|s| s.min_replicas == Some(min))
        },
    )
    .await
}

async fn deployment_replicas(env: &TestEnv, name: &str, replicas: i32) -> Deployment {
    wait_for(
        &env.api::<Deployment>(),
        name,
        &format!("{replicas} replicas"),
        move |d: Option<&Deployment>| {
            d.and_then(|d| d.spec.as_ref())
                .is_some_and(|s| s.replicas == Some(replicas))
        },
    )
    .await
}

#[tokio::test]
async fn status_is_complete_right_after_create() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_deployment(&env, "web").await;
    let manifest = manifest(
        "web",
        "apps/v1",
        "Deployment",
        "web",
        "Status",
        &[
            ("morning", "CRON_TZ=Asia/Shanghai 0 0 8 * * *", 20),
            ("night", "CRON_TZ=Asia/Shanghai 0 0 23 * * *", 5),
        ],
    );
    let created = create(&env, manifest).await;
    let object = wait_status(&env, "web", "observedGeneration 1", |s| {
        s.observed_generation == Some(1)
    })
    .await;
    let status = status(&object);

    let created_at = created.metadata.creation_timestamp.clone().unwrap().0;
    let tide = validate(&created, &NoCalendars, created_at)
        .expect("valid")
        .tide;
    let level = tide.level_at(Timestamp::now()).expect("a level");
    let next = tide.next_after(Timestamp::now()).expect("a next trigger");
    assert_eq!(status.desired_replicas, Some(level.replicas));
    assert_eq!(status.active_rule.as_deref(), Some(level.rule.as_str()));
    assert_eq!(
        status.last_trigger_time.as_ref().unwrap().0,
        level.schedule_time
    );
    assert_eq!(
        status.last_triggered_rule.as_deref(),
        Some(level.rule.as_str())
    );
    assert_eq!(
        status.next_trigger_time.as_ref().unwrap().0,
        next.schedule_time
    );
    assert_eq!(
        status.next_trigger_rule.as_deref(),
        Some(next.rule.as_str())
    );
    assert_eq!(status.rules.len(), 2);
    for (rule, rule_status) in tide.rules().iter().zip(&status.rules) {
        assert_eq!(rule_status.name, rule.name);
        assert_eq!(
            rule_status.next_schedule_time.as_ref().map(|t| t.0),
            rule.cron.next_after(Timestamp::now())
        );
        assert!(rule_status.last_schedule_time.is_some());
    }
    assert_eq!(status.history.len(), 1);
    let first = &status.history[0];
    assert_eq!(first.rule, level.rule);
    assert_eq!(first.schedule_time.0, level.schedule_time);
    assert_eq!(first.replicas, level.replicas);
    assert_eq!(first.result, TriggerResult::Succeeded);
    assert!(
        first.catch_up,
        "a level that came due before creation is a catch-up"
    );
    assert_eq!(first.superseded, 0);
    assert!(first.execution_time.0 >= created_at);
    assert_ne!(
        first.execution_time.0.subsec_microsecond(),
        0,
        "executionTime keeps microseconds (flaky only one time in a million)"
    );
    let (ready, reason, message) = ready(status);
    assert_eq!((ready.as_str(), reason.as_str()), ("True", "TriggerActive"));
    assert!(message.contains(&level.rule), "{message}");
    wait_event(&env, "web", "CaughtUp", &level.rule).await;
}

#[tokio::test]
async fn a_rule_fires_on_time_with_correct_fields() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_deployment(&env, "web").await;
    create_running(&env, "web").await;
    let at = second_after(Duration::from_millis(2500));
    let soon = once_at(at);
    set_rules(
        &env,
        "web",
        &[("base", DAILY.as_str(), 1), ("soon", &soon, 7)],
    )
    .await;
    let object = env.api::<TidalScheduler>().get("web").await.expect("get");
    assert!(
        Timestamp::now() < at,
        "the edit took the controller past the instant"
    );
    assert_eq!(status(&object).next_trigger_rule.as_deref(), Some("soon"));
    assert_eq!(status(&object).next_trigger_time.as_ref().unwrap().0, at);
    assert_eq!(status(&object).desired_replicas, Some(1));

    let object = wait_status(&env, "web", "the trigger of `soon`", |s| {
        entry(s, "soon", at).is_some()
    })
    .await;
    let status = status(&object);
    let fired = entry(status, "soon", at).unwrap();
    assert_eq!(fired.replicas, 7);
    assert_eq!(fired.result, TriggerResult::Succeeded);
    assert!(!fired.catch_up, "applied by the timer armed for it");
    assert_eq!(fired.superseded, 0);
    assert!(fired.execution_time.0 >= at, "never fires early");
    assert_eq!(status.desired_replicas, Some(7));
    assert_eq!(status.active_rule.as_deref(), Some("soon"));
    assert_eq!(status.last_trigger_time.as_ref().unwrap().0, at);
    assert_eq!(status.history.len(), 2);
    assert_eq!(status.next_trigger_rule.as_deref(), Some("base"));
    // As stored: an on-time entry leaves `catchUp` and `superseded` out (the CRD defaults
    // neither), the creation's catch-up says so.
    let raw = env
        .raw_api::<TidalScheduler>()
        .get("web")
        .await
        .expect("get");
    let history = &raw.data["status"]["history"];
    assert_eq!(history[0]["rule"], "soon", "{history}");
    assert_eq!(history[0].get("catchUp"), None, "{history}");
    assert_eq!(history[0].get("superseded"), None, "{history}");
    assert_eq!(history[1]["catchUp"], true, "{history}");
    wait_event(&env, "web", "Triggered", "rule soon set 7 replicas").await;
}

#[tokio::test]
async fn editing_the_rule_in_effect_applies_at_once() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_deployment(&env, "web").await;
    create(
        &env,
        daily("web", ("apps/v1", "Deployment", "web"), "Scale", 3),
    )
    .await;
    deployment_replicas(&env, "web", 3).await;
    let before = wait_status(&env, "web", "level 3", |s| s.desired_replicas == Some(3)).await;

    let edit = json!({ "spec": { "triggers": { "times": { "rules": [
        { "name": "base", "cron": DAILY.as_str(), "replicas": 8 },
    ]}}}});
    env.api::<TidalScheduler>()
        .patch("web", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("edit replicas");
    deployment_replicas(&env, "web", 8).await;
    let after = wait_status(&env, "web", "level 8", |s| {
        s.desired_replicas == Some(8) && s.observed_generation == Some(2)
    })
    .await;
    assert_eq!(
        status(&after).history,
        status(&before).history,
        "an edit re-applies the level without a new history entry"
    );
    wait_event(&env, "web", "LevelChanged", "rule base now sets 8 replicas").await;
}

#[tokio::test]
async fn colliding_rules_resolve_to_the_max_and_are_reported() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_deployment(&env, "web").await;
    create_running(&env, "web").await;
    let at = second_after(Duration::from_secs(3));
    let cron = once_at(at);
    let rules = [
        ("base", DAILY.as_str(), 1),
        ("small", cron.as_str(), 4),
        ("large", cron.as_str(), 9),
    ];
    set_rules(&env, "web", &rules).await;
    let ahead = wait_status(&env, "web", "the collision ahead", |s| {
        s.next_trigger_time.as_ref().is_some_and(|t| t.0 == at)
    })
    .await;
    assert_eq!(status(&ahead).next_trigger_rule.as_deref(), Some("large"));
    let (_, _, message) = ready(status(&ahead));
    assert!(message.contains("rules large, small collide"), "{message}");
    wait_event(
        &env,
        "web",
        "RuleConflict",
        "next trigger: rules large, small collide",
    )
    .await;

    let fired = wait_status(&env, "web", "the collision applied", |s| {
        entry(s, "large", at).is_some()
    })
    .await;
    let status = status(&fired);
    assert_eq!(status.desired_replicas, Some(9));
    let applied = entry(status, "large", at).unwrap();
    assert!(
        applied.message.contains("rules large, small collide"),
        "{}",
        applied.message
    );
    assert!(
        entry(status, "small", at).is_none(),
        "the loser is not applied"
    );
}

#[tokio::test]
async fn scale_mode_writes_deployments_stateful_sets_and_custom_resources() {
    let env = TestEnv::new().await;
    install_widget_crd(&env.client).await;
    let _controller = start_controller(&env, "controller");
    create_deployment(&env, "web").await;
    env.api::<StatefulSet>()
        .create(&PostParams::default(), &stateful_set("db"))
        .await
        .expect("create StatefulSet");
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &widget_resource());
    widgets
        .create(&PostParams::default(), &widget("gadget", 1))
        .await
        .expect("create Widget");

    for (name, api_version, kind, target, replicas) in [
        ("web", "apps/v1", "Deployment", "web", 4),
        ("db", "apps/v1", "StatefulSet", "db", 5),
        ("gadget", "example.com/v1", "Widget", "gadget", 6),
    ] {
        create(
            &env,
            daily(name, (api_version, kind, target), "Scale", replicas),
        )
        .await;
    }
    deployment_replicas(&env, "web", 4).await;
    wait_for(
        &env.api::<StatefulSet>(),
        "db",
        "5 replicas",
        |s: Option<&StatefulSet>| {
            s.and_then(|s| s.spec.as_ref())
                .is_some_and(|s| s.replicas == Some(5))
        },
    )
    .await;
    wait_for(
        &widgets,
        "gadget",
        "6 replicas",
        |w: Option<&DynamicObject>| w.is_some_and(|w| w.data["spec"]["replicas"] == 6),
    )
    .await;
    for name in ["web", "db", "gadget"] {
        let object = wait_status(&env, name, "TriggerActive", |s| {
            ready_reason_is(s, "TriggerActive")
        })
        .await;
        assert_eq!(status(&object).history[0].result, TriggerResult::Succeeded);
    }
}

#[tokio::test]
async fn an_hpa_target_gets_its_floor_and_a_fought_over_workload_a_warning() {
    let env = TestEnv::new().await;
    let controller = start_controller(&env, "controller");
    let hpas = create_deployment_with_hpa(&env).await;

    // The HPA as target: minReplicas follows the level; maxReplicas (20) is raised to 25.
    create(
        &env,
        daily(
            "floor",
            ("autoscaling/v2", "HorizontalPodAutoscaler", "web-hpa"),
            "Scale",
            25,
        ),
    )
    .await;
    let hpa = wait_hpa_min(&hpas, 25).await;
    assert_eq!(hpa.spec.unwrap().max_replicas, 25);

    // The Deployment the HPA manages, written in Scale mode: a Warning.
    create(
        &env,
        daily("direct", ("apps/v1", "Deployment", "web"), "Scale", 3),
    )
    .await;
    let object = wait_status(&env, "direct", "a status", |s| {
        s.observed_generation == Some(1)
    })
    .await;
    let (readiness, _, message) = ready(status(&object));
    assert_eq!(readiness, "True");
    assert!(
        message.contains("HorizontalPodAutoscaler web-hpa also scales Deployment web"),
        "{message}"
    );
    wait_event(
        &env,
        "direct",
        "SpecWarning",
        "HorizontalPodAutoscaler web-hpa",
    )
    .await;

    // The first check started a watch of the HPAs: once it has listed them (its watch
    // request follows the list), a check finds the HPA there instead of listing again.
    // Two watches of HPAs by then: the metadata watch of `floor`'s target, and this one.
    let before = eventually("a watch of HPAs", || async {
        let requests = Requests::of(&controller);
        match requests.sent("watch", "horizontalpodautoscalers") >= 2.0 {
            true => Ok(requests),
            false => Err(format!("{requests:?}")),
        }
    })
    .await;
    set_rules(&env, "direct", &[("base", DAILY.as_str(), 4)]).await;
    let object = env
        .api::<TidalScheduler>()
        .get("direct")
        .await
        .expect("get");
    let (_, _, message) = ready(status(&object));
    assert!(
        message.contains("HorizontalPodAutoscaler web-hpa also scales Deployment web"),
        "{message}"
    );
    let after = Requests::of(&controller);
    assert_eq!(
        after.sent("list", "horizontalpodautoscalers"),
        before.sent("list", "horizontalpodautoscalers"),
        "an HPA list while the watch holds them: {after:?}"
    );

    // A new floor above maxReplicas (25): written at the version and against the
    // maxReplicas the watch holds, without reading the HPA first.
    set_rules(&env, "floor", &[("base", DAILY.as_str(), 30)]).await;
    let hpa = wait_hpa_min(&hpas, 30).await;
    assert_eq!(hpa.spec.unwrap().max_replicas, 30);
    let floored = Requests::of(&controller);
    assert_eq!(
        floored.sent("get", "horizontalpodautoscalers"),
        after.sent("get", "horizontalpodautoscalers"),
        "an HPA read before writing its floor while the watch holds it: {floored:?}"
    );
}

#[tokio::test]
async fn a_target_without_scale_is_not_scalable() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    let config_map: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "settings" } })).unwrap();
    env.api::<ConfigMap>()
        .create(&PostParams::default(), &config_map)
        .await
        .expect("create ConfigMap");
    create(
        &env,
        daily("web", ("v1", "ConfigMap", "settings"), "Scale", 3),
    )
    .await;
    let object = wait_status(&env, "web", "TargetNotScalable", |s| {
        ready_reason_is(s, "TargetNotScalable")
    })
    .await;
    let status = status(&object);
    let (ready, _, message) = ready(status);
    assert_eq!(ready, "False");
    assert!(
        message.contains("ConfigMap settings has no /scale subresource"),
        "{message}"
    );
    assert_eq!(status.history[0].result, TriggerResult::Failed);
    wait_event(&env, "web", "TargetNotScalable", "no /scale subresource").await;
}

#[tokio::test]
async fn a_missing_target_that_appears_later_gets_the_level() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create(
        &env,
        daily("web", ("apps/v1", "Deployment", "web"), "Scale", 6),
    )
    .await;
    let object = wait_status(&env, "web", "TargetNotFound", |s| {
        ready_reason_is(s, "TargetNotFound")
    })
    .await;
    let status_before = status(&object).clone();
    assert_eq!(status_before.history.len(), 1);
    assert_eq!(status_before.history[0].result, TriggerResult::Failed);
    assert!(
        status_before.history[0]
            .message
            .contains("Deployment web not found")
    );
    wait_event(&env, "web", "TargetNotFound", "Deployment web not found").await;

    create_deployment(&env, "web").await;
    deployment_replicas(&env, "web", 6).await;
    let object = wait_status(&env, "web", "TriggerActive", |s| {
        ready_reason_is(s, "TriggerActive")
    })
    .await;
    assert_eq!(
        status(&object).history,
        status_before.history,
        "the failure was recorded once"
    );
    wait_event(&env, "web", "Recovered", "rule base set 6 replicas").await;
}

#[tokio::test]
async fn invalid_specs_are_reported_and_other_objects_keep_being_served() {
    let env = TestEnv::new().await;
    let mut controller = start_controller(&env, "controller");
    create_deployment(&env, "web").await;
    let cases = [
        ("five-fields", "CRON_TZ=UTC 0 8 * * *", "expected 6 fields"),
        (
            "unknown-zone",
            "CRON_TZ=Mars/Olympus 0 0 8 * * *",
            "unknown time zone `Mars/Olympus`",
        ),
        ("never-fires", "CRON_TZ=UTC 0 0 0 30 2 *", "can never fire"),
        ("quartz", "CRON_TZ=UTC 0 0 8 L * *", "uses L, W or #"),
    ];
    for (name, cron, _) in cases {
        create(
            &env,
            manifest(
                name,
                "apps/v1",
                "Deployment",
                "web",
                "Status",
                &[("bad", cron, 1)],
            ),
        )
        .await;
    }
    let mut elsewhere = daily("elsewhere", ("apps/v1", "Deployment", "web"), "Status", 1);
    elsewhere["spec"]["targetRef"]["namespace"] = json!("kube-system");
    create(&env, elsewhere).await;
    let mut unlabelled = daily("unlabelled", ("apps/v1", "Deployment", "web"), "Status", 2);
    unlabelled["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("labels");
    create(&env, unlabelled).await;
    create(
        &env,
        daily("fine", ("apps/v1", "Deployment", "web"), "Status", 3),
    )
    .await;

    for (name, _, problem) in cases {
        let object = wait_status(&env, name, "InvalidSpec", |s| {
            ready_reason_is(s, "InvalidSpec")
        })
        .await;
        let (ready, _, message) = ready(status(&object));
        assert_eq!(ready, "False");
        assert!(
            message.contains("spec.triggers.times.rules[0] (bad)"),
            "{name}: {message}"
        );
        assert!(message.contains(problem), "{name}: {message}");
        assert_eq!(status(&object).desired_replicas, None);
        wait_event(&env, name, "InvalidSpec", problem).await;
    }
    let object = wait_status(&env, "elsewhere", "InvalidSpec", |s| {
        ready_reason_is(s, "InvalidSpec")
    })
    .await;
    assert!(
        ready(status(&object))
            .2
            .contains("spec.targetRef.namespace: `kube-system`")
    );

    let object = wait_status(&env, "unlabelled", "TriggerActive", |s| {
        ready_reason_is(s, "TriggerActive")
    })
    .await;
    assert!(
        ready(status(&object))
            .2
            .contains("elasticscaler.io/name and elasticscaler.io/namespace missing")
    );
    wait_event(&env, "unlabelled", "SpecWarning", "elasticscaler.io/name").await;

    let object = wait_status(&env, "fine", "level 3", |s| s.desired_replicas == Some(3)).await;
    assert_eq!(ready(status(&object)).0, "True");

    // Fixing a spec makes the object act.
    let fix = json!({ "spec": { "triggers": { "times": { "rules": [
        { "name": "bad", "cron": "CRON_TZ=UTC 0 0 8 * * *", "replicas": 4 },
    ]}}}});
    env.api::<TidalScheduler>()
        .patch("five-fields", &PatchParams::default(), &Patch::Merge(&fix))
        .await
        .expect("fix the spec");
    wait_status(&env, "five-fields", "level 4", |s| {
        s.desired_replicas == Some(4)
    })
    .await;
    assert!(
        controller.try_status().is_none(),
        "the controller is still running"
    );
}

#[tokio::test]
async fn a_restart_applies_the_latest_missed_trigger_once() {
    let env = TestEnv::new().await;
    create_deployment(&env, "web").await;
    let rules = [
        ("even", "CRON_TZ=UTC */4 * * * * *", 2),
        ("odd", "CRON_TZ=UTC 2/4 * * * * *", 3),
    ];
    let created = create(
        &env,
        manifest("web", "apps/v1", "Deployment", "web", "Status", &rules),
    )
    .await;
    let tide = validate(&created, &NoCalendars, Timestamp::now())
        .expect("valid")
        .tide;

    let controller = start_controller(&env, "controller-1");
    let Restarted {
        on_time,
        stopped,
        controller: _controller,
        caught_up,
        ..
    } = restart_after_missed_instants(&env, controller, "web", &tide).await;
    let status_now = status(&caught_up);
    let applied = &status_now.history[0];
    assert!(applied.catch_up);
    let watermark = status(&on_time).last_trigger_time.as_ref().unwrap().0;
    let last_recorded = status(&stopped).last_trigger_time.as_ref().unwrap().0;
    assert!(last_recorded >= watermark);
    let expected = tide.superseded_between(last_recorded, applied.schedule_time.0);
    assert!(
        expected >= 1,
        "at least one instant was missed and superseded"
    );
    assert_eq!(applied.superseded, expected as i64);
    assert_no_duplicate_history(status_now);

    // Then on-time triggers resume, and nothing is ever recorded twice.
    let resumed = wait_status(&env, "web", "an on-time trigger after the restart", |s| {
        s.history[0].schedule_time.0 > applied.schedule_time.0 && !s.history[0].catch_up
    })
    .await;
    assert_eq!(status(&resumed).history[1], *applied);
    assert_eq!(status(&resumed).history[0].superseded, 0);
    assert_no_duplicate_history(status(&resumed));
}

/// Once the controller watches the targets' kind, a Scale-mode write carries the version
/// the watch delivered: triggers write the target's `/scale` without reading it first
/// (fencing still holds: tests/fencing.rs).
#[tokio::test]
async fn scale_writes_need_no_read_once_the_targets_are_watched() {
    let env = TestEnv::new().await;
    let controller = start_controller(&env, "controller");
    create_deployment(&env, "web").await;
    let rules = [("even", "CRON_TZ=UTC */2 * * * * *", 2)];
    create(
        &env,
        manifest("web", "apps/v1", "Deployment", "web", "Scale", &rules),
    )
    .await;
    deployment_replicas(&env, "web", 2).await;
    let watching = |requests: &Requests| {
        requests.sent("watch", "deployments") + requests.sent("watch_metadata", "deployments")
    };
    let before = eventually("a watch of Deployments", || async {
        let requests = Requests::of(&controller);
        match watching(&requests) >= 1.0 {
            true => Ok(requests),
            false => Err(format!("{requests:?}")),
        }
    })
    .await;
    let writes = |requests: &Requests| requests.sent("patch_scale", "deployments/scale");
    let after = eventually("three more /scale writes", || async {
        let after = Requests::of(&controller);
        match writes(&after) >= writes(&before) + 3.0 {
            true => Ok(after),
            false => Err(format!("{after:?}")),
        }
    })
    .await;
    assert_eq!(
        after.sent("get_scale", "deployments/scale"),
        before.sent("get_scale", "deployments/scale"),
        "a /scale read while the watch holds the version: {after:?}"
    );
}

#[tokio::test]
async fn suspension_stops_triggering_and_resuming_catches_up() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_deployment(&env, "web").await;
    let rules = [("even", "CRON_TZ=UTC */2 * * * * *", 2)];
    let mut suspended_rule = manifest("web", "apps/v1", "Deployment", "web", "Status", &rules);
    suspended_rule["spec"]["triggers"]["times"]["rules"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "paused", "cron": "CRON_TZ=UTC 1/2 * * * * *", "replicas": 9, "suspend": true }));
    create(&env, suspended_rule).await;
    let running = wait_status(&env, "web", "a level", |s| s.desired_replicas == Some(2)).await;
    let paused = &status(&running).rules[1];
    assert_eq!(paused.name, "paused");
    assert_eq!(
        paused.next_schedule_time, None,
        "a suspended rule has no next schedule time"
    );

    let suspend = json!({ "spec": { "suspend": true } });
    let api = env.api::<TidalScheduler>();
    api.patch("web", &PatchParams::default(), &Patch::Merge(&suspend))
        .await
        .expect("suspend");
    let suspended = wait_status(&env, "web", "Suspended", |s| {
        ready_reason_is(s, "Suspended")
    })
    .await;
    let at_suspension = status(&suspended).clone();
    // Timers keep being computed while suspended: wait for two instants to pass on them.
    let two_later = at_suspension.rules[0]
        .next_schedule_time
        .as_ref()
        .unwrap()
        .0
        + SignedDuration::from_secs(2);
    let later = wait_status(&env, "web", "timers two instants later", |s| {
        s.rules[0]
            .last_schedule_time
            .as_ref()
            .is_some_and(|t| t.0 >= two_later)
    })
    .await;
    assert_eq!(
        status(&later).last_trigger_time,
        at_suspension.last_trigger_time
    );
    assert_eq!(status(&later).history, at_suspension.history);

    let resume = json!({ "spec": { "suspend": false } });
    api.patch("web", &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .expect("resume");
    let resumed = wait_status(&env, "web", "a trigger after resuming", |s| {
        s.last_trigger_time != at_suspension.last_trigger_time
    })
    .await;
    assert!(status(&resumed).history[0].superseded >= 1);
    assert_no_duplicate_history(status(&resumed));
}

#[tokio::test]
async fn deleting_an_object_stops_its_timers() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_deployment(&env, "deleted").await;
    create_deployment(&env, "witness").await;
    let rules = |low, high| {
        [
            ("low", "CRON_TZ=UTC */2 * * * * *", low),
            ("high", "CRON_TZ=UTC 1/2 * * * * *", high),
        ]
    };
    create(
        &env,
        manifest(
            "doomed",
            "apps/v1",
            "Deployment",
            "deleted",
            "Scale",
            &rules(2, 3),
        ),
    )
    .await;
    wait_status(&env, "doomed", "a trigger", |s| !s.history.is_empty()).await;
    let api = env.api::<TidalScheduler>();
    api.delete("doomed", &DeleteParams::default())
        .await
        .expect("delete");
    within(PATIENCE, "deletion", async {
        while api.get_opt("doomed").await.expect("get").is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let untouched = env.api::<Deployment>().get("deleted").await.expect("get");

    // A witness firing at the same instants shows time passing with the controller acting.
    create(
        &env,
        manifest(
            "witness",
            "apps/v1",
            "Deployment",
            "witness",
            "Scale",
            &rules(4, 5),
        ),
    )
    .await;
    let start = wait_status(&env, "witness", "a trigger", |s| !s.history.is_empty()).await;
    let first = status(&start).history[0].schedule_time.0;
    wait_status(&env, "witness", "two more triggers", |s| {
        s.history[0].schedule_time.0 >= first + SignedDuration::from_secs(2)
    })
    .await;
    let after = env.api::<Deployment>().get("deleted").await.expect("get");
    assert_eq!(
        after.metadata.resource_version, untouched.metadata.resource_version,
        "no write to the target of a deleted object"
    );
}

#[tokio::test]
async fn two_hundred_objects_firing_in_the_same_second_apply_exactly_once() {
    const OBJECTS: usize = 200;
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_deployment(&env, "web").await;
    let at = second_after(Duration::from_secs(12));
    let cron = once_at(at);
    let manifests: Vec<_> = (0..OBJECTS)
        .map(|i| {
            manifest(
                &format!("tide-{i:03}"),
                "apps/v1",
                "Deployment",
                "web",
                "Status",
                &[("base", DAILY.as_str(), 1), ("burst", &cron, 50)],
            )
        })
        .collect();
    let started = Timestamp::now();
    within(Duration::from_secs(60), "creating the objects", async {
        futures::future::join_all(manifests.into_iter().map(|m| create(&env, m))).await
    })
    .await;
    let api = env.api::<TidalScheduler>();
    let all_have = |test: fn(&TidalScheduler) -> bool| {
        let api = api.clone();
        async move {
            loop {
                let objects = api.list(&Default::default()).await.expect("list");
                if objects.items.len() == OBJECTS && objects.items.iter().all(test) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    };
    let first_reconcile = |o: &TidalScheduler| {
        o.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == Some(1))
    };
    within(PATIENCE, "200 first reconciles", all_have(first_reconcile)).await;
    let reconciled = Timestamp::now();
    assert!(
        reconciled < at,
        "objects created and reconciled before the instant (from {started} to {reconciled})"
    );
    let burst_recorded = |o: &TidalScheduler| {
        o.status
            .as_ref()
            .is_some_and(|s| s.history.iter().any(|h| h.rule == "burst"))
    };
    within(PATIENCE, "200 triggers", all_have(burst_recorded)).await;
    let objects = api.list(&Default::default()).await.expect("list");
    assert_eq!(objects.items.len(), OBJECTS);
    for object in &objects.items {
        let status = status(object);
        assert_no_duplicate_history(status);
        let burst = entry(status, "burst", at).unwrap();
        assert!(!burst.catch_up, "on time");
        assert_eq!(
            (burst.replicas, burst.result),
            (50, TriggerResult::Succeeded)
        );
        assert_eq!(status.history.len(), 2);
    }
}

#[tokio::test]
async fn a_rejected_write_is_apply_failed_recorded_once_and_retried() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    let hpas = create_deployment_with_hpa(&env).await;
    // An HPA's minReplicas must be at least 1: the API server rejects a level of 0.
    let floor = |replicas| {
        daily(
            "floor",
            ("autoscaling/v2", "HorizontalPodAutoscaler", "web-hpa"),
            "Scale",
            replicas,
        )
    };
    create(&env, floor(0)).await;
    let failed = wait_status(&env, "floor", "ApplyFailed", |s| {
        ready_reason_is(s, "ApplyFailed")
    })
    .await;
    let status_failed = status(&failed).clone();
    let (ready, _, message) = ready(&status_failed);
    assert_eq!(ready, "False");
    assert!(
        message.contains("failed to set minReplicas of HorizontalPodAutoscaler web-hpa"),
        "{message}"
    );
    assert_eq!(status_failed.history.len(), 1);
    assert_eq!(status_failed.history[0].result, TriggerResult::Failed);
    assert_eq!(
        status_failed.desired_replicas,
        Some(0),
        "the level stays the desired state"
    );
    wait_event(&env, "floor", "ApplyFailed", "minReplicas").await;

    // Fixing the level: it lands, Ready recovers, and no second entry is recorded.
    let fix = json!({ "spec": { "triggers": { "times": { "rules": [
        { "name": "base", "cron": DAILY.as_str(), "replicas": 2 },
    ]}}}});
    env.api::<TidalScheduler>()
        .patch("floor", &PatchParams::default(), &Patch::Merge(&fix))
        .await
        .expect("edit replicas");
    wait_for(
        &hpas,
        "web-hpa",
        "minReplicas 2",
        |h: Option<&HorizontalPodAutoscaler>| {
            h.and_then(|h| h.spec.as_ref())
                .is_some_and(|s| s.min_replicas == Some(2))
        },
    )
    .await;
    let recovered = wait_status(&env, "floor", "TriggerActive", |s| {
        ready_reason_is(s, "TriggerActive")
    })
    .await;
    assert_eq!(status(&recovered).history, status_failed.history);
    wait_event(&env, "floor", "Recovered", "rule base").await;
}

#[tokio::test]
async fn sigterm_stops_the_controller_after_running_reconciles() {
    let env = TestEnv::new().await;
    create_deployment(&env, "web").await;
    // Its requests pass a proxy that holds everything from the first status write on: the
    // reconcile sending it stays in flight until the proxy heals.
    let pki = env.control_plane().pki();
    let proxy = HoldingProxy::start(&pki, env.client.clone()).await;
    let kubeconfig = env.kubeconfig_for_server("controller", &proxy.url());
    let mut controller = start_replica_via(
        &env,
        "controller",
        &["--leader-elect", "false"],
        &kubeconfig,
    );
    proxy.hold_from("PATCH", "/status");
    create(
        &env,
        daily("web", ("apps/v1", "Deployment", "web"), "Status", 1),
    )
    .await;
    eventually("a held status write", || async {
        proxy
            .holding()
            .then_some(())
            .ok_or_else(|| "none yet".to_owned())
    })
    .await;
    controller.signal("TERM");
    // Draining: it says it is no longer ready, and keeps running while the reconcile waits.
    eventually("/readyz 503 after SIGTERM", || async {
        match common::replicas::http_get(&controller, "/readyz").0 {
            503 => Ok(()),
            code => Err(format!("/readyz {code}")),
        }
    })
    .await;
    assert!(
        controller.try_status().is_none(),
        "exited with a reconcile in flight:\n{}",
        controller.log()
    );
    proxy.heal();
    let exit = within(Duration::from_secs(30), "the controller's exit", async {
        tokio::task::spawn_blocking(move || {
            let status = controller.wait(Duration::from_secs(25));
            (status, controller.log())
        })
        .await
        .expect("join")
    })
    .await;
    assert!(exit.0.success(), "exit {:?}; log:\n{}", exit.0, exit.1);
    assert!(exit.1.contains("controller stopped"), "{}", exit.1);
    assert!(
        !exit
            .1
            .contains("reconciles still running after the grace period"),
        "{}",
        exit.1
    );
    // The held write was the reconcile's status, delivered at the heal.
    let object = env
        .api::<TidalScheduler>()
        .get("web")
        .await
        .expect("the object");
    assert_eq!(status(&object).observed_generation, Some(1));
}

#[tokio::test]
async fn sigterm_stops_a_controller_that_cannot_reach_the_api_server() {
    let env = TestEnv::new().await;
    // The same credentials, but a server address nothing listens on: the first list of the
    // cache never succeeds.
    let unreachable = env.kubeconfig_for_server("unreachable", "https://127.0.0.1:1");
    let mut controller = env.run_binary_with(
        "controller",
        &[
            "run",
            "--log-format",
            "json",
            "--metrics-address",
            "127.0.0.1:0",
        ],
        &unreachable,
    );
    // Wait until it has tried (and failed) to watch, then ask it to stop.
    wait_logged(&controller, "watching TidalSchedulers failed").await;
    // Alive, but not ready: its cache never listed.
    assert_eq!(common::replicas::http_get(&controller, "/healthz").0, 200);
    assert_eq!(common::replicas::http_get(&controller, "/readyz").0, 503);
    controller.signal("TERM");
    let status = tokio::task::spawn_blocking(move || controller.wait(Duration::from_secs(10)))
        .await
        .expect("join");
    assert!(status.success(), "exit {status:?}");
}
