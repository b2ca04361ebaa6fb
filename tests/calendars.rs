//! Calendars on a real kube-apiserver and etcd: the controller watches TidalCalendars and
//! ClusterTidalCalendars, re-plans every object using one when it changes, makes an object
//! `InvalidSpec` (level kept) when its calendar is missing or deleted, and never catches up
//! an instant on a skipped day. The schema refuses malformed calendars at admission.

use tidal_harness as common;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tidal_scheduler::api::{
    CalendarKind, CalendarRef, Calendars, ClusterTidalCalendar, TidalCalendar, TidalCalendarSpec,
    TidalScheduler, validate,
};
use tidal_scheduler::schedule::Tide;

use common::cluster::TestEnv;
use common::fixtures::deployment;
use common::tide::*;

/// Creates the namespace's Deployment `web`, the target of every object here.
async fn create_web(env: &TestEnv) {
    env.api::<k8s_openapi::api::apps::v1::Deployment>()
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create Deployment");
}

/// Two yearly rules (UTC midnight of 1 January and of 1 July), both skipping the days of
/// the TidalCalendar `holidays`: one of them always sets the level.
fn yearly_rules(name: &str, calendar: Value) -> Value {
    let mut manifest = manifest(
        name,
        "apps/v1",
        "Deployment",
        "web",
        "Status",
        &[
            ("new-year", "CRON_TZ=UTC 0 0 0 1 1 *", 7),
            ("mid-year", "CRON_TZ=UTC 0 0 0 1 7 *", 3),
        ],
    );
    for rule in manifest["spec"]["triggers"]["times"]["rules"]
        .as_array_mut()
        .unwrap()
    {
        rule["skipDays"] = json!([calendar.clone()]);
    }
    manifest
}

/// A Status-mode manifest on `web` with `rules`; the rule at `skipping` skips the
/// TidalCalendar `holidays`.
fn skipping_holidays(name: &str, rules: &[(&str, &str, i32)], skipping: usize) -> Value {
    let mut manifest = manifest(name, "apps/v1", "Deployment", "web", "Status", rules);
    manifest["spec"]["triggers"]["times"]["rules"][skipping]["skipDays"] =
        json!([{ "name": "holidays" }]);
    manifest
}

fn calendar_manifest(kind: &str, name: &str, dates: &[String]) -> Value {
    let days: Vec<Value> = dates.iter().map(|d| json!({ "date": d })).collect();
    json!({
        "apiVersion": "scheduling.tidal.io/v1alpha1",
        "kind": kind,
        "metadata": { "name": name },
        "spec": { "timeZone": "UTC", "days": days },
    })
}

async fn create_calendar(env: &TestEnv, name: &str, dates: &[String]) -> TidalCalendar {
    let calendar: TidalCalendar =
        serde_json::from_value(calendar_manifest("TidalCalendar", name, dates)).unwrap();
    env.api::<TidalCalendar>()
        .create(&PostParams::default(), &calendar)
        .await
        .expect("create TidalCalendar")
}

async fn set_days(api: &Api<TidalCalendar>, name: &str, dates: &[String]) {
    let days: Vec<Value> = dates.iter().map(|d| json!({ "date": d })).collect();
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "days": days } })),
    )
    .await
    .expect("edit the calendar");
}

/// The calendars a test gives `validate`, to compute what the controller should plan.
struct Given(Vec<(CalendarRef, TidalCalendarSpec)>);

impl Calendars for Given {
    fn find(&self, reference: &CalendarRef, _: &str) -> Option<TidalCalendarSpec> {
        self.0
            .iter()
            .find(|(r, _)| r == reference)
            .map(|(_, spec)| spec.clone())
    }
}

fn utc_dates(dates: &[String]) -> TidalCalendarSpec {
    TidalCalendarSpec {
        time_zone: "UTC".into(),
        days: dates
            .iter()
            .map(|d| tidal_scheduler::api::CalendarDay {
                date: Some(d.clone()),
                ..Default::default()
            })
            .collect(),
    }
}

fn tide_with(object: &TidalScheduler, reference: &CalendarRef, dates: &[String]) -> Tide {
    let given = Given(vec![(reference.clone(), utc_dates(dates))]);
    validate(object, &given, Timestamp::now())
        .expect("valid with the calendar")
        .tide
}

