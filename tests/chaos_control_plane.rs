//! The chaos scenarios that restart this binary's own kube-apiserver and etcd, one after
//! the other (see `chaos.rs` for the others).

use std::time::Duration;

use tidal_chaos::report::table;
use tidal_chaos::run::{Limits, Patience, run_local};
use tidal_chaos::scenario::Scenario;

#[tokio::test(flavor = "multi_thread")]
async fn api_server_and_etcd_restarts() {
    for scenario in [Scenario::ApiServerRestart, Scenario::EtcdRestart] {
        let limits = Limits {
            faults: 2,
            duration: Duration::from_secs(300),
            patience: Patience::Loaded,
            period: None,
            objects: None,
        };
        let report = run_local(scenario, limits)
            .await
            .unwrap_or_else(|e| panic!("{scenario}: {e}"));
        eprint!("{}", table(std::slice::from_ref(&report)));
        assert!(report.passed(), "{scenario}: {:?}", report.problems);
        assert_eq!(report.faults.len(), 2);
    }
}
