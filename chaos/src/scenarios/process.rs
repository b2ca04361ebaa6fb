//! Process faults: kills, terminations, rolling restarts, a frozen leader.

use std::time::Duration;
use tidal_harness::wait::poll;

use jiff::Timestamp;

use super::{Drill, fault};
use crate::check::Fault;
use crate::cluster::Cluster;

/// SIGKILL of the leader; it is replaced (a fresh process, or kubelet restarting the
/// container).
pub async fn leader_sigkill(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    let start = Timestamp::now();
    drill.cluster.kill(&leader).await?;
    let mut killed = fault("sigkill", &leader, true, start);
    killed.restarted_in_place = matches!(drill.cluster, Cluster::InCluster(_));
    drill.successor(&killed).await?;
    Ok(vec![killed])
}

/// The leader's pod deleted (locally: SIGTERM): it releases the Lease on its way out and
/// a fresh replica replaces it.
pub async fn leader_terminated(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    let start = Timestamp::now();
    drill.cluster.terminate(&leader).await?;
    let terminated = fault("sigterm", &leader, true, start);
    drill.successor(&terminated).await?;
    Ok(vec![terminated])
}

/// Every replica SIGKILLed at once, all replaced.
pub async fn kill_all(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    let start = Timestamp::now();
    let in_place = drill.cluster.kill_all().await?;
    let mut killed = fault("kill-all", &leader, true, start);
    killed.restarted_in_place = in_place;
    drill.successor(&killed).await?;
    Ok(vec![killed])
}

/// Each replica in turn: a fresh one started and ready, then the old one SIGTERMed and
/// gone — a Deployment's rolling update with maxUnavailable 0 (in a cluster, the real
/// one: `kubectl rollout restart`).
pub async fn rolling_restart(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    if let Cluster::InCluster(cluster) = &*drill.cluster {
        let leader = drill.leader().await?;
        let start = Timestamp::now();
        cluster.rolling_restart(Duration::from_secs(300)).await?;
        let restarted = fault("rollout-restart", &leader, true, start);
        drill.successor(&restarted).await?;
        return Ok(vec![restarted]);
    }
    let mut faults = Vec::new();
    for old in drill.cluster.local()?.names() {
        let new = drill.cluster.local()?.add().await?;
        let local = drill.cluster.local()?;
        let ready = || async { local.ready(&new).then_some(()).ok_or_else(String::new) };
        poll(Duration::from_millis(50), Duration::from_secs(30), ready)
            .await
            .map_err(|_: String| format!("{new} not ready within 30 s"))?;
        let leading = drill.observer.holder() == old;
        let start = Timestamp::now();
        drill.cluster.local()?.signal(&old, "TERM")?;
        let terminated = fault("sigterm", &old, leading, start);
        if leading {
            drill.successor(&terminated).await?;
        }
        drill
            .cluster
            .local()?
            .retire(&old, Duration::from_secs(30))
            .await?;
        faults.push(terminated);
    }
    Ok(faults)
}

/// The installation upgraded (or downgraded) by the operator's next command and rolled
/// out: every replica replaced by one of the other version, the leader among them.
pub async fn upgrade(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let Cluster::InCluster(cluster) = &*drill.cluster else {
        return Err("an upgrade needs in-cluster mode".to_owned());
    };
    let leader = drill.leader().await?;
    let start = Timestamp::now();
    cluster
        .upgrade(drill.round, Duration::from_secs(300))
        .await?;
    let upgraded = fault("upgrade", &leader, true, start);
    drill.successor(&upgraded).await?;
    Ok(vec![upgraded])
}

/// The leader frozen by SIGSTOP while its writes for an instant are under way, until a
/// successor leads and one more instant passed, then thawed: it must find its term over
/// and write nothing.
pub async fn zombie(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    drill.mid_burst().await;
    let start = Timestamp::now();
    drill.cluster.freeze(&leader, true).await?;
    drill
        .successor(&fault("sigstop", &leader, true, start))
        .await?;
    tokio::time::sleep(Duration::from_secs(drill.period.into())).await;
    drill.cluster.freeze(&leader, false).await?;
    Ok(vec![fault("sigstop", &leader, true, start)])
}