fn namespaced(name: &str) -> CalendarRef {
    CalendarRef {
        name: name.into(),
        kind: CalendarKind::TidalCalendar,
    }
}

fn date_of(t: Timestamp) -> String {
    t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string()
}

#[tokio::test]
async fn a_calendar_edit_re_plans_every_object_using_it_at_once() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_web(&env).await;
    let calendars = env.api::<TidalCalendar>();
    create_calendar(&env, "holidays", &[]).await;
    let reference = namespaced("holidays");
    let created = create(&env, yearly_rules("web", json!({ "name": "holidays" }))).await;
    let before = tide_with(&created, &reference, &[])
        .level_at(Timestamp::now())
        .unwrap();
    let reconciled = wait_status(&env, "web", "the level without holidays", |s| {
        s.desired_replicas == Some(before.replicas) && ready_reason_is(s, "TriggerActive")
    })
    .await;

    // Make the day of the trigger in effect a holiday: the other rule's last fire is the
    // level now, though the object itself did not change.
    let holiday = vec![date_of(before.schedule_time)];
    set_days(&calendars, "holidays", &holiday).await;
    let after = tide_with(&created, &reference, &holiday)
        .level_at(Timestamp::now())
        .unwrap();
    assert_ne!(after.rule, before.rule);
    let replanned = wait_status(&env, "web", "the level with the holiday", |s| {
        s.desired_replicas == Some(after.replicas) && s.active_rule.as_deref() == Some(&after.rule)
    })
    .await;
    assert_eq!(
        replanned.metadata.generation, reconciled.metadata.generation,
        "only the calendar changed"
    );
    let rule = status(&replanned)
        .rules
        .iter()
        .find(|r| r.name == before.rule)
        .unwrap();
    assert!(
        rule.last_schedule_time
            .as_ref()
            .is_none_or(|t| t.0 < before.schedule_time),
        "the skipped instant is no instant: {rule:?}"
    );
    assert!(
        status(&replanned)
            .history
            .iter()
            .all(|h| h.schedule_time.0 != after.schedule_time || h.rule != after.rule),
        "a re-plan records no trigger: an older instant is not a new one"
    );

    // Holiday over: the first level is back.
    set_days(&calendars, "holidays", &[]).await;
    wait_status(&env, "web", "the level without holidays again", |s| {
        s.desired_replicas == Some(before.replicas)
    })
    .await;
}

#[tokio::test]
async fn a_missing_calendar_makes_the_object_invalid_and_keeps_the_level() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_web(&env).await;
    let calendars = env.api::<TidalCalendar>();

    // Missing from the start: InvalidSpec naming the rule and the calendar.
    create(&env, yearly_rules("web", json!({ "name": "holidays" }))).await;
    let missing = format!(
        "spec.triggers.times.rules[0].skipDays[0] (new-year): TidalCalendar {}/holidays not found",
        env.namespace
    );
    let invalid = wait_status(&env, "web", "InvalidSpec", |s| {
        ready_reason_is(s, "InvalidSpec")
    })
    .await;
    let (ready_status, _, message) = ready(status(&invalid));
    assert_eq!(ready_status, "False");
    assert!(message.contains(&missing), "{message}");
    assert!(
        message.contains("rules[1].skipDays[0] (mid-year)"),
        "{message}"
    );
    assert_eq!(status(&invalid).next_trigger_time, None);

    // Created: the object is re-planned without being touched.
    create_calendar(&env, "holidays", &[]).await;
    let active = wait_status(&env, "web", "Ready once the calendar exists", |s| {
        ready_reason_is(s, "TriggerActive")
    })
    .await;
    let level = status(&active).desired_replicas;
    assert!(level.is_some());

    // Deleted: InvalidSpec again, the level stays as it was.
    calendars
        .delete("holidays", &DeleteParams::default())
        .await
        .expect("delete the calendar");
    let deleted = wait_status(&env, "web", "InvalidSpec after the deletion", |s| {
        ready_reason_is(s, "InvalidSpec")
    })
    .await;
    assert_eq!(status(&deleted).desired_replicas, level, "the level stays");
    assert!(ready(status(&deleted)).2.contains(&missing));
    wait_event(&env, "web", "InvalidSpec", "holidays not found").await;
}

