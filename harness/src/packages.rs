//! The Debian packages the tests need beyond the toolchains, installed on first use —
//! once per machine, as the Go binaries are built on first use — by
//! `tests/control-plane/packages.sh`: libfaketime for replicas with a moved wall clock,
//! and the node's container runtime (containerd, runc, CNI plugins, iptables,
//! conntrack). Where they cannot be installed (not root, no apt), the error is one line
//! saying what to install and how.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Debian's libfaketime.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// A group of packages, as `packages.sh` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packages {
    /// libfaketime.
    Faketime,
    /// containerd, runc, the CNI plugins, iptables, conntrack.
    Node,
}

impl Packages {
    fn name(self) -> &'static str {
        match self {
            Packages::Faketime => "faketime",
            Packages::Node => "node",
        }
    }
}

/// Installs `packages` if missing (at most once per process and group).
pub fn ensure(packages: Packages) -> Result<(), String> {
    static FAKETIME: OnceLock<Result<(), String>> = OnceLock::new();
    static NODE: OnceLock<Result<(), String>> = OnceLock::new();
    let once = match packages {
        Packages::Faketime => &FAKETIME,
        Packages::Node => &NODE,
    };
    once.get_or_init(|| install(packages)).clone()
}

/// The path of libfaketime, installing it first if needed.
pub fn libfaketime() -> Result<&'static str, String> {
    ensure(Packages::Faketime)?;
    if Path::new(LIBFAKETIME).exists() {
        Ok(LIBFAKETIME)
    } else {
        Err(format!(
            "{LIBFAKETIME} is missing although the package is installed: install as root \
             with apt-get install --reinstall faketime"
        ))
    }
}

/// Runs `packages.sh GROUP`, its progress on our stderr; its last error line on failure.
fn install(packages: Packages) -> Result<(), String> {
    let script = Path::new(crate::REPO).join("tests/control-plane/packages.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg(packages.name())
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("run {}: {e}", script.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprint!("{stderr}");
    if output.status.success() {
        return Ok(());
    }
    let reason = stderr
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("packages: error: "))
        .unwrap_or("packages.sh failed (its output is above)");
    Err(format!(
        "the tests' {} packages are missing: {reason}",
        packages.name()
    ))
}
