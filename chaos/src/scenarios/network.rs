//! Network faults between the replicas and the API server, through Toxiproxy.

use std::time::Duration;

use jiff::Timestamp;
use tidal_harness::toxiproxy::Toxic;

use super::{Drill, fault};
use crate::check::Fault;

/// The leader partitioned from the API server while its writes for an instant are in
/// flight, until a successor leads and one more instant passed, then healed: cut
/// (connections reset) or black hole (bytes held, then delivered — writes sent before
/// the partition land after the successor acted, and must be refused).
pub async fn partition(drill: &mut Drill<'_>, black_hole: bool) -> Result<Vec<Fault>, String> {
    let leader = drill.leader().await?;
    let (toxic, kind) = if black_hole {
        (Toxic::BlackHole, "black-hole")
    } else {
        (Toxic::Cut, "cut")
    };
    drill.mid_burst().await;
    let start = Timestamp::now();
    drill.cluster.local()?.partition(&leader, toxic)?;
    drill.successor(&fault(kind, &leader, true, start)).await?;
    tokio::time::sleep(Duration::from_secs(drill.period.into())).await;
    drill.cluster.local()?.heal(&leader)?;
    Ok(vec![fault(kind, &leader, true, start)])
}

/// Every replica's responses from the API server delayed by 0.5–2 s for three lease
/// durations.
pub async fn slow(drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    let toxic = Toxic::Slow {
        latency: Duration::from_millis(1250),
        jitter: Duration::from_millis(750),
    };
    let names = drill.cluster.local()?.names();
    let start = Timestamp::now();
    for name in &names {
        drill.cluster.local()?.partition(name, toxic)?;
    }
    let held = tokio::time::Instant::now() + 3 * drill.timing.duration;
    // What the fault did: a request through one replica's proxy, slowed.
    let round_trip = drill.cluster.local()?.round_trip(&names[0]).await?;
    tokio::time::sleep_until(held).await;
    for name in &names {
        drill.cluster.local()?.heal(name)?;
    }
    Ok(vec![Fault {
        round_trip_ms: Some(round_trip.as_secs_f64() * 1000.0),
        ..fault("slow", "all replicas", false, start)
    }])
}