#[tokio::test]
async fn a_cluster_calendar_serves_every_namespace() {
    let env = TestEnv::new().await;
    let _controller = start_controller(&env, "controller");
    create_web(&env).await;
    // Cluster-scoped: named after the test's namespace so parallel tests do not share it.
    let name = format!("{}-holidays", env.namespace);
    let cluster: Api<ClusterTidalCalendar> = Api::all(env.client.clone());
    let calendar: ClusterTidalCalendar =
        serde_json::from_value(calendar_manifest("ClusterTidalCalendar", &name, &[])).unwrap();
    cluster
        .create(&PostParams::default(), &calendar)
        .await
        .expect("create ClusterTidalCalendar");
    let reference = CalendarRef {
        name: name.clone(),
        kind: CalendarKind::ClusterTidalCalendar,
    };
    let created = create(
        &env,
        yearly_rules(
            "web",
            json!({ "name": name, "kind": "ClusterTidalCalendar" }),
        ),
    )
    .await;
    let before = tide_with(&created, &reference, &[])
        .level_at(Timestamp::now())
        .unwrap();
    wait_status(&env, "web", "the level without holidays", |s| {
        s.desired_replicas == Some(before.replicas)
    })
    .await;
    let holiday = vec![date_of(before.schedule_time)];
    let days = json!({ "spec": { "days": [{ "date": holiday[0] }] } });
    cluster
        .patch(&name, &PatchParams::default(), &Patch::Merge(days))
        .await
        .expect("edit the cluster calendar");
    let after = tide_with(&created, &reference, &holiday)
        .level_at(Timestamp::now())
        .unwrap();
    wait_status(&env, "web", "the level with the holiday", |s| {
        s.desired_replicas == Some(after.replicas)
    })
    .await;
    cluster
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete the cluster calendar");
    let deleted = wait_status(&env, "web", "InvalidSpec", |s| {
        ready_reason_is(s, "InvalidSpec")
    })
    .await;
    assert!(
        ready(status(&deleted))
            .2
            .contains(&format!("ClusterTidalCalendar {name} not found")),
        "{deleted:?}"
    );
}

#[tokio::test]
async fn a_restart_never_catches_up_an_instant_on_a_skipped_day() {
    let env = TestEnv::new().await;
    create_web(&env).await;
    // Today and tomorrow (UTC) are holidays for `boost`, so the test may cross midnight.
    let now = Timestamp::now();
    let holidays = vec![
        date_of(now),
        date_of(now + jiff::SignedDuration::from_hours(24)),
    ];
    create_calendar(&env, "holidays", &holidays).await;
    let manifest = skipping_holidays(
        "web",
        &[
            ("tick", "CRON_TZ=UTC */4 * * * * *", 2),
            ("boost", "CRON_TZ=UTC 2/4 * * * * *", 50),
        ],
        1,
    );
    let created = create(&env, manifest).await;
    let tide = tide_with(&created, &namespaced("holidays"), &holidays);

    // Two `tick` instants pass with nobody acting; `boost` instants lie between them.
    let controller = start_controller(&env, "controller-1");
    let Restarted {
        stopped,
        controller: _controller,
        caught_up,
        missed,
        ..
    } = restart_after_missed_instants(&env, controller, "web", &tide).await;
    assert!(missed.iter().all(|t| t.rule == "tick"), "{missed:?}");
    let applied = &status(&caught_up).history[0];
    assert!(applied.catch_up, "{applied:?}");
    assert_eq!(
        (applied.rule.as_str(), applied.replicas),
        ("tick", 2),
        "the skipped boost is never caught up"
    );
    assert!(
        status(&caught_up).history.iter().all(|h| h.rule != "boost"),
        "{:?}",
        status(&caught_up).history
    );
    let since = status(&stopped).last_trigger_time.as_ref().unwrap().0;
    // Superseded counts `tick` instants only: a skipped instant is no instant.
    let expected = tide.superseded_between(since, applied.schedule_time.0);
    assert!(expected >= 1);
    assert_eq!(applied.superseded, expected as i64);
    assert_no_duplicate_history(status(&caught_up));
}

