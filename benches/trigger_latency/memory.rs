//! The controller's resident memory with many objects of 5 rules each.

use kube::api::PostParams;
use tidal_harness::cluster::TestEnv;
use tidal_harness::fixtures::deployment;
use tidal_harness::measure::proc_status_mib;
use tidal_scheduler::api::TidalScheduler;

use crate::controller::run_controller;
use crate::options::{Apply, Options};
use crate::workload::{create_all, tide_manifest, wait_all_reconciled};

/// Prints the controller's resident memory with `objects` objects of 5 rules each, in
/// `Status` mode whatever the options' mode (all on the Deployment `web`).
pub async fn memory(options: &Options, objects: usize) -> anyhow::Result<()> {
    let options = Options {
        apply: Apply::Status,
        ..*options
    };
    let env = TestEnv::new().await;
    env.api()
        .create(&PostParams::default(), &deployment("web"))
        .await?;
    let controller = run_controller(&env, &[], env.control_plane().kubeconfig());
    let rules: Vec<(String, String, i32)> = [
        ("morning", "CRON_TZ=Asia/Shanghai 0 0 8 * * MON-FRI", 20),
        ("lunch", "CRON_TZ=Asia/Shanghai 0 30 11 * * MON-FRI", 40),
        ("evening", "CRON_TZ=Asia/Shanghai 0 0 19-21 * * *", 60),
        ("night", "CRON_TZ=Asia/Shanghai 0 0 23 * * *", 5),
        ("weekend", "CRON_TZ=Asia/Shanghai 0 0 10 * * SAT,SUN", 15),
    ]
    .iter()
    .map(|(n, c, r)| (n.to_string(), c.to_string(), *r))
    .collect();
    let started = std::time::Instant::now();
    let names: Vec<String> = (0..objects).map(|i| format!("tide-{i:05}")).collect();
    create_all(
        &env,
        names
            .iter()
            .map(|n| tide_manifest(&options, n, &rules))
            .collect(),
    )
    .await?;
    wait_all_reconciled(&env.api::<TidalScheduler>(), objects, |s| {
        s.observed_generation.is_some()
    })
    .await?;
    let elapsed = started.elapsed();
    let pid = controller.pid().to_string();
    let field = |name: &str| proc_status_mib(&pid, name);
    println!(
        "\nmemory with {objects} TidalSchedulers of 5 rules (all reconciled after {:.0} s): \
         RSS {:.1} MiB, peak {:.1} MiB",
        elapsed.as_secs_f64(),
        field("VmRSS:"),
        field("VmHWM:")
    );
    Ok(())
}
