//! The process's Prometheus metrics (OpenMetrics text at `/metrics`), all prefixed
//! `tidal_scheduler_`. Each component registers its own metrics on the [`registry`]
//! (`election::ElectionMetrics`, `controller::ControllerMetrics`, `clock::ClockMetrics`);
//! this module only encodes what they registered.

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

/// A fresh registry with the process's prefix, for the components to register on.
pub fn registry() -> Registry {
    Registry::with_prefix("tidal_scheduler")
}

/// Every registered metric, for `/metrics`; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// Exports what the components registered on `registry`.
    pub fn new(registry: Registry) -> Metrics {
        Metrics {
            registry: Arc::new(registry),
        }
    }

    /// Every metric in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }

    /// Every metric in Prometheus' classic text format (0.0.4): what OpenMetrics says,
    /// without exemplars, units and `# EOF`, a counter's family named with its `_total`.
    pub fn encode_classic(&self) -> String {
        classic(&self.encode())
    }
}

/// The classic text format of an OpenMetrics exposition (see [`Metrics::encode_classic`]).
fn classic(open_metrics: &str) -> String {
    let mut out = String::with_capacity(open_metrics.len());
    // prometheus-client writes HELP before TYPE: hold HELP until the type is known.
    let mut help: Option<(&str, &str)> = None;
    for line in open_metrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "gaugehistogram" | "stateset" | "unknown" => (name.to_owned(), "untyped"),
                other => (name.to_owned(), other),
            };
            if let Some((_, text)) = help.take() {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        let sample = line.split_once(" # {").map_or(line, |(sample, _)| sample);
        out.push_str(sample);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classic_format_names_counters_with_total_and_drops_exemplars() {
        let open_metrics = "# HELP x_triggers Triggers.\n# TYPE x_triggers counter\n\
            x_triggers_total{kind=\"on_time\"} 3\n\
            # HELP x_latency_seconds Latency.\n# TYPE x_latency_seconds histogram\n# UNIT x_latency_seconds seconds\n\
            x_latency_seconds_bucket{le=\"0.005\"} 1 # {trace_id=\"ab\"} 0.003\n\
            x_latency_seconds_count 1\n# EOF\n";
        assert_eq!(
            classic(open_metrics),
            "# HELP x_triggers_total Triggers.\n# TYPE x_triggers_total counter\n\
             x_triggers_total{kind=\"on_time\"} 3\n\
             # HELP x_latency_seconds Latency.\n# TYPE x_latency_seconds histogram\n\
             x_latency_seconds_bucket{le=\"0.005\"} 1\n\
             x_latency_seconds_count 1\n"
        );
    }
}