#[tokio::test]
async fn the_schema_refuses_a_malformed_calendar_naming_the_field() {
    let env = TestEnv::new().await;
    let calendars = env.api::<TidalCalendar>();
    let cases = [
        (
            json!([{ "date": "2026-12-25", "yearly": "12-25" }]),
            "set exactly one of date, from/to (a range) or yearly",
        ),
        (
            json!([{ "from": "2026-12-24" }]),
            "a range needs both from and to",
        ),
        (
            json!([{ "from": "2026-12-26", "to": "2026-12-24" }]),
            "to is before from",
        ),
        (json!([{ "yearly": "02-30" }]), "no month has this day"),
        (json!([{ "yearly": "13-01" }]), "spec.days[0].yearly"),
        (json!([{ "date": "2026-13-01" }]), "spec.days[0].date"),
        (json!([{ "date": "25.12.2026" }]), "spec.days[0].date"),
    ];
    for (index, (days, message)) in cases.into_iter().enumerate() {
        let calendar: TidalCalendar = serde_json::from_value(json!({
            "apiVersion": "scheduling.tidal.io/v1alpha1",
            "kind": "TidalCalendar",
            "metadata": { "name": format!("bad-{index}") },
            "spec": { "timeZone": "UTC", "days": days },
        }))
        .unwrap();
        let error = calendars
            .create(&PostParams::default(), &calendar)
            .await
            .expect_err(&format!("{days} is refused"))
            .to_string();
        assert!(error.contains(message), "{days}: {error}");
    }
    let good: TidalCalendar = serde_json::from_value(json!({
        "apiVersion": "scheduling.tidal.io/v1alpha1",
        "kind": "TidalCalendar",
        "metadata": { "name": "good" },
        "spec": { "timeZone": "Europe/London", "days": [
            { "date": "2026-12-25", "name": "Christmas Day" },
            { "from": "2026-12-24", "to": "2027-01-02" },
            { "yearly": "02-29" },
        ] },
    }))
    .unwrap();
    let created = calendars
        .create(&PostParams::default(), &good)
        .await
        .expect("a valid calendar is admitted");
    assert_eq!(created.name_any(), "good");
}

#[tokio::test]
async fn kubectl_tidal_plan_live_plans_what_the_controller_sees() {
    let env = TestEnv::new().await;
    let holiday = vec!["2026-12-25".to_owned()];
    create_calendar(&env, "holidays", &holiday).await;
    let desk = skipping_holidays(
        "desk",
        &[
            ("office", "CRON_TZ=UTC 0 0 9 * * *", 12),
            ("evening", "CRON_TZ=UTC 0 0 18 * * *", 3),
        ],
        0,
    );
    create(&env, desk).await;
    let mut broken = yearly_rules("broken", json!({ "name": "no-such-calendar" }));
    broken["metadata"]["name"] = json!("broken");
    create(&env, broken).await;

    // kubectl finds the plugin on PATH as `kubectl-tidal`.
    let plugins = std::env::temp_dir().join(format!("kubectl-plugins-{}", env.namespace));
    std::fs::create_dir_all(&plugins).unwrap();
    let plugin = plugins.join("kubectl-tidal");
    let _ = std::fs::remove_file(&plugin);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tidal-scheduler"), &plugin).unwrap();
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let plan = |args: &[&str]| {
        env.control_plane()
            .kubectl()
            .env("PATH", &path)
            .args(["tidal", "plan", "--live"])
            .args(args)
            .args(["--from", "2026-12-24T00:00:00Z", "--days", "3"])
            .output()
            .expect("kubectl runs")
    };
    let out = plan(&["-n", &env.namespace, "-o", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "one object is invalid: {stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "TidalScheduler {}/broken: spec.triggers.times.rules[0].skipDays[0] (new-year): \
             TidalCalendar {}/no-such-calendar not found",
            env.namespace, env.namespace
        )),
        "{stderr}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let objects = report["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 1, "{report:#}");
    assert_eq!(objects[0]["object"], format!("{}/desk", env.namespace));
    let skipped: Vec<&str> = objects[0]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["time"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["2026-12-25T09:00:00Z"]);
    assert_eq!(
        report["invalid"][0]["object"],
        format!("{}/broken", env.namespace)
    );

    // -A sees the namespace's objects among every other test's.
    let out = plan(&["-A", "-o", "svg"]);
    let svg = String::from_utf8_lossy(&out.stdout);
    assert!(
        svg.contains(&format!(r#"data-object="{}/desk""#, env.namespace)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&plugins).unwrap();
}

/// The ClusterRole rules of `deploy/rbac.yaml` without the calendar rule, and the Lease
/// rule, as a Role of the test's namespace for `user`: the controller, but blind to
/// calendars (as after an upgrade that did not install their CRDs).
async fn grant_all_but_calendars(env: &TestEnv, user: &str) {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
    let manifests = common::cluster::read_manifests(
        &std::path::Path::new(common::cluster::REPO).join("deploy/rbac.yaml"),
    );
    let cluster_role = manifests
        .iter()
        .find(|m| m.types.as_ref().is_some_and(|t| t.kind == "ClusterRole"))
        .expect("deploy/rbac.yaml has a ClusterRole");
    let mut rules: Vec<PolicyRule> =
        serde_json::from_value(cluster_role.data["rules"].clone()).expect("rules");
    rules.retain(|rule| {
        rule.resources
            .iter()
            .flatten()
            .all(|r| !r.contains("calendars"))
    });
    rules.push(PolicyRule {
        api_groups: Some(vec!["coordination.k8s.io".into()]),
        resources: Some(vec!["leases".into()]),
        verbs: ["get", "create", "update", "patch"]
            .map(String::from)
            .to_vec(),
        ..PolicyRule::default()
    });
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "calendar-blind" },
        "rules": rules,
    }))
    .unwrap();
    env.api::<Role>()
        .create(&PostParams::default(), &role)
        .await
        .expect("create Role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "calendar-blind" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "calendar-blind" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))
    .unwrap();
    env.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .expect("create RoleBinding");
}

