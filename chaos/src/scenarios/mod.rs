//! One function per scenario: each injects one fault (or one round of them) into the
//! replicas of a [`Drill`], heals it, and says what it did and when.

mod clock;
mod control_plane;
mod load;
mod network;
mod process;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tidal_harness::measure::random_below;
use tidal_harness::wait::poll;

use crate::check::Fault;
use crate::cluster::Cluster;
use crate::observe::Observer;
use crate::scenario::Scenario;
use crate::timing::LeaseTiming;

/// What a fault works on.
pub struct Drill<'a> {
    /// The replicas (and locally the control plane).
    pub cluster: &'a mut Cluster,
    /// The watches (who leads).
    pub observer: &'a Observer,
    /// The replicas' Lease timing.
    pub timing: LeaseTiming,
    /// Seconds between the workload's fire instants.
    pub period: u32,
    /// How many faults were injected before this one.
    pub round: usize,
}

impl Drill<'_> {
    /// The Lease holder, once there is one among the running replicas.
    pub async fn leader(&self) -> Result<String, String> {
        let among = || async {
            let names = match self.cluster.replicas().await {
                Ok(names) => names,
                Err(error) => return Ok(Err(error)),
            };
            match self.observer.holder() {
                holder if names.contains(&holder) => Ok(Ok(holder)),
                holder => Err(format!(
                    "no leader among {names:?}: the Lease is held by {holder:?}"
                )),
            }
        };
        poll(Duration::from_millis(20), self.patience(), among).await?
    }

    /// The leader after `fault` (another holder, or the victim restarted in place:
    /// [`crate::check::took_over`]), waiting up to a takeover and then some.
    pub async fn successor(&self, fault: &Fault) -> Result<String, String> {
        self.observer.wait_takeover(self.patience(), fault).await
    }

    /// Sleeps until 5–25 ms after the workload's next instant (at least 300 ms away):
    /// while the leader's writes for it are in flight.
    pub async fn mid_burst(&self) {
        let period = i64::from(self.period);
        let soon = Timestamp::now() + SignedDuration::from_millis(300);
        let next = (soon.as_second() / period + 1) * period;
        let offset = 5 + random_below(Duration::from_millis(20)).as_millis() as i64;
        let at = Timestamp::from_second(next).expect("a valid instant")
            + SignedDuration::from_millis(offset);
        if let Ok(wait) = Duration::try_from(at.duration_since(Timestamp::now())) {
            tokio::time::sleep(wait).await;
        }
    }

    /// How long to wait for the Lease to change hands on a loaded machine.
    fn patience(&self) -> Duration {
        self.timing.takeover() + Duration::from_secs(30)
    }
}

/// A fault of `kind` on `target` from `start` until now.
fn fault(kind: &str, target: &str, leader: bool, start: Timestamp) -> Fault {
    Fault {
        kind: kind.to_owned(),
        target: target.to_owned(),
        leader,
        restarted_in_place: false,
        start,
        end: Timestamp::now(),
        round_trip_ms: None,
    }
}

/// Injects one round of `scenario`'s fault and heals it.
pub async fn inject(scenario: Scenario, drill: &mut Drill<'_>) -> Result<Vec<Fault>, String> {
    match scenario {
        Scenario::LeaderSigkill => process::leader_sigkill(drill).await,
        Scenario::LeaderPodDeleted => process::leader_terminated(drill).await,
        Scenario::KillAll => process::kill_all(drill).await,
        Scenario::RollingRestart => process::rolling_restart(drill).await,
        Scenario::Zombie => process::zombie(drill).await,
        Scenario::PartitionCut => network::partition(drill, false).await,
        Scenario::PartitionBlackHole => network::partition(drill, true).await,
        Scenario::SlowApiServer => network::slow(drill).await,
        Scenario::ApiServerRestart => control_plane::restart(drill, "kube-apiserver").await,
        Scenario::EtcdRestart => control_plane::restart(drill, "etcd").await,
        Scenario::ClockSkew => clock::skew(drill).await,
        Scenario::Throttled => control_plane::throttle(drill).await,
        Scenario::FailoverBurst => load::failover_burst(drill).await,
        Scenario::Upgrade => process::upgrade(drill).await,
    }
}
