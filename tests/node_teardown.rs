//! `down.sh` undoes a node: after a node ran a pod on bridge networking, nothing of it
//! is left on the machine — no process, mount, cgroup, network namespace, link (veth,
//! bridge), iptables chain or nft table, and every sysctl it changed is back.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tidal_harness as common;

use common::cluster::REPO;
use common::node::Node;
use common::wait::blocking_eventually;

/// What a node can leave behind, as sets of names.
#[derive(Debug, PartialEq, Eq)]
struct Machine {
    processes: BTreeSet<String>,
    mounts: BTreeSet<String>,
    cgroups: BTreeSet<String>,
    network_namespaces: BTreeSet<String>,
    links: BTreeSet<String>,
    iptables_chains: BTreeSet<String>,
    nft_tables: BTreeSet<String>,
    sysctls: BTreeSet<String>,
}

impl Machine {
    /// The machine now, as far as a node in `dir` could have changed it.
    fn now(dir: &Path) -> Machine {
        let dir = dir.to_str().expect("UTF-8 path");
        Machine {
            processes: processes(dir),
            mounts: lines(&std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo"))
                .into_iter()
                .filter_map(|line| line.split(' ').nth(4).map(str::to_owned))
                .filter(|mount| {
                    mount.starts_with(dir)
                        || ["/run/containerd", "/run/netns", "/var/lib/kubelet"]
                            .iter()
                            .any(|p| mount.starts_with(p))
                })
                .collect(),
            cgroups: lines(&run(
                "find",
                &["/sys/fs/cgroup", "-maxdepth", "3", "-name", "kubepods*"],
            )),
            network_namespaces: std::fs::read_dir("/run/netns")
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default(),
            links: lines(&run("ip", &["-o", "link", "show"]))
                .into_iter()
                .filter_map(|line| line.split(": ").nth(1).map(|name| name.to_owned()))
                .collect(),
            iptables_chains: ["iptables-save", "ip6tables-save"]
                .iter()
                .flat_map(|save| {
                    lines(&run(save, &[]))
                        .into_iter()
                        .filter(|line| line.starts_with('*') || line.starts_with(':'))
                        .map(move |line| format!("{save} {}", line.split(' ').next().unwrap_or("")))
                })
                .collect(),
            nft_tables: lines(&run("nft", &["list", "tables"])),
            sysctls: [
                "vm.overcommit_memory",
                "kernel.panic",
                "kernel.panic_on_oops",
                "net.ipv4.ip_forward",
                "net.ipv4.conf.all.route_localnet",
            ]
            .iter()
            .map(|name| format!("{name}={}", run("sysctl", &["-n", name]).trim()))
            .collect(),
        }
    }
}

/// Command lines that name `dir` or are container shims and pause processes.
fn processes(dir: &str) -> BTreeSet<String> {
    let own = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|entry| entry.file_name().to_string_lossy() != own)
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        .filter(|cmdline| {
            // The reaper's own command line (a shell script) names no directory.
            cmdline.contains(dir)
                || cmdline.starts_with("containerd-shim")
                || cmdline.starts_with("/pause")
        })
        .collect()
}

fn lines(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect()
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn down_leaves_nothing_of_the_node_behind() {
    // The tools the check reads the machine with (iptables-save, nft) come with the node's.
    common::packages::ensure(common::packages::Packages::Node).expect("the node's packages");
    // A node of an earlier test binary may still be being torn down by its reaper.
    blocking_eventually(
        Duration::from_secs(120),
        "end of another node",
        || match Path::new("/run/tidal-scheduler-node").exists() {
            true => Err("another node keeps running on this machine".to_owned()),
            false => Ok(()),
        },
    );
    let dir = common::target_tmpdir().join(format!("node-teardown-{}", std::process::id()));
    let before = Machine::now(&dir);

    let node = Node::start(&dir).expect("start a node");
    let overrides = serde_json::json!({
        "spec": { "containers": [{
            "name": "pause", "image": node.pause_image(), "imagePullPolicy": "Never" }] }
    })
    .to_string();
    node.kubectl(&[
        "run",
        "pause",
        "--restart=Never",
        "--image",
        node.pause_image(),
        "--overrides",
        &overrides,
    ])
    .expect("kubectl run");
    node.kubectl(&[
        "wait",
        "--for=condition=Ready",
        "pod/pause",
        "--timeout=120s",
    ])
    .expect("the pod runs");
    let running = Machine::now(&dir);
    // The check sees what a node leaves: each kind is there while it runs.
    assert_ne!(running.processes, before.processes);
    assert_ne!(running.mounts, before.mounts);
    assert_ne!(running.cgroups, before.cgroups);
    assert_ne!(running.network_namespaces, before.network_namespaces);
    assert_ne!(running.links, before.links);
    assert_ne!(running.iptables_chains, before.iptables_chains);

    let down = Command::new("bash")
        .arg(Path::new(REPO).join("tests/control-plane/down.sh"))
        .arg(&dir)
        .status()
        .expect("run down.sh");
    assert!(down.success(), "down.sh failed: {down}");
    let after = Machine::now(&dir);
    assert_eq!(after.processes, before.processes, "processes");
    assert_eq!(after.mounts, before.mounts, "mounts");
    assert_eq!(after.cgroups, before.cgroups, "cgroups");
    assert_eq!(
        after.network_namespaces, before.network_namespaces,
        "network namespaces"
    );
    assert_eq!(after.links, before.links, "links (veths, bridge)");
    assert_eq!(
        after.iptables_chains, before.iptables_chains,
        "iptables chains"
    );
    assert_eq!(after.nft_tables, before.nft_tables, "nft tables");
    assert_eq!(after.sysctls, before.sysctls, "sysctls");
}
