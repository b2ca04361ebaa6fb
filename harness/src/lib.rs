//! The harness of tidal-scheduler's integration tests and benchmarks, one crate for
//! both: a real control plane (etcd + kube-apiserver from `tests/control-plane/`), a
//! real node (kubelet, containerd) for what users install,
//! child processes that never outlive the test, proxies that lag or hold traffic, the
//! audit log, Toxiproxy, KEDA (the peers benchmark), fixtures, the robfig/cron
//! reference, and the Debian packages all of these need, installed on first use.

use std::path::PathBuf;

pub mod api_requests;
pub mod audit;
pub mod bench_options;
pub mod cluster;
pub mod corpus;
pub mod fixtures;
pub mod fleet;
pub mod flowcontrol;
pub mod holding_proxy;
pub mod http;
pub mod jaeger;
pub mod keda;
pub mod lagging_proxy;
pub mod measure;
pub mod node;
pub mod packages;
pub mod process;
pub mod prometheus;
pub mod reaper;
pub mod release;
pub mod replicas;
pub mod robfig;
pub mod tenant;
pub mod tide;
pub mod tls_jaeger;
pub mod toxiproxy;
pub mod wait;

/// The repository root.
pub const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The running test's or bench's executable: `target/PROFILE/deps/NAME-HASH`.
fn current_exe() -> PathBuf {
    std::env::current_exe().expect("the path of the running test")
}

/// `target/PROFILE`, where Cargo put the product binary: the parent of a test's or
/// bench's `deps/`, or the directory of a binary such as `tidal-chaos`.
fn profile_dir() -> PathBuf {
    let exe = current_exe();
    let dir = exe.parent();
    dir.and_then(|dir| match dir.file_name() {
        Some(name) if name == "deps" => dir.parent(),
        _ => Some(dir),
    })
    .map(PathBuf::from)
    .unwrap_or_else(|| panic!("{} is not under target/PROFILE", exe.display()))
}

/// A scratch directory under `target/` for control planes, logs and built helpers
/// (Cargo's `CARGO_TARGET_TMPDIR` for integration tests: `target/tmp`).
pub fn target_tmpdir() -> PathBuf {
    let tmp = profile_dir()
        .parent()
        .map(|target| target.join("tmp"))
        .expect("target/ has a parent");
    std::fs::create_dir_all(&tmp).expect("create target/tmp");
    tmp
}
