//! A status the controller did not write never silences an object, on a real
//! kube-apiserver and etcd: a `lastTriggerTime` in the year 2100 written through the
//! status subresource (a restore from another cluster's backup, a hand edit) is not taken
//! as the watermark. The controller says so once — a Warning Event and the Ready message
//! naming the field and its value — and goes on applying every instant exactly once.

use tidal_harness as common;

use jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tidal_scheduler::api::TidalScheduler;

use common::cluster::TestEnv;
use common::replicas::{ALTERNATING, create_web};
use common::tide::*;

const FUTURE: &str = "2100-01-01T00:00:00Z";

#[tokio::test(flavor = "multi_thread")]
async fn a_watermark_from_the_future_is_ignored_said_once_and_triggers_go_on() {
    let env = TestEnv::new().await;
    let tide = create_web(&env, &ALTERNATING, 100).await;
    let _controller = start_controller(&env, "controller");
    let started = Timestamp::now();
    wait_status(&env, "web", "a first trigger", |s| {
        s.history.iter().any(|h| h.schedule_time.0 > started)
    })
    .await;

    let restore = json!({ "status": {
        "lastTriggerTime": FUTURE,
        "lastTriggeredRule": "restored",
    }});
    env.api::<TidalScheduler>()
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&restore))
        .await
        .expect("write the status from elsewhere");
    let restored = Timestamp::now();

    let field = format!("status.lastTriggerTime {FUTURE}");
    let said = wait_status(&env, "web", "the Ready message naming the field", |s| {
        s.ready()
            .is_some_and(|ready| ready.message.contains(&field))
    })
    .await;
    let corrected = status(&said);
    assert_ne!(
        corrected
            .last_trigger_time
            .as_ref()
            .map(|t| t.0.to_string()),
        Some(FUTURE.to_owned()),
        "the correcting write keeps the impossible watermark"
    );
    wait_event(&env, "web", "ImpossibleStatus", &field).await;

    // Two instants after the restore, each applied (and recorded) once.
    let later = wait_status(&env, "web", "two triggers after the restore", |s| {
        s.history
            .iter()
            .filter(|h| h.schedule_time.0 > restored)
            .count()
            >= 2
    })
    .await;
    let history = &status(&later).history;
    assert_no_duplicate_history(status(&later));
    assert_every_instant_accounted(&tide, history);
    assert!(
        history
            .iter()
            .all(|h| h.schedule_time.0 <= Timestamp::now()),
        "an entry from the future survived: {history:#?}"
    );

    let warnings: Vec<_> = events_about(&env, "web")
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ImpossibleStatus"))
        .collect();
    assert_eq!(warnings.len(), 1, "said once: {warnings:#?}");
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert!(
        warnings[0].series.is_none(),
        "said again: {:?}",
        warnings[0].series
    );
}
