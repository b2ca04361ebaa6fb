//! The CRD of this tree admits every object the previous release's CRD admits: its
//! examples (`deploy/examples/` of its commit) and a generated sample that spans the
//! schema's edges (some of it refused by both). A new required field, a narrowed enum, a
//! tightened pattern or CEL rule fails here — then the change must be ratcheted and its
//! reason given in CHANGELOG.md (see docs/releases.md, "API compatibility of `v1alpha1`").
//!
//! Both CRDs are served side by side under groups of their own (`old.compat.tidal.io`,
//! `new.compat.tidal.io`): each is judged by a schema freshly established, with no window
//! in which an API server still validates with the CRD it had before an update.
//!
//! And an object whose status the previous release's CRD stored stays writable when this
//! tree's CRD replaces it and when it is put back (a rollback), with the status's
//! managedFields following the schema in effect (`upgrade.compat.tidal.io`).

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tidal_harness as common;

use common::cluster::{REPO, TestEnv, apply};
use common::corpus::Rng;
use common::release::{git, previous};
use common::wait::eventually;

const GROUP: &str = "scheduling.tidal.io";

fn git_show(commit: &str, path: &str) -> String {
    git(&["show", &format!("{commit}:{path}")])
        .unwrap_or_else(|e| panic!("{e} (a shallow clone? git fetch --unshallow)"))
}

fn documents(yaml: &str) -> Vec<Value> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("YAML");
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

/// `crd` moved to `group` (its name and `spec.group`).
fn regrouped(mut crd: Value, group: &str) -> Value {
    let plural = crd["spec"]["names"]["plural"]
        .as_str()
        .expect("plural")
        .to_owned();
    crd["metadata"] = json!({ "name": format!("{plural}.{group}") });
    crd["spec"]["group"] = group.into();
    crd
}

/// The API of `kind` in `group`, per the CRD's names and scope.
fn api(env: &TestEnv, crds: &[Value], group: &str, kind: &str) -> Api<DynamicObject> {
    let crd = crds
        .iter()
        .find(|c| c["spec"]["names"]["kind"] == kind)
        .unwrap_or_else(|| panic!("no CRD of kind {kind}"));
    let plural = crd["spec"]["names"]["plural"].as_str().expect("plural");
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1alpha1", kind), plural);
    if crd["spec"]["scope"] == "Cluster" {
        Api::all_with(env.client.clone(), &resource)
    } else {
        Api::namespaced_with(env.client.clone(), &env.namespace, &resource)
    }
}

/// Installs `crds` under `group` and waits until each is Established.
async fn install(env: &TestEnv, crds: &[Value], group: &str) {
    for crd in crds {
        let crd = regrouped(crd.clone(), group);
        let object: DynamicObject = serde_json::from_value(crd.clone()).expect("a CRD");
        apply(&env.client, &object, None)
            .await
            .expect("apply the CRD");
        let name = crd["metadata"]["name"].as_str().expect("name").to_owned();
        let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
            Api::all(env.client.clone());
        common::wait::wait_for(
            &crds,
            &name,
            "Established",
            kube::runtime::wait::conditions::is_crd_established(),
        )
        .await;
    }
}

/// Which of `objects` a server-side dry-run create under `group` admits (their
/// `apiVersion` moved there); the refusals' messages for the others.
async fn admitted(
    env: &TestEnv,
    crds: &[Value],
    group: &str,
    objects: &[Value],
) -> Vec<Result<(), String>> {
    let mut results = Vec::new();
    for object in objects {
        let mut object = object.clone();
        object["apiVersion"] = format!("{group}/v1alpha1").into();
        let kind = object["kind"].as_str().expect("kind").to_owned();
        let api = api(env, crds, group, &kind);
        let object: DynamicObject = serde_json::from_value(object).expect("an object");
        let params = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        results.push(
            api.create(&params, &object)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
        );
    }
    results
}

