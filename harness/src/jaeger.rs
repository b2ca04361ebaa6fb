//! A real Jaeger (v2, built by `provision.sh`, started by `up.sh` with
//! `TIDAL_JAEGER=1` next to the control plane that traces to it): OTLP in over HTTP
//! (what the controller exports) and gRPC (what kube-apiserver and etcd export), its
//! query API out. One per test binary, with [`traced_control_plane`].

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use tidal_control_plane as scripts;

use crate::cluster::ControlPlane;
use crate::http::get_json;
use crate::wait::eventually_within;

/// A running Jaeger's addresses.
pub struct Jaeger(scripts::Jaeger);

impl From<scripts::Jaeger> for Jaeger {
    fn from(addresses: scripts::Jaeger) -> Jaeger {
        Jaeger(addresses)
    }
}

impl Jaeger {
    /// The Jaeger `up.sh` started for the control plane in `dir`.
    pub fn of(dir: &Path) -> Result<Jaeger, String> {
        scripts::Jaeger::of(dir).map(Jaeger)
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` for OTLP/HTTP.
    pub fn otlp_http_endpoint(&self) -> String {
        self.0.otlp_http.clone()
    }

    /// `host:port` of the query API (and UI).
    pub fn query_address(&self) -> String {
        self.0.query.clone()
    }

    /// The trace `id` (its spans and processes, as the query API returns it), or `None`
    /// if Jaeger has no such trace.
    pub fn trace(&self, id: &str) -> Option<Trace> {
        let found = get_json(&self.query_address(), &format!("/api/traces/{id}")).ok()?;
        let data = found["data"].as_array()?;
        data.first().cloned().map(Trace)
    }

    /// Waits until Jaeger has the trace `id` and `complete` holds of it (spans of
    /// several services arrive in several batches).
    pub async fn wait_trace(&self, id: &str, complete: impl Fn(&Trace) -> bool) -> Trace {
        let what = format!("complete trace {id} in Jaeger");
        eventually_within(Duration::from_secs(60), &what, || async {
            match self.trace(id) {
                Some(trace) if complete(&trace) => Ok(trace),
                other => Err(format!("it has: {:#?}", other.map(|t| t.0))),
            }
        })
        .await
    }
}

/// A trace as Jaeger's query API returns it.
#[derive(Debug, Clone)]
pub struct Trace(pub Value);

/// One span of a [`Trace`].
#[derive(Debug, Clone, Copy)]
pub struct Span<'a> {
    trace: &'a Trace,
    span: &'a Value,
}

impl Trace {
    /// Its spans.
    pub fn spans(&self) -> Vec<Span<'_>> {
        self.0["spans"]
            .as_array()
            .map(|spans| {
                spans
                    .iter()
                    .map(|span| Span { trace: self, span })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Its spans named `name`.
    pub fn named(&self, name: &str) -> Vec<Span<'_>> {
        self.spans()
            .into_iter()
            .filter(|span| span.name() == name)
            .collect()
    }

    /// The one span named `name`; panics unless there is exactly one.
    pub fn one(&self, name: &str) -> Span<'_> {
        let named = self.named(name);
        assert_eq!(named.len(), 1, "spans named {name}: {:#}", self.0);
        named[0]
    }

    /// The spans whose parent is `parent`.
    pub fn children_of(&self, parent: &Span<'_>) -> Vec<Span<'_>> {
        self.spans()
            .into_iter()
            .filter(|span| span.parent_id().as_deref() == Some(parent.id()))
            .collect()
    }
}

impl<'a> Span<'a> {
    /// The operation name.
    pub fn name(&self) -> &'a str {
        self.span["operationName"].as_str().unwrap_or_default()
    }

    /// The span id.
    pub fn id(&self) -> &'a str {
        self.span["spanID"].as_str().unwrap_or_default()
    }

    /// The parent span's id, if any.
    pub fn parent_id(&self) -> Option<String> {
        self.span["references"]
            .as_array()?
            .iter()
            .find_map(|reference| {
                (reference["refType"] == "CHILD_OF")
                    .then(|| reference["spanID"].as_str().map(str::to_owned))
                    .flatten()
            })
    }

    /// Start, microseconds since the Unix epoch.
    pub fn start_micros(&self) -> i64 {
        self.span["startTime"].as_i64().unwrap_or_default()
    }

    /// Duration in microseconds.
    pub fn duration_micros(&self) -> i64 {
        self.span["duration"].as_i64().unwrap_or_default()
    }

    /// End, microseconds since the Unix epoch.
    pub fn end_micros(&self) -> i64 {
        self.start_micros() + self.duration_micros()
    }

    /// The value of tag (attribute) `key`.
    pub fn tag(&self, key: &str) -> Option<&'a Value> {
        find_tag(&self.span["tags"], key)
    }

    /// The service that reported it.
    pub fn service(&self) -> &'a str {
        self.process()["serviceName"].as_str().unwrap_or_default()
    }

    /// The value of resource attribute `key` of its process.
    pub fn resource(&self, key: &str) -> Option<&'a Value> {
        find_tag(&self.process()["tags"], key)
    }

    fn process(&self) -> &'a Value {
        let id = self.span["processID"].as_str().unwrap_or_default();
        &self.trace.0["processes"][id]
    }
}

fn find_tag<'a>(tags: &'a Value, key: &str) -> Option<&'a Value> {
    tags.as_array()?
        .iter()
        .find(|tag| tag["key"] == key)
        .map(|tag| &tag["value"])
}

/// This test binary's control plane, with a Jaeger that kube-apiserver and etcd trace
/// to ([`jaeger`]); started on first use.
pub fn traced_control_plane() -> &'static ControlPlane {
    &traced().0
}

/// The Jaeger of [`traced_control_plane`].
pub fn jaeger() -> &'static Jaeger {
    &traced().1
}

fn traced() -> &'static (ControlPlane, Jaeger) {
    static SHARED: OnceLock<Result<(ControlPlane, Jaeger), String>> = OnceLock::new();
    let shared = SHARED.get_or_init(|| {
        let dir = scratch("control-plane");
        let control_plane = ControlPlane::start_with_jaeger(&dir)?;
        let jaeger = Jaeger::of(&dir)?;
        Ok((control_plane, jaeger))
    });
    match shared {
        Ok(traced) => traced,
        Err(e) => panic!("no traced control plane for the tests: {e}"),
    }
}

/// A directory under target/tmp for this test binary's `what`.
fn scratch(what: &str) -> PathBuf {
    let binary = std::env::current_exe().expect("current_exe");
    let binary = binary
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("tests");
    crate::target_tmpdir().join(format!("{what}-{binary}-{}", std::process::id()))
}