#[tokio::test]
async fn objects_without_calendars_stay_on_time_when_calendars_cannot_be_read() {
    let env = TestEnv::new().await;
    create_web(&env).await;
    let user = format!("calendar-blind-{}", env.namespace);
    grant_all_but_calendars(&env, &user).await;
    create(
        &env,
        manifest(
            "plain",
            "apps/v1",
            "Deployment",
            "web",
            "Status",
            &[
                ("even", "CRON_TZ=UTC */4 * * * * *", 2),
                ("odd", "CRON_TZ=UTC 2/4 * * * * *", 3),
            ],
        ),
    )
    .await;
    create(
        &env,
        yearly_rules("with-calendar", json!({ "name": "holidays" })),
    )
    .await;
    let controller = start_replica_env(
        &env,
        "controller",
        &TEST_LEASE,
        env.control_plane().kubeconfig(),
        &[("KUBE_RS_DEBUG_IMPERSONATE_USER", &user)],
    );
    wait_logged(&controller, "watching calendars failed").await;
    // Every 2 s a trigger, each applied by the timer armed for it: the failing calendar
    // watches hold nothing back.
    let on_time = wait_status(&env, "plain", "four on-time triggers in a row", |s| {
        s.history.len() >= 4 && s.history[..4].iter().all(|h| !h.catch_up)
    })
    .await;
    assert_no_duplicate_history(status(&on_time));
    // The object with a calendar is neither planned nor declared invalid: it waits.
    wait_logged(&controller, "caches have not listed yet").await;
    let waiting = env
        .api::<TidalScheduler>()
        .get("with-calendar")
        .await
        .expect("get");
    assert!(
        waiting
            .status
            .as_ref()
            .is_none_or(|s| !ready_reason_is(s, "InvalidSpec")),
        "{:?}",
        waiting.status
    );
}

