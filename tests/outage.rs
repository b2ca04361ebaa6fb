//! The controller rides out control-plane outages: its own kube-apiserver and etcd
//! (this test binary's alone, since it stops them) are stopped and started again under
//! a running controller, each outage spanning several fire instants. It recovers without
//! a restart and accounts for every instant exactly once.

use tidal_harness as common;

use jiff::Timestamp;
use tidal_scheduler::api::TidalScheduler;

use common::cluster::TestEnv;
use common::replicas::{ALTERNATING, create_web};
use common::tide::*;

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_rides_out_apiserver_and_etcd_restarts() {
    let env = TestEnv::new().await;
    let tide = create_web(&env, &ALTERNATING, 100).await;
    let mut controller = start_controller(&env, "controller");
    wait_status(&env, "web", "an on-time trigger", |s| {
        s.history.iter().any(|h| !h.catch_up)
    })
    .await;

    for component in ["kube-apiserver", "etcd"] {
        tokio::task::block_in_place(|| env.control_plane().stop_component(component));
        // Let two fire instants pass during the outage.
        let missed = tide.triggers_between(Timestamp::now(), Timestamp::MAX, 2);
        sleep_past(missed[1].schedule_time).await;
        tokio::task::block_in_place(|| env.control_plane().start_stopped());
        let back = Timestamp::now();

        let recovered = wait_status(&env, "web", "an on-time trigger after the outage", |s| {
            s.history
                .iter()
                .any(|h| h.schedule_time.0 > back && !h.catch_up)
        })
        .await;
        assert!(
            controller.try_status().is_none(),
            "the controller exited during the {component} outage:\n{}",
            controller.log()
        );
        let history = &status(&recovered).history;
        assert!(
            history
                .iter()
                .any(|h| h.catch_up && h.schedule_time.0 >= missed[1].schedule_time),
            "the instants missed during the {component} outage were not caught up: {history:#?}"
        );
        assert_no_duplicate_history(status(&recovered));
        assert_every_instant_accounted(&tide, history);
    }
    // One catch-up per outage, each superseding the other instant it missed.
    let object = env.api::<TidalScheduler>().get("web").await.expect("get");
    let history = &status(&object).history;
    let catch_ups = history
        .iter()
        .filter(|h| h.catch_up && h.superseded > 0)
        .count();
    assert!(catch_ups >= 2, "{history:#?}");
    assert_every_instant_accounted(&tide, history);
}
