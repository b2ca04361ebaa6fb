//! The one fleet of controller replicas: processes on a test's namespace, started and
//! replaced like the pods of a Deployment (`PREFIX-0`, `PREFIX-1`, ...), each reaching the
//! API server directly, through a request-holding proxy ([`HoldingProxy`]) or through a
//! Toxiproxy proxy of its own, as the admin or an impersonated user, with the real wall
//! clock or one libfaketime moves. Ended replicas are kept for their logs. The tests, the
//! chaos runner and the benches all start replicas here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::Kubeconfig;

use crate::cluster::{TestEnv, provisioned_bin};
use crate::holding_proxy::HoldingProxy;
use crate::http;
use crate::packages::{LIBFAKETIME, libfaketime};
use crate::process::Process;
use crate::replicas::{logged_metrics_address, wait_holder};
use crate::tide::start_replica_env;
use crate::toxiproxy::Toxiproxy;
use crate::wait::poll;

/// How a replica reaches the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Straight to it.
    Direct,
    /// Through a [`HoldingProxy`] of its own (partitions with late delivery).
    Holding,
    /// Through a Toxiproxy proxy of its own (black holes, latency, resets).
    Toxiproxy,
}

/// Which wall clock the replicas read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clocks {
    /// The machine's.
    Real,
    /// The machine's moved by libfaketime, per replica: `initial` (e.g. `+0`, `+45s`)
    /// from the start, then whatever [`Fleet::skew`] sets; the monotonic clock is left
    /// alone.
    Faked {
        /// The offset each replica starts with.
        initial: &'static str,
    },
}

/// How a fleet's replicas run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Names are `PREFIX-N`.
    pub prefix: String,
    /// Extra flags of `run` (the Lease timing).
    pub timing: Vec<String>,
    /// How each reaches the API server.
    pub route: Route,
    /// Which wall clock each reads.
    pub clocks: Clocks,
    /// The user each acts as (impersonated); the admin when `None`.
    pub user: Option<String>,
}

impl Options {
    /// Replicas `prefix-N` with flags `timing`, direct, on the real clock, as the admin.
    pub fn new(prefix: &str, timing: &[&str]) -> Options {
        Options {
            prefix: prefix.to_owned(),
            timing: timing.iter().map(|s| s.to_string()).collect(),
            route: Route::Direct,
            clocks: Clocks::Real,
            user: None,
        }
    }

    /// The same, reaching the API server by `route`.
    pub fn route(self, route: Route) -> Options {
        Options { route, ..self }
    }

    /// The same, reading `clocks`.
    pub fn clocks(self, clocks: Clocks) -> Options {
        Options { clocks, ..self }
    }

    /// The same, acting as `user`.
    pub fn user(self, user: &str) -> Options {
        Options {
            user: Some(user.to_owned()),
            ..self
        }
    }
}

/// One replica.
pub struct Member {
    /// Its identity.
    pub name: String,
    /// Its process.
    pub process: Process,
    /// Its libfaketime file, with a faked clock.
    clock: Option<PathBuf>,
    /// Its proxy, on [`Route::Holding`].
    holding: Option<HoldingProxy>,
    /// The kubeconfig it runs with.
    kubeconfig: PathBuf,
}

/// The replicas of one test namespace.
pub struct Fleet {
    options: Options,
    /// Toxiproxy and the API server's `host:port` its proxies lead to.
    toxiproxy: Option<(Toxiproxy, String)>,
    started: usize,
    /// Replicas running (or stopped by SIGSTOP), oldest first.
    pub members: Vec<Member>,
    /// Replicas that ended, kept for their logs.
    pub ended: Vec<Member>,
}

impl Fleet {
    /// A fleet on `env` with no replica yet: Toxiproxy started and libfaketime installed
    /// if the options need them.
    pub fn new(env: &TestEnv, options: Options) -> Result<Fleet, String> {
        let toxiproxy = match options.route {
            Route::Toxiproxy => {
                let bin = provisioned_bin()?;
                let log = env.log_dir().join("toxiproxy.log");
                Some((Toxiproxy::start(&bin, &log)?, api_server(env)?))
            }
            Route::Direct | Route::Holding => None,
        };
        if matches!(options.clocks, Clocks::Faked { .. }) {
            libfaketime()?;
        }
        Ok(Fleet {
            options,
            toxiproxy,
            started: 0,
            members: Vec::new(),
            ended: Vec::new(),
        })
    }

