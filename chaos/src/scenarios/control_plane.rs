//! Faults of the control plane: restarts, and API Priority and Fairness throttling.

use std::time::Duration;

use jiff::Timestamp;

use super::{Drill, fault};
use crate::check::Fault;

/// `component` (`kube-apiserver` or `etcd`) killed, down for a second, started again.
pub async fn restart(drill: &mut Drill<'_>, component: &str) -> Result<Vec<Fault>, String> {
    let start = Timestamp::now();
    let outage = Duration::from_secs(1);
    drill.cluster.local()?.restart(component, outage).await?;
    let restarted = fault("restart", component, false, start);
    drill.leader().await?;
    Ok(vec![restarted])
}

/// The replicas' user squeezed to a priority level of one share (429s) for three lease
/// durations.
pub async fn throttle(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let start = Timestamp::now();
    drill.cluster.local()?.throttle().await?;
    tokio::time::sleep(3 * drill.timing.duration).await;
    drill.cluster.local()?.unthrottle().await?;
    let throttled = fault("throttle", "replicas' user", false, start);
    drill.leader().await?;
    Ok(vec![throttled])
}
