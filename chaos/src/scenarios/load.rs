//! Faults under load: a failover as 1,000 objects fire in the same second.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::{Drill, fault};
use crate::check::Fault;

/// SIGKILL of the leader 300 ms before the workload's next instant (every object fires
/// then); a fresh replica replaces it and the successor catches all of them up.
pub async fn failover_burst(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    let period = i64::from(drill.period);
    // The first instant at least a second ahead.
    let soon = Timestamp::now().as_second() + 1;
    let next = Timestamp::from_second((soon / period + 1) * period).map_err(|e| e.to_string())?;
    let kill_at = next - SignedDuration::from_millis(300);
    if let Ok(wait) = Duration::try_from(kill_at.duration_since(Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
    let start = Timestamp::now();
    drill.cluster.kill(&leader).await?;
    let killed = fault("sigkill", &leader, true, start);
    drill.successor(&killed).await?;
    Ok(vec![killed])
}