    /// A fleet of `count` replicas started on `env`.
    pub async fn start(env: &TestEnv, options: Options, count: usize) -> Result<Fleet, String> {
        let mut fleet = Fleet::new(env, options)?;
        for _ in 0..count {
            fleet.add(env).await?;
        }
        Ok(fleet)
    }

    /// Starts one more replica; returns its name.
    pub async fn add(&mut self, env: &TestEnv) -> Result<String, String> {
        let name = format!("{}-{}", self.options.prefix, self.started);
        self.started += 1;
        let (server, holding) = match self.options.route {
            Route::Direct => (None, None),
            Route::Holding => {
                let proxy =
                    HoldingProxy::start(&env.control_plane().pki(), env.client.clone()).await;
                (Some(proxy.url()), Some(proxy))
            }
            Route::Toxiproxy => {
                let (toxiproxy, upstream) = self.toxiproxy.as_ref().ok_or("no Toxiproxy")?;
                let listen = toxiproxy.proxy(&name, upstream)?;
                (Some(format!("https://{listen}")), None)
            }
        };
        let kubeconfig = match (&server, &self.options.user) {
            (None, None) => env.control_plane().kubeconfig().to_owned(),
            _ => kubeconfig_for(env, &name, server.as_deref(), self.options.user.as_deref())?,
        };
        let initial = match self.options.clocks {
            Clocks::Faked { initial } => Some(initial),
            Clocks::Real => None,
        };
        let clock = initial.map(|_| env.log_dir().join(format!("{name}.faketime")));
        let mut vars: Vec<(&str, &str)> = Vec::new();
        if let (Some(clock), Some(initial)) = (&clock, initial) {
            std::fs::create_dir_all(env.log_dir()).map_err(|e| e.to_string())?;
            std::fs::write(clock, initial)
                .map_err(|e| format!("write {}: {e}", clock.display()))?;
            vars.extend([
                ("LD_PRELOAD", LIBFAKETIME),
                (
                    "FAKETIME_TIMESTAMP_FILE",
                    clock.to_str().ok_or("non-UTF-8 path")?,
                ),
                ("FAKETIME_CACHE_DURATION", "1"),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ]);
        }
        let timing: Vec<&str> = self.options.timing.iter().map(String::as_str).collect();
        let process = start_replica_env(env, &name, &timing, &kubeconfig, &vars);
        self.members.push(Member {
            name: name.clone(),
            process,
            clock,
            holding,
            kubeconfig,
        });
        Ok(name)
    }

    /// The names of the replicas running.
    pub fn names(&self) -> Vec<String> {
        self.members.iter().map(|m| m.name.clone()).collect()
    }

