//! The admission policy of `deploy/admission.yaml` on the real API server: a
//! TidalScheduler in `Scale` mode is admitted only if its author may scale the target
//! themself. Users are impersonated, each with narrow Roles of their own in the test's
//! namespace; every grant is waited for with a SubjectAccessReview before it is relied
//! on (RBAC reads from a cache).

use tidal_harness as common;

use std::path::Path;

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tidal_scheduler::api::TidalScheduler;

use common::cluster::{REPO, TestEnv, apply, read_manifests};
use common::fixtures::install_widget_crd;
use common::tide::manifest;
use common::wait::eventually;

/// Where deploy/admission.yaml keeps its kind → resource mapping.
const MAPPING: (&str, &str) = ("tidal-system", "tidal-scheduler-scale-targets");
const DAILY: &str = "CRON_TZ=UTC 0 0 8 * * *";

/// Installs deploy/admission.yaml (idempotent) and waits until it denies.
async fn policy(env: &TestEnv) {
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let system =
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": MAPPING.0 } });
    namespaces
        .patch(
            MAPPING.0,
            &PatchParams::apply("tidal-tests"),
            &Patch::Apply(system),
        )
        .await
        .expect("namespace tidal-system");
    for object in read_manifests(&Path::new(REPO).join("deploy/admission.yaml")) {
        apply(&env.client, &object, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    // A user with no right at all on workloads: denied once the policy is in effect.
    let probe = author(env, "probe").await;
    let probed = scale("probe", "apps/v1", "Deployment", "web");
    eventually("the policy to deny", || async {
        denial_saying(
            dry_run(&probe, env, &probed).await,
            "tidal-scheduler-scale-permission",
        )
    })
    .await;
}

/// A user of the test's namespace who may create and edit TidalSchedulers (nothing
/// else); returns a client impersonating them.
async fn author(env: &TestEnv, name: &str) -> Client {
    let user = user(env, name);
    grant(
        env,
        &user,
        "author",
        json!({
            "apiGroups": ["scheduling.tidal.io"],
            "resources": ["tidalschedulers"],
            "verbs": ["get", "create", "update", "patch"],
        }),
    )
    .await;
    env.control_plane().client_as(&user).await
}

fn user(env: &TestEnv, name: &str) -> String {
    format!("{name}@{}", env.namespace)
}

/// Grants `user` the Role `role` of one rule in the test's namespace, and waits until
/// the API server's authorizer allows it.
async fn grant(env: &TestEnv, user: &str, role: &str, rule: Value) {
    let name = format!("{role}-{}", user.split('@').next().expect("user@namespace"));
    let role_object: Role = serde_json::from_value(json!({
        "metadata": { "name": name },
        "rules": [rule.clone()],
    }))
    .expect("a Role");
    env.api::<Role>()
        .create(&PostParams::default(), &role_object)
        .await
        .expect("create Role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))
    .expect("a RoleBinding");
    env.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .expect("create RoleBinding");
    let resources = rule["resources"][0].as_str().expect("a resource");
    let (resource, subresource) = resources
        .split_once('/')
        .map_or((resources, None), |(r, s)| (r, Some(s)));
    let review: SubjectAccessReview = serde_json::from_value(json!({
        "spec": {
            "user": user,
            "resourceAttributes": {
                "namespace": env.namespace,
                "group": rule["apiGroups"][0],
                "resource": resource,
                "subresource": subresource,
                "verb": rule["verbs"][0],
                "name": rule["resourceNames"][0],
            },
        },
    }))
    .expect("a SubjectAccessReview");
    let reviews: Api<SubjectAccessReview> = Api::all(env.client.clone());
    eventually("the grant to take effect", || async {
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .expect("SubjectAccessReview");
        match answer.status {
            Some(status) if status.allowed => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// A TidalScheduler in Scale mode targeting `kind/name`.
fn scale(name: &str, api_version: &str, kind: &str, target: &str) -> Value {
    manifest(name, api_version, kind, target, "Scale", &[("r", DAILY, 2)])
}

fn typed(manifest: &Value) -> TidalScheduler {
    serde_json::from_value(manifest.clone()).expect("a TidalScheduler")
}

/// Creates `manifest` as `client`'s user; the API server's message on refusal.
async fn create(client: &Client, env: &TestEnv, manifest: &Value) -> Result<(), String> {
    create_with(client, env, manifest, &PostParams::default()).await
}

/// Like [`create`], as a dry run (admission runs, nothing is stored).
async fn dry_run(client: &Client, env: &TestEnv, manifest: &Value) -> Result<(), String> {
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    create_with(client, env, manifest, &params).await
}

async fn create_with(
    client: &Client,
    env: &TestEnv,
    manifest: &Value,
    params: &PostParams,
) -> Result<(), String> {
    let api: Api<TidalScheduler> = Api::namespaced(client.clone(), &env.namespace);
    api.create(params, &typed(manifest))
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// `Ok` if `result` is a refusal whose message contains `says`; else what it was.
fn denial_saying(result: Result<(), String>, says: &str) -> Result<(), String> {
    match result {
        Err(message) if message.contains(says) => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

/// Asserts a refusal by the policy, whose message contains `says`.
fn assert_denied(result: Result<(), String>, says: &str) {
    let message = result.expect_err("denied");
    assert!(
        message.contains("tidal-scheduler-scale-permission") && message.contains(says),
        "expected the policy's denial saying {says:?}, got: {message}"
    );
}

#[tokio::test]
async fn scale_mode_needs_the_right_to_scale_the_deployment_and_status_mode_does_not() {
    let env = TestEnv::new().await;
    policy(&env).await;
    let alice = author(&env, "alice").await;
    let web = scale("web", "apps/v1", "Deployment", "web");

    assert_denied(
        create(&alice, &env, &web).await,
        &format!(
            "{} may not update deployments.apps/scale \"web\" in namespace {}",
            user(&env, "alice"),
            env.namespace
        ),
    );
    let status_mode = manifest(
        "watch",
        "apps/v1",
        "Deployment",
        "db",
        "Status",
        &[("r", DAILY, 2)],
    );
    create(&alice, &env, &status_mode)
        .await
        .expect("Status mode is not restricted");

    grant(
        &env,
        &user(&env, "alice"),
        "scale-web",
        json!({
            "apiGroups": ["apps"],
            "resources": ["deployments/scale"],
            "resourceNames": ["web"],
            "verbs": ["update"],
        }),
    )
    .await;
    create(&alice, &env, &web)
        .await
        .expect("allowed with update on deployments/scale of web");

    // Pointing it at a Deployment she may not scale is denied; so is switching the
    // Status-mode object (of that Deployment) to Scale; a label edit is not checked.
    let api: Api<TidalScheduler> = Api::namespaced(alice.clone(), &env.namespace);
    let retarget = json!({ "spec": { "targetRef": { "name": "db" } } });
    let refused = api
        .patch("web", &PatchParams::default(), &Patch::Merge(&retarget))
        .await
        .map(drop)
        .map_err(|e| e.to_string());
    assert_denied(refused, "may not update deployments.apps/scale \"db\"");
    let to_scale = json!({ "spec": { "apply": "Scale" } });
    let refused = api
        .patch("watch", &PatchParams::default(), &Patch::Merge(&to_scale))
        .await
        .map(drop)
        .map_err(|e| e.to_string());
    assert_denied(refused, "may not update deployments.apps/scale \"db\"");
    let labelled = json!({ "metadata": { "labels": { "team": "a" } } });
    api.patch("web", &PatchParams::default(), &Patch::Merge(&labelled))
        .await
        .expect("a label edit is not checked");
    let stored = api.get("web").await.expect("get web");
    assert_eq!(
        stored.spec.target_ref.name, "web",
        "the denied edit changed nothing"
    );
}

#[tokio::test]
async fn stateful_set_and_hpa_targets_need_their_own_rights() {
    let env = TestEnv::new().await;
    policy(&env).await;
    let bob = author(&env, "bob").await;

    let db = scale("db", "apps/v1", "StatefulSet", "db");
    assert_denied(
        create(&bob, &env, &db).await,
        "may not update statefulsets.apps/scale \"db\"",
    );
    grant(
        &env,
        &user(&env, "bob"),
        "scale-db",
        json!({
            "apiGroups": ["apps"],
            "resources": ["statefulsets/scale"],
            "verbs": ["update"],
        }),
    )
    .await;
    create(&bob, &env, &db)
        .await
        .expect("allowed with update on statefulsets/scale");

    // An HPA target: Scale mode patches the HPA's minReplicas, so `patch` on the HPA.
    let floor = scale("floor", "autoscaling/v2", "HorizontalPodAutoscaler", "web");
    assert_denied(
        create(&bob, &env, &floor).await,
        "may not patch horizontalpodautoscalers.autoscaling \"web\"",
    );
    grant(
        &env,
        &user(&env, "bob"),
        "scale-hpa",
        json!({
            "apiGroups": ["autoscaling"],
            "resources": ["horizontalpodautoscalers"],
            "verbs": ["patch"],
        }),
    )
    .await;
    create(&bob, &env, &floor)
        .await
        .expect("allowed with patch on horizontalpodautoscalers");
}

#[tokio::test]
async fn a_custom_kind_is_denied_until_mapped_then_needs_its_scale_right() {
    let env = TestEnv::new().await;
    policy(&env).await;
    let carol = author(&env, "carol").await;
    install_widget_crd(&env.client).await;
    let widget = scale("widget", "example.com/v1", "Widget", "w");

    assert_denied(
        create(&carol, &env, &widget).await,
        "Scale mode for kind Widget.example.com is not enabled: add \"Widget.example.com: <resource, e.g. widgets>\" to ConfigMap tidal-system/tidal-scheduler-scale-targets",
    );

    let mapping: Api<ConfigMap> = Api::namespaced(env.client.clone(), MAPPING.0);
    let entry = json!({ "data": { "Widget.example.com": "widgets" } });
    mapping
        .patch(MAPPING.1, &PatchParams::default(), &Patch::Merge(&entry))
        .await
        .expect("map Widget.example.com");
    // The policy reads its parameters from a cache: wait for the new denial.
    eventually("the mapping to take effect", || async {
        let says = "may not update widgets.example.com/scale \"w\"";
        denial_saying(dry_run(&carol, &env, &widget).await, says)
    })
    .await;

    grant(
        &env,
        &user(&env, "carol"),
        "scale-widgets",
        json!({
            "apiGroups": ["example.com"],
            "resources": ["widgets/scale"],
            "verbs": ["update"],
        }),
    )
    .await;
    create(&carol, &env, &widget)
        .await
        .expect("allowed once mapped, with update on widgets/scale");
}
