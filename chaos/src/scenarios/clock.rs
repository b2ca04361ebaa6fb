//! Clock faults: one replica's wall clock minutes off.

use std::time::Duration;

use jiff::Timestamp;
use tidal_harness::measure::random_below;

use super::{Drill, fault};
use crate::check::Fault;

/// The leader (every other round) or a standby skewed by 2–5 minutes, ahead or behind,
/// for three lease durations, then set right. A skewed leader steps down; a skewed
/// standby does not campaign.
pub async fn skew(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    let standbys: Vec<String> = drill
        .cluster
        .local()?
        .names()
        .into_iter()
        .filter(|name| *name != leader)
        .collect();
    let roll = random_below(Duration::from_secs(1000)).as_secs() as usize;
    let target = match standbys.get(roll % standbys.len().max(1)) {
        Some(standby) if drill.round % 2 == 1 => standby.clone(),
        _ => leader.clone(),
    };
    let minutes = 2 + roll % 4;
    let sign = if roll.is_multiple_of(2) { "-" } else { "+" };
    let start = Timestamp::now();
    let offset = format!("{sign}{}s", minutes * 60);
    drill.cluster.local()?.skew(&target, &offset)?;
    let leading = target == leader;
    if leading {
        drill
            .successor(&fault("clock", &target, true, start))
            .await?;
    }
    tokio::time::sleep(3 * drill.timing.duration).await;
    drill.cluster.local()?.skew(&target, "+0")?;
    Ok(vec![fault(
        &format!("clock {sign}{minutes}m"),
        &target,
        leading,
        start,
    )])
}
