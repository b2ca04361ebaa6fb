//! The named scenarios: what each does, to which workload, and how much lateness its
//! fault may add beyond a leader's takeover. The faults themselves are in
//! [`crate::scenarios`].

use std::time::Duration;

use serde::Serialize;

/// Where a scenario can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Replicas as processes on the harness's control plane: every fault.
    Local,
    /// The Deployment of `kubectl apply -k deploy/` on the cluster of a kubeconfig:
    /// faults through the API and the node's container runtime.
    InCluster,
}

/// A fault scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// SIGKILL of the leader, replaced by a fresh replica.
    LeaderSigkill,
    /// The leader's pod deleted (locally: SIGTERM, then a fresh replica).
    LeaderPodDeleted,
    /// Every replica SIGKILLed at once, all replaced.
    KillAll,
    /// Each replica replaced in turn: a new one ready, then the old one SIGTERMed.
    RollingRestart,
    /// The leader frozen (SIGSTOP) past its Lease until a successor leads, then thawed.
    Zombie,
    /// The leader's connections to the API server reset (TCP RST) until a successor leads.
    PartitionCut,
    /// The leader's bytes to and from the API server held until a successor leads, then
    /// delivered: writes sent before the partition land late.
    PartitionBlackHole,
    /// Every replica's API responses delayed by 0.5–2 s for a while.
    SlowApiServer,
    /// kube-apiserver killed and started again.
    ApiServerRestart,
    /// etcd killed and started again.
    EtcdRestart,
    /// One replica's wall clock minutes off (libfaketime), then set right.
    ClockSkew,
    /// API Priority and Fairness squeezing the replicas' user: 429s for a while.
    Throttled,
    /// 1,000 objects firing in the same second, the leader SIGKILLed just before.
    FailoverBurst,
    /// The installation upgraded (or downgraded) by a command of the operator's
    /// (`--upgrade-command`: `helm upgrade …`, `kubectl apply -k …`) and rolled out
    /// replica by replica, 100 objects firing every 2 s. In-cluster only, and only when
    /// named: `run all` does not run it.
    Upgrade,
}

/// What a workload's objects target, one each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Targets {
    /// Deployments: on the local control plane nothing runs them; in a cluster each runs
    /// pods of the workload's image.
    Deployments,
    /// Widgets (`widgets.example.com`, a custom kind with `/scale`), which no controller
    /// acts on: the API server sees the controller's writes and nothing more, so that a
    /// small node carries a hundred objects scaled every 2 s (Deployments of Pending
    /// pods kept a 2-core node's API server busy with pod churn: ~31 of 50 triggers a
    /// second were applied, a backlog). In a cluster, the run grants the controller
    /// `widgets/scale` and maps the kind in its admission policy's ConfigMap.
    Widgets,
}

/// The objects a scenario runs: each fires every 2 s (or `period`), alternating levels.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// The two levels the rules alternate between.
    pub levels: [i32; 2],
    /// What they target.
    pub targets: Targets,
    /// How many TidalSchedulers.
    pub objects: usize,
    /// `Scale` mode, each with a Deployment of its own; otherwise `Status` mode.
    pub scale: bool,
    /// Seconds between fire instants.
    pub period: u32,
}

impl Workload {
    /// `objects` targeting Deployments, alternating between 2 and 3 replicas.
    const fn running(objects: usize, scale: bool, period: u32) -> Self {
        Workload {
            levels: [2, 3],
            targets: Targets::Deployments,
            objects,
            scale,
            period,
        }
    }
}

impl Scenario {
    /// Every scenario, in the order `run all` runs them.
    pub const ALL: [Scenario; 13] = [
        Scenario::LeaderSigkill,
        Scenario::LeaderPodDeleted,
        Scenario::KillAll,
        Scenario::RollingRestart,
        Scenario::Zombie,
        Scenario::PartitionCut,
        Scenario::PartitionBlackHole,
        Scenario::SlowApiServer,
        Scenario::ApiServerRestart,
        Scenario::EtcdRestart,
        Scenario::ClockSkew,
        Scenario::Throttled,
        Scenario::FailoverBurst,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::LeaderSigkill => "leader-sigkill",
            Scenario::LeaderPodDeleted => "leader-pod-deleted",
            Scenario::KillAll => "kill-all",
            Scenario::RollingRestart => "rolling-restart",
            Scenario::Zombie => "zombie",
            Scenario::PartitionCut => "partition-cut",
            Scenario::PartitionBlackHole => "partition-black-hole",
            Scenario::SlowApiServer => "slow-api-server",
            Scenario::ApiServerRestart => "api-server-restart",
            Scenario::EtcdRestart => "etcd-restart",
            Scenario::ClockSkew => "clock-skew",
            Scenario::Throttled => "throttled",
            Scenario::FailoverBurst => "failover-burst",
            Scenario::Upgrade => "upgrade",
        }
    }

    /// The modes it runs in.
    pub fn modes(self) -> &'static [Mode] {
        match self {
            Scenario::LeaderSigkill
            | Scenario::LeaderPodDeleted
            | Scenario::KillAll
            | Scenario::RollingRestart
            | Scenario::Zombie => &[Mode::Local, Mode::InCluster],
            Scenario::Upgrade => &[Mode::InCluster],
            _ => &[Mode::Local],
        }
    }

    /// Its objects.
    pub fn workload(self) -> Workload {
        match self {
            // Every 30 s: a 2-core machine shared with a build writes 1,000 statuses in
            // 10–15 s, so a shorter period would leave it never converged, always behind
            // the next instant (seen at 10 s: no correctness problem, a backlog).
            Scenario::FailoverBurst => Workload::running(1000, false, 30),
            // Enough concurrent writes to overrun a priority level of one share.
            Scenario::Throttled => Workload::running(30, true, 2),
            // An upgrade's objects in Scale mode, as many as an upgrade test should carry
            // across, on Widgets: the controller's writes are the whole load.
            Scenario::Upgrade => Workload {
                targets: Targets::Widgets,
                ..Workload::running(100, true, 2)
            },
            _ => Workload::running(3, true, 2),
        }
    }

    /// Lateness its fault may add beyond a takeover and the fault's own duration: the
    /// time to start replacements, slow round trips, throttled retries, 1,000 writes.
    pub fn allowance(self) -> Duration {
        match self {
            Scenario::KillAll
            | Scenario::RollingRestart
            | Scenario::LeaderPodDeleted
            | Scenario::Upgrade => Duration::from_secs(2),
            Scenario::SlowApiServer => Duration::from_secs(8),
            Scenario::Throttled => Duration::from_secs(10),
            Scenario::FailoverBurst => Duration::from_secs(15),
            _ => Duration::from_secs(1),
        }
    }

    /// Whether its fault can make applying a trigger fail (the API server refusing,
    /// timing out or unreachable): failed triggers are then no violation, as long as
    /// the level converges.
    pub fn failures_expected(self) -> bool {
        matches!(
            self,
            Scenario::SlowApiServer
                | Scenario::ApiServerRestart
                | Scenario::EtcdRestart
                | Scenario::Throttled
        )
    }

    /// Whether its replicas run under libfaketime.
    pub fn faked_clocks(self) -> bool {
        self == Scenario::ClockSkew
    }

    /// Whether its fault is on the replicas' connections, so that they must reach the API
    /// server through a proxy that can cut or slow them. The others connect directly: a
    /// proxy in the path would add its own CPU and latency to what a drill measures.
    pub fn proxied(self) -> bool {
        matches!(
            self,
            Scenario::PartitionCut | Scenario::PartitionBlackHole | Scenario::SlowApiServer
        )
    }
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