/// The previous release's examples, in the test's namespace.
fn examples(commit: &str) -> Vec<Value> {
    let listed = git(&[
        "ls-tree",
        "-r",
        "--name-only",
        commit,
        "--",
        "deploy/examples",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    listed
        .lines()
        .filter(|path| path.ends_with(".yaml"))
        .flat_map(|path| documents(&git_show(commit, path)))
        .map(|mut object| {
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.remove("namespace");
            }
            object
        })
        .collect()
}

/// `count` objects that span the schema: most valid in varied ways (rule counts up to 100,
/// a `CRON_TZ=`/`TZ=` prefix or a `timeZone`, suspends, descriptions, calendar references
/// of both kinds up to 10, history limits 1–100, both apply modes, calendars of every day
/// form), and a third of them with one value at or past an edge (0 or 101 rules, a name
/// that is no DNS label, both or neither zone forms, −1 replicas, a history limit of 0 or
/// 101, an unknown apply mode, 11 references, an unknown kind, a target name with `/`,
/// a broken calendar day, 1,001 days), which both CRDs should refuse alike.
fn generated(count: usize) -> Vec<Value> {
    let mut rng = Rng::new(0x71de);
    (0..count)
        .map(|i| {
            let edge = rng.chance(33);
            if i % 5 == 4 {
                calendar(&mut rng, i, edge)
            } else {
                tidal_scheduler(&mut rng, i, edge)
            }
        })
        .collect()
}

fn tidal_scheduler(rng: &mut Rng, i: usize, edge: bool) -> Value {
    let crons = [
        "0 0 8 * * *",
        "*/5 * * * * *",
        "0 30 9 * * MON-FRI",
        "@daily",
        "0 0 0 1 1 *",
    ];
    let zones = ["UTC", "Asia/Shanghai", "Europe/Paris", "America/St_Johns"];
    let rule_count = *rng.pick(&[1u64, 1, 2, 3, 5, 100]);
    let rules: Vec<Value> = (0..rule_count)
        .map(|r| {
            let (cron, zone) = (*rng.pick(&crons), *rng.pick(&zones));
            let mut rule = if rng.chance(50) {
                json!({ "name": format!("rule-{r}"), "cron": format!("CRON_TZ={zone} {cron}") })
            } else {
                json!({ "name": format!("rule-{r}"), "cron": cron, "timeZone": zone })
            };
            rule["replicas"] = (*rng.pick(&[0i64, 1, 20, 1000])).into();
            if rng.chance(20) {
                rule["suspend"] = rng.chance(50).into();
            }
            if rng.chance(20) {
                rule["description"] = "generated".into();
            }
            for field in ["skipDays", "onlyDays"] {
                if rng.chance(20) {
                    let refs = *rng.pick(&[0u64, 1, 3, 10]);
                    rule[field] = (0..refs)
                        .map(|k| match rng.below(3) {
                            0 => json!({ "name": format!("cal-{k}") }),
                            1 => json!({ "kind": "TidalCalendar", "name": format!("cal-{k}") }),
                            _ => json!({ "kind": "ClusterTidalCalendar", "name": format!("cal-{k}") }),
                        })
                        .collect();
                }
            }
            rule
        })
        .collect();
    let target = rng
        .pick(&[
            json!({ "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" }),
            json!({ "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db-0.x" }),
            json!({ "apiVersion": "v1", "kind": "ReplicationController", "name": "web" }),
            json!({ "apiVersion": "example.com/v1", "kind": "Worker", "name": "w" }),
        ])
        .clone();
    let mut spec = json!({ "targetRef": target, "triggers": { "times": { "rules": rules } } });
    if rng.chance(60) {
        spec["apply"] = (*rng.pick(&["Status", "Scale"])).into();
    }
    if rng.chance(40) {
        spec["historyLimit"] = (*rng.pick(&[1i64, 10, 100])).into();
    }
    if rng.chance(20) {
        spec["suspend"] = rng.chance(50).into();
    }
    if edge {
        let rule = &mut spec["triggers"]["times"]["rules"][0];
        match rng.below(12) {
            0 => spec["triggers"]["times"]["rules"] = json!([]),
            1 => {
                let one = rule.clone();
                spec["triggers"]["times"]["rules"] = (0..101)
                    .map(|r| {
                        let mut rule = one.clone();
                        rule["name"] = format!("rule-{r}").into();
                        rule
                    })
                    .collect();
            }
            2 => rule["name"] = (*rng.pick(&["Bad_Name", "-x", &"a".repeat(64)])).into(),
            3 => {
                rule["cron"] = "CRON_TZ=UTC 0 0 8 * * *".into();
                rule["timeZone"] = "UTC".into();
            }
            4 => {
                rule["cron"] = "0 0 8 * * *".into();
                rule.as_object_mut().unwrap().remove("timeZone");
            }
            5 => rule["replicas"] = (-1).into(),
            6 => spec["historyLimit"] = (*rng.pick(&[0i64, 101])).into(),
            7 => spec["apply"] = "Replace".into(),
            8 => {
                rule["skipDays"] = (0..11)
                    .map(|k| json!({ "name": format!("cal-{k}") }))
                    .collect()
            }
            9 => rule["onlyDays"] = json!([{ "kind": "Other", "name": "cal" }]),
            10 => spec["targetRef"]["name"] = (*rng.pick(&["web/../x", "web%2F", "Web"])).into(),
            _ => {
                spec["targetRef"]
                    .as_object_mut()
                    .unwrap()
                    .remove(*rng.pick(&["apiVersion", "kind", "name"]));
            }
        }
    }
    json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "TidalScheduler",
        "metadata": { "name": format!("generated-{i:03}") },
        "spec": spec,
    })
}

