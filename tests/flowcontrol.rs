//! `deploy/flowcontrol.yaml` on the real API server: API Priority and Fairness puts the
//! controller's service account in its own priority level and its Lease requests in the
//! cluster's `leader-election` level, and leaves other clients where they were. The API
//! server names the level of every response, 403s included: classification comes before
//! authorization, so the impersonated users need no rights at all.

use tidal_harness as common;

use common::cluster::TestEnv;
use common::flowcontrol::{CONTROLLER_USER, install, level_of, level_uid, wait_classified};

#[tokio::test]
async fn the_controllers_requests_get_their_own_level_and_its_lease_the_leader_elections() {
    let env = TestEnv::new().await;
    install(&env)
        .await
        .expect("install deploy/flowcontrol.yaml");
    let controller = env.control_plane().client_as(CONTROLLER_USER).await;
    let neighbour = env
        .control_plane()
        .client_as(&format!(
            "system:serviceaccount:{}:neighbour",
            env.namespace
        ))
        .await;
    let objects = format!(
        "/apis/scheduling.tidal.io/v1alpha1/namespaces/{}/tidalschedulers",
        env.namespace
    );
    let lease = "/apis/coordination.k8s.io/v1/namespaces/tidal-system/leases/tidal-scheduler";

    wait_classified(&env, &controller, &objects, "tidal-scheduler").await;
    let ours = level_uid(&env, "tidal-scheduler").await.unwrap();
    let leader_election = level_uid(&env, "leader-election").await.unwrap();
    assert_eq!(
        level_of(&controller, lease).await.unwrap(),
        leader_election,
        "its Lease at the leader-election level"
    );
    let other = level_of(&neighbour, &objects).await.unwrap();
    assert_ne!(
        other, ours,
        "another service account stays in its own level"
    );
    assert_ne!(other, leader_election);
    let other_lease = level_of(&neighbour, lease).await.unwrap();
    assert_ne!(
        other_lease, leader_election,
        "nobody else's request to that Lease is lifted"
    );
}
