//! Process faults: kills, terminations, rolling restarts, a frozen leader.

use std::time::Duration;

use jiff::Timestamp;

use super::{Drill, fault};
use crate::check::Fault;

/// SIGKILL of the leader; a fresh replica replaces it.
pub async fn leader_sigkill(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    let start = Timestamp::now();
    drill.local.kill_and_replace(&leader)?;
    let killed = fault("sigkill", &leader, true, start);
    drill.successor(&leader).await?;
    Ok(vec![killed])
}

/// SIGTERM of the leader, as when its pod is deleted: it releases the Lease on its way
/// out; a fresh replica replaces it.
pub async fn leader_terminated(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    let start = Timestamp::now();
    drill.local.signal(&leader, "TERM")?;
    let terminated = fault("sigterm", &leader, true, start);
    drill.successor(&leader).await?;
    drill.local.retire(&leader, Duration::from_secs(30))?;
    drill.local.add()?;
    Ok(vec![terminated])
}

/// Every replica SIGKILLed at once, then as many fresh ones started.
pub async fn kill_all(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    let start = Timestamp::now();
    let names = drill.local.names();
    for name in &names {
        drill.local.signal(name, "KILL")?;
    }
    for name in &names {
        drill.local.retire(name, Duration::from_secs(5))?;
    }
    for _ in &names {
        drill.local.add()?;
    }
    let killed = fault("kill-all", &leader, true, start);
    drill.successor(&leader).await?;
    Ok(vec![killed])
}

/// Each replica in turn: a fresh one started and ready, then the old one SIGTERMed and
/// gone (a Deployment's rolling update with maxUnavailable 0).
pub async fn rolling_restart(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let mut faults = Vec::new();
    for old in drill.local.names() {
        let new = drill.local.add()?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !drill.local.ready(&new) {
            if tokio::time::Instant::now() > deadline {
                return Err(format!("{new} not ready within 30 s"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let leading = drill.observer.holder() == old;
        let start = Timestamp::now();
        drill.local.signal(&old, "TERM")?;
        if leading {
            drill.successor(&old).await?;
        }
        drill.local.retire(&old, Duration::from_secs(30))?;
        faults.push(fault("sigterm", &old, leading, start));
    }
    Ok(faults)
}

/// The leader frozen by SIGSTOP while its writes for an instant are under way, until a
/// successor leads and one more instant passed, then thawed: it must find its term over
/// and write nothing.
pub async fn zombie(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    drill.mid_burst().await;
    let start = Timestamp::now();
    drill.local.signal(&leader, "STOP")?;
    drill.successor(&leader).await?;
    tokio::time::sleep(Duration::from_secs(drill.period.into())).await;
    drill.local.signal(&leader, "CONT")?;
    Ok(vec![fault("sigstop", &leader, true, start)])
}