fn calendar(rng: &mut Rng, i: usize, edge: bool) -> Value {
    let valid = [
        json!({ "date": "2026-10-01", "name": "National Day" }),
        json!({ "from": "2026-10-01", "to": "2026-10-07" }),
        json!({ "from": "2026-12-31", "to": "2026-12-31" }),
        json!({ "yearly": "02-29" }),
        json!({ "yearly": "12-25", "name": "Christmas" }),
    ];
    let broken = [
        json!({ "yearly": "02-30" }),
        json!({ "date": "2026-13-01" }),
        json!({ "date": "2026-02-29" }),
        json!({ "from": "2026-10-07", "to": "2026-10-01" }),
        json!({ "from": "2026-10-07" }),
        json!({ "date": "2026-10-01", "yearly": "10-01" }),
        json!({}),
    ];
    let mut days: Vec<Value> = (0..*rng.pick(&[0u64, 1, 3, 20]))
        .map(|_| rng.pick(&valid).clone())
        .collect();
    let mut spec = json!({ "timeZone": *rng.pick(&["Asia/Shanghai", "Europe/London"]) });
    if edge {
        match rng.below(3) {
            0 => days.push(rng.pick(&broken).clone()),
            1 => days = (0..1001).map(|_| valid[0].clone()).collect(),
            _ => spec = json!({}),
        }
    }
    spec["days"] = days.into();
    json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": *rng.pick(&["TidalCalendar", "ClusterTidalCalendar"]),
        "metadata": { "name": format!("generated-calendar-{i:03}") },
        "spec": spec,
    })
}

#[tokio::test]
async fn the_crd_admits_every_object_the_previous_releases_crd_admits() {
    let env = TestEnv::new().await;
    let release = previous().expect("release/releases");
    let old_crds = documents(&git_show(&release.commit, "deploy/crd.yaml"));
    let new_crds = documents(
        &std::fs::read_to_string(format!("{REPO}/deploy/crd.yaml")).expect("deploy/crd.yaml"),
    );
    install(&env, &old_crds, "old.compat.tidal.io").await;
    install(&env, &new_crds, "new.compat.tidal.io").await;

    let examples = examples(&release.commit);
    assert!(
        examples.len() >= 7,
        "the previous release's examples: {}",
        examples.len()
    );
    let old = admitted(&env, &old_crds, "old.compat.tidal.io", &examples).await;
    for (object, result) in examples.iter().zip(&old) {
        assert!(
            result.is_ok(),
            "release {} refuses its own example {}: {result:?}",
            release.version,
            object["metadata"]["name"]
        );
    }
    let new = admitted(&env, &new_crds, "new.compat.tidal.io", &examples).await;
    for (object, result) in examples.iter().zip(&new) {
        assert!(
            result.is_ok(),
            "the CRD refuses release {}'s example {}: {result:?}",
            release.version,
            object["metadata"]["name"]
        );
    }

    let sample = generated(300);
    let old = admitted(&env, &old_crds, "old.compat.tidal.io", &sample).await;
    let new = admitted(&env, &new_crds, "new.compat.tidal.io", &sample).await;
    let accepted = old.iter().filter(|r| r.is_ok()).count();
    eprintln!(
        "generated: {} objects, {accepted} admitted by release {}",
        sample.len(),
        release.version
    );
    assert!(
        accepted >= 50 && accepted <= sample.len() - 50,
        "the sample spans the schema: {accepted} of {}",
        sample.len()
    );
    let broken: Vec<String> = sample
        .iter()
        .zip(old.iter().zip(&new))
        .filter(|(_, (old, new))| old.is_ok() && new.is_err())
        .map(|(object, (_, new))| {
            format!(
                "{}: {}",
                object["metadata"]["name"],
                new.as_ref().unwrap_err()
            )
        })
        .collect();
    assert!(
        broken.is_empty(),
        "the CRD refuses objects release {} admits:\n{}",
        release.version,
        broken.join("\n")
    );
}