/// One tenant's costliest objects — five of 100 every-second rules, each skipping ten
/// calendars of 1,000 interleaved dates that cover every day, all re-planned whenever one
/// of those calendars is edited, every 2 s here — delay neither another namespace's
/// triggers nor the Lease. (Before planning was bounded and moved off the controller's
/// threads, that namespace had none of ~30 triggers applied in a minute.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_costly_tenant_delays_neither_another_namespaces_triggers_nor_the_lease() {
    use common::replicas::{HolderLog, lease_state};
    use common::tenant;
    const COSTLY: usize = 5;
    const WINDOW: usize = 10;

    let costly = TestEnv::new().await;
    let other = TestEnv::new().await;
    let first = Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .checked_sub(jiff::Span::new().days(400))
        .unwrap();
    let calendars = costly.api::<TidalCalendar>();
    for k in 0..tenant::CALENDARS {
        let calendar: TidalCalendar = serde_json::from_value(tenant::calendar(k, first)).unwrap();
        calendars
            .create(&PostParams::default(), &calendar)
            .await
            .expect("create a costly calendar");
    }
    create_web(&costly).await;
    create_web(&other).await;
    let mut plain = manifest(
        "plain",
        "apps/v1",
        "Deployment",
        "web",
        "Scale",
        &[
            ("even", "CRON_TZ=UTC */4 * * * * *", 2),
            ("odd", "CRON_TZ=UTC 2/4 * * * * *", 3),
        ],
    );
    plain["spec"]["historyLimit"] = json!(WINDOW + 5);
    let plain = create(&other, plain).await;
    let tide = validate(&plain, &tidal_scheduler::api::NoCalendars, Timestamp::now())
        .expect("valid")
        .tide;

    let namespaces = format!("{},{}", costly.namespace, other.namespace);
    let mut args = vec![
        "run",
        "--namespace",
        &namespaces,
        "--log-format",
        "json",
        "--lease-namespace",
        &other.namespace,
        "--identity",
        "controller",
        "--metrics-address",
        "127.0.0.1:0",
    ];
    args.extend(TEST_LEASE);
    let _controller = other.run_binary("controller", &args);
    let holders = HolderLog::start(&other);
    holders.wait_for("controller").await;
    let (_, transitions) = lease_state(&other).await;
    wait_status(&other, "plain", "a first trigger", |s| {
        !s.history.is_empty()
    })
    .await;

    // Then the costly tenant arrives, and every 2 s edits a calendar all its objects skip:
    // each edit re-plans them all.
    let start = Timestamp::now();
    for i in 0..COSTLY {
        let name = format!("costly-{i}");
        create(&costly, tenant::scheduler(&name, 100, "web")).await;
    }
    let edits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let editor = {
        let (calendars, edits) = (calendars.clone(), edits.clone());
        tokio::spawn(async move {
            let mut calendar = tenant::calendar(0, first);
            let last = calendar["spec"]["days"][tenant::ENTRIES - 1]["date"].clone();
            loop {
                // Its last date (27 years ahead) moves further out and back: far beyond
                // the rules' five-year search, so they still never fire.
                let n = edits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let date = if n % 2 == 0 {
                    json!("2090-01-01")
                } else {
                    last.clone()
                };
                calendar["spec"]["days"][tenant::ENTRIES - 1]["date"] = date;
                calendars
                    .patch(
                        &tenant::calendar_name(0),
                        &PatchParams::default(),
                        &Patch::Merge(json!({ "spec": calendar["spec"] })),
                    )
                    .await
                    .expect("edit the calendar");
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
        })
    };
    let after_start = move |h: &&tidal_scheduler::api::HistoryEntry| h.schedule_time.0 > start;
    let status = wait_status(&other, "plain", "triggers while the edits go on", |s| {
        s.history.iter().filter(after_start).count() >= WINDOW
    })
    .await;
    let edited = edits.load(std::sync::atomic::Ordering::SeqCst);
    editor.abort();

    // Every instant of the window applied by the timer armed for it, once: none late
    // enough to be a catch-up or to supersede the next.
    let window: Vec<_> = status
        .status
        .as_ref()
        .unwrap()
        .history
        .iter()
        .filter(after_start)
        .cloned()
        .collect();
    assert!(
        window.iter().all(|h| !h.catch_up && h.superseded == 0),
        "late triggers while the costly tenant re-planned: {window:#?}"
    );
    assert_every_instant_accounted(&tide, &window);
    // The costly objects were planned, and their calendar edited meanwhile: the load was
    // there.
    for i in 0..COSTLY {
        wait_status(&costly, &format!("costly-{i}"), "the costly plan", |s| {
            ready_reason_is(s, "WaitingForFirstTrigger")
        })
        .await;
    }
    assert!(
        edited >= 2,
        "only {edited} calendar edits during the window"
    );
    // The Lease stayed with the one replica all along.
    let holders_seen: Vec<String> = holders.changes().into_iter().map(|(_, h)| h).collect();
    assert_eq!(holders_seen, vec!["controller".to_owned()]);
    assert_eq!(
        lease_state(&other).await,
        ("controller".to_owned(), transitions)
    );
}