    /// The running replica `name`.
    pub fn member(&self, name: &str) -> Result<&Member, String> {
        self.members
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| format!("no running replica {name}"))
    }

    /// The process of the running replica `name`; panics if there is none.
    pub fn get(&mut self, name: &str) -> &mut Process {
        let member = self.members.iter_mut().find(|m| m.name == name);
        &mut member
            .unwrap_or_else(|| panic!("no running replica {name}"))
            .process
    }

    /// Sends `signal` (`KILL`, `TERM`, `STOP`, `CONT`) to replica `name`.
    pub fn signal(&self, name: &str, signal: &str) -> Result<(), String> {
        self.member(name)?.process.signal(signal);
        Ok(())
    }

    /// Waits (up to `limit`) for replica `name` to exit and keeps it with the ended ones.
    pub async fn retire(&mut self, name: &str, limit: Duration) -> Result<(), String> {
        let at = (self.members.iter())
            .position(|m| m.name == name)
            .ok_or_else(|| format!("no replica {name}"))?;
        let mut member = self.members.remove(at);
        let exited = poll(Duration::from_millis(10), limit, || {
            let exited = member.process.try_status().is_some();
            async move { exited.then_some(()).ok_or_else(String::new) }
        })
        .await;
        self.ended.push(member);
        exited.map_err(|_| format!("{name} did not exit within {limit:?}"))
    }

    /// SIGKILLs replica `name` and starts a fresh one in its place, like a Deployment.
    pub async fn kill_and_replace(&mut self, env: &TestEnv, name: &str) -> Result<String, String> {
        self.signal(name, "KILL")?;
        self.retire(name, Duration::from_secs(5)).await?;
        self.add(env).await
    }

    /// Whether replica `name` answers `/readyz` with 200.
    pub fn ready(&self, name: &str) -> bool {
        let Ok(member) = self.member(name) else {
            return false;
        };
        logged_metrics_address(&member.process)
            .is_some_and(|address| http::get(&address, "/readyz").is_ok_and(|(s, _)| s == 200))
    }

    /// The Toxiproxy of a fleet on [`Route::Toxiproxy`] (proxies are named after replicas).
    pub fn toxiproxy(&self) -> Result<&Toxiproxy, String> {
        let toxiproxy = self.toxiproxy.as_ref().map(|(toxiproxy, _)| toxiproxy);
        toxiproxy.ok_or_else(|| "replicas run without Toxiproxy".to_owned())
    }

    /// The request-holding proxy of replica `name` on [`Route::Holding`].
    pub fn holding(&self, name: &str) -> Result<HoldingProxy, String> {
        let holding = self.member(name)?.holding.clone();
        holding.ok_or_else(|| "replicas run without holding proxies".to_owned())
    }

    /// Sets replica `name`'s wall clock `offset` from the real one (libfaketime, e.g.
    /// `+180s`; `+0` heals); it is read within a second.
    pub fn skew(&self, name: &str, offset: &str) -> Result<(), String> {
        let member = self.member(name)?;
        let clock = member
            .clock
            .as_ref()
            .ok_or("replicas run without libfaketime")?;
        std::fs::write(clock, offset).map_err(|e| format!("write {}: {e}", clock.display()))
    }

    /// The kubeconfig replica `name` runs with.
    pub fn kubeconfig(&self, name: &str) -> Result<&Path, String> {
        Ok(&self.member(name)?.kubeconfig)
    }

    /// Waits for a Lease holder other than `not` (empty for any); returns it.
    pub async fn leader_other_than(&self, env: &TestEnv, not: &str) -> String {
        wait_holder(env, "new leader", |h| !h.is_empty() && h != not).await
    }
}

/// `host:port` of the API server of `env`.
fn api_server(env: &TestEnv) -> Result<String, String> {
    let kubeconfig = read_kubeconfig(env.control_plane().kubeconfig())?;
    let server = (kubeconfig.clusters.first())
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .ok_or("the kubeconfig names no server")?;
    Ok(server.trim_start_matches("https://").to_owned())
}

/// A kubeconfig for replica `name`: the admin's, through `server` if given, impersonating
/// `user` if given.
pub fn kubeconfig_for(
    env: &TestEnv,
    name: &str,
    server: Option<&str>,
    user: Option<&str>,
) -> Result<PathBuf, String> {
    let mut kubeconfig = read_kubeconfig(env.control_plane().kubeconfig())?;
    for cluster in kubeconfig
        .clusters
        .iter_mut()
        .filter_map(|c| c.cluster.as_mut())
    {
        if let Some(server) = server {
            cluster.server = Some(server.to_owned());
        }
    }
    for auth in kubeconfig
        .auth_infos
        .iter_mut()
        .filter_map(|u| u.auth_info.as_mut())
    {
        auth.impersonate = user.map(str::to_owned);
    }
    let dir = env.log_dir();
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join(format!("{name}.kubeconfig"));
    let text = serde_json::to_string(&kubeconfig).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
    Ok(path)
}

/// The kubeconfig at `path`.
pub fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, String> {
    Kubeconfig::read_from(path).map_err(|e| format!("read {}: {e}", path.display()))
}
