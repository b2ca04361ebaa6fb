//! Toxiproxy (built by `provision.sh`), the TCP proxy the chaos scenarios put between a
//! controller replica and kube-apiserver: a *cut* resets every connection (and each new
//! one as soon as it carries data), a *black hole* holds the bytes and delivers them
//! when it heals (a request sent before the partition can land after it), *slow* delays
//! every chunk. TLS passes through untouched: the replica still talks to the API server.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::wait::{PACE, blocking_poll};
use serde_json::{Value, json};

use super::http;
use super::process::Process;

/// What a proxy does to the bytes through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toxic {
    /// Connections reset (TCP RST) as soon as they carry data.
    Cut,
    /// Bytes held, in both directions, until the toxic is removed; then delivered.
    BlackHole,
    /// Every chunk from the API server delayed by `latency` ± `jitter`.
    Slow { latency: Duration, jitter: Duration },
}

/// A running Toxiproxy server.
pub struct Toxiproxy {
    api: String,
    _server: Process,
}

impl Toxiproxy {
    /// Starts `bin/toxiproxy` on a free loopback port, logging to `log`; returns once its
    /// API answers.
    pub fn start(bin: &Path, log: &Path) -> Result<Toxiproxy, String> {
        let port = http::free_port();
        let mut command = Command::new(bin.join("toxiproxy"));
        command.args(["-host", "127.0.0.1", "-port", &port.to_string()]);
        let server = Process::spawn("toxiproxy", command, log.to_owned());
        let api = format!("127.0.0.1:{port}");
        blocking_poll(PACE, Duration::from_secs(20), || {
            http::get(&api, "/version")
        })
        .map_err(|error| format!("Toxiproxy did not answer on {api} within 20 s: {error}"))?;
        Ok(Toxiproxy {
            api,
            _server: server,
        })
    }

    /// Creates proxy `name` to `upstream` (`host:port`); returns the address it listens on.
    pub fn proxy(&self, name: &str, upstream: &str) -> Result<String, String> {
        let listen = format!("127.0.0.1:{}", http::free_port());
        let body = json!({ "name": name, "listen": listen, "upstream": upstream, "enabled": true });
        self.call("POST", "/proxies", Some(&body))?;
        Ok(listen)
    }

    /// Applies `toxic` to proxy `name` (until [`Toxiproxy::heal`]).
    pub fn inject(&self, name: &str, toxic: Toxic) -> Result<(), String> {
        let streams: &[&str] = match toxic {
            Toxic::Slow { .. } => &["downstream"],
            Toxic::Cut | Toxic::BlackHole => &["upstream", "downstream"],
        };
        for stream in streams {
            let (kind, attributes) = match toxic {
                Toxic::Cut => ("reset_peer", json!({ "timeout": 0 })),
                // An hour: longer than any scenario; heal removes it and the held bytes go.
                Toxic::BlackHole => ("latency", json!({ "latency": 3_600_000, "jitter": 0 })),
                Toxic::Slow { latency, jitter } => (
                    "latency",
                    json!({ "latency": latency.as_millis() as u64, "jitter": jitter.as_millis() as u64 }),
                ),
            };
            let body = json!({
                "name": format!("chaos-{stream}"),
                "type": kind,
                "stream": stream,
                "toxicity": 1.0,
                "attributes": attributes,
            });
            self.call("POST", &format!("/proxies/{name}/toxics"), Some(&body))?;
        }
        Ok(())
    }

    /// Removes every toxic of proxy `name`: bytes held by a black hole are delivered.
    pub fn heal(&self, name: &str) -> Result<(), String> {
        let toxics = self.call("GET", &format!("/proxies/{name}/toxics"), None)?;
        for toxic in toxics.as_array().into_iter().flatten() {
            let toxic = toxic["name"].as_str().unwrap_or_default();
            self.call("DELETE", &format!("/proxies/{name}/toxics/{toxic}"), None)?;
        }
        Ok(())
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let (status, text) = http::request(&self.api, method, path, body)?;
        if !(200..300).contains(&status) {
            return Err(format!("Toxiproxy {method} {path}: HTTP {status}: {text}"));
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}