/// The status manager's `managedFields` entry of `object`, under `f:status`.
fn status_fields(object: &DynamicObject) -> Value {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|entry| entry.subresource.as_deref() == Some("status"))
        .and_then(|entry| entry.fields_v1.as_ref())
        .map(|fields| fields.0["f:status"].clone())
        .unwrap_or(Value::Null)
}

/// Writes `rule`'s `lastScheduleTime` of `name` through the status subresource as a JSON
/// patch (as the controller does), as the manager `tidal-scheduler`; the object written.
async fn write_rule_status(api: &Api<DynamicObject>, name: &str, rule: usize) -> DynamicObject {
    let at = jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .expect("round");
    let patch: json_patch::Patch = serde_json::from_value(json!([{
        "op": "replace",
        "path": format!("/status/rules/{rule}/lastScheduleTime"),
        "value": at.to_string(),
    }]))
    .expect("a JSON patch");
    let params = PatchParams {
        field_manager: Some("tidal-scheduler".into()),
        ..PatchParams::default()
    };
    api.patch_status(name, &params, &Patch::Json::<()>(patch))
        .await
        .unwrap_or_else(|e| panic!("status write of {name}: {e}"))
}

#[tokio::test]
async fn a_status_written_under_the_previous_releases_crd_is_written_again_after_an_upgrade_and_back()
 {
    // The previous release kept `status.rules` as a list-map keyed by name, so stored
    // objects carry a managedFields entry per rule; this tree's CRD may change how the
    // list merges (it is atomic now): the status must stay writable both ways, and the
    // per-rule entries collapse at the first write under the new schema.
    const UPGRADE: &str = "upgrade.compat.tidal.io";
    let env = TestEnv::new().await;
    let release = previous().expect("release/releases");
    let old_crds = documents(&git_show(&release.commit, "deploy/crd.yaml"));
    let new_crds = documents(
        &std::fs::read_to_string(format!("{REPO}/deploy/crd.yaml")).expect("deploy/crd.yaml"),
    );
    install(&env, &old_crds, UPGRADE).await;
    let api = api(&env, &old_crds, UPGRADE, "TidalScheduler");
    let name = "upgraded";
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{UPGRADE}/v1alpha1"),
        "kind": "TidalScheduler",
        "metadata": { "name": name },
        "spec": {
            "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" },
            "triggers": { "times": { "rules": [
                { "name": "day", "cron": "CRON_TZ=UTC 0 0 8 * * *", "replicas": 5 },
                { "name": "night", "cron": "CRON_TZ=UTC 0 0 20 * * *", "replicas": 1 },
            ] } },
        },
    }))
    .expect("an object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create under the previous release's CRD");
    let status = json!({ "status": { "rules": [
        { "name": "day", "lastScheduleTime": "2026-12-07T08:00:00Z" },
        { "name": "night", "lastScheduleTime": "2026-12-06T20:00:00Z" },
    ] } });
    let params = PatchParams {
        field_manager: Some("tidal-scheduler".into()),
        ..PatchParams::default()
    };
    let written = api
        .patch_status(name, &params, &Patch::Merge(&status))
        .await
        .expect("status write under the previous release's CRD");
    let rules = status_fields(&written)["f:rules"].clone();
    let per_rule = |rules: &Value| {
        rules
            .as_object()
            .is_some_and(|keys| keys.keys().any(|key| key.starts_with("k:")))
    };
    let old_is_a_map = per_rule(&rules);

    install(&env, &new_crds, UPGRADE).await;
    let new_is_a_map = new_crds.iter().any(|crd| {
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"]["rules"]["x-kubernetes-list-type"]
            == "map"
    });
    // The API server takes up an updated CRD's schema shortly after it is applied: write
    // until a write is judged by it (every write must succeed meanwhile).
    eventually("a status write under this tree's CRD", || async {
        let written = write_rule_status(&api, name, 0).await;
        let rules = status_fields(&written)["f:rules"].clone();
        if per_rule(&rules) == new_is_a_map {
            Ok(())
        } else {
            Err(format!("the status manager's f:rules: {rules}"))
        }
    })
    .await;

    install(&env, &old_crds, UPGRADE).await;
    eventually(
        "a status write back under the previous release's CRD",
        || async {
            let written = write_rule_status(&api, name, 1).await;
            let rules = status_fields(&written)["f:rules"].clone();
            if per_rule(&rules) == old_is_a_map {
                Ok(())
            } else {
                Err(format!("the status manager's f:rules: {rules}"))
            }
        },
    )
    .await;
}
