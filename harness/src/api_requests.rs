//! The API requests a client sent, by verb and resource, per applied trigger — what a
//! trigger costs the API server besides its latency: as the API server's audit log has
//! them, or as the controller's own `tidal_scheduler_api_requests_total` counters do
//! (read before and after a measurement).

use std::collections::BTreeMap;
use std::path::Path;

use jiff::Timestamp;

use crate::audit::{Request, read_log, requests_in};
use crate::process::Process;
use crate::replicas::http_get;

/// Requests sent so far, by (verb, resource), every status code summed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requests(BTreeMap<(String, String), f64>);

impl Requests {
    /// The counters `process` exports now.
    pub fn of(process: &Process) -> Requests {
        Requests::parse(&http_get(process, "/metrics").1)
    }

    /// The counters of an OpenMetrics text.
    pub fn parse(text: &str) -> Requests {
        let mut counts = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("tidal_scheduler_api_requests_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.split_once("} ") else {
                continue;
            };
            let label = |name: &str| {
                let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
                let end = labels[start..].find('"')? + start;
                Some(labels[start..end].to_owned())
            };
            let (Some(verb), Some(resource), Ok(value)) = (
                label("verb"),
                label("resource"),
                value.trim().parse::<f64>(),
            ) else {
                continue;
            };
            *counts.entry((verb, resource)).or_insert(0.0) += value;
        }
        Requests(counts)
    }

    /// The requests that `select` picks among those the audit log of the control plane
    /// in `dir` has received from `from` to `to`, by (verb, resource[/subresource]).
    pub fn audited(
        dir: &Path,
        from: Timestamp,
        to: Timestamp,
        select: impl Fn(&Request) -> bool,
    ) -> Requests {
        let in_window = requests_in(&read_log(dir))
            .into_iter()
            .filter(|request| request.at >= from && request.at <= to);
        Requests::count(in_window.filter(select))
    }

    /// `requests` by (verb, resource[/subresource]); a non-resource request (discovery)
    /// as `-`.
    fn count(requests: impl IntoIterator<Item = Request>) -> Requests {
        let mut counts = BTreeMap::new();
        for request in requests {
            let resource = match request.resource_path() {
                path if path.is_empty() => "-".to_owned(),
                path => path,
            };
            *counts.entry((request.verb, resource)).or_insert(0.0) += 1.0;
        }
        Requests(counts)
    }

    /// Requests of every verb and resource.
    pub fn total(&self) -> f64 {
        self.0.values().sum()
    }

    /// Requests of `verb` on `resource` sent so far.
    pub fn sent(&self, verb: &str, resource: &str) -> f64 {
        let key = (verb.to_owned(), resource.to_owned());
        self.0.get(&key).copied().unwrap_or(0.0)
    }

    /// `verb resource: n` per trigger for what changed since `before`, largest first.
    pub fn per_trigger_since(&self, before: &Requests, triggers: usize) -> String {
        let mut rows: Vec<(f64, String)> = (self.0.iter())
            .map(|(key, after)| (after - before.0.get(key).copied().unwrap_or(0.0), key))
            .filter(|(sent, _)| *sent > 0.0)
            .map(|(sent, (verb, resource))| {
                let each = sent / triggers.max(1) as f64;
                (each, format!("{verb} {resource}: {each:.2}"))
            })
            .collect();
        if rows.is_empty() {
            // A float sum of nothing is -0.0, which would print as "-0.00 ()".
            return "0.00 (none)".to_owned();
        }
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        let total: f64 = rows.iter().map(|(each, _)| each).sum();
        let rows: Vec<String> = rows.into_iter().map(|(_, row)| row).collect();
        format!("{total:.2} ({})", rows.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_summed_over_codes_and_divided_by_the_triggers() {
        let before = Requests::parse(
            "tidal_scheduler_api_requests_total{verb=\"patch_status\",resource=\"tidalschedulers/status\",code=\"200\"} 10\n",
        );
        let after = Requests::parse(
            "# TYPE tidal_scheduler_api_requests counter\n\
             tidal_scheduler_api_requests_total{verb=\"patch_status\",resource=\"tidalschedulers/status\",code=\"200\"} 30\n\
             tidal_scheduler_api_requests_total{verb=\"patch_status\",resource=\"tidalschedulers/status\",code=\"409\"} 2\n\
             tidal_scheduler_api_requests_total{verb=\"get_scale\",resource=\"deployments/scale\",code=\"200\"} 20\n",
        );
        assert_eq!(
            after.per_trigger_since(&before, 20),
            "2.10 (patch_status tidalschedulers/status: 1.10, get_scale deployments/scale: 1.00)"
        );
    }

    #[test]
    fn no_request_since_reads_as_none() {
        let counted = Requests::parse(
            "tidal_scheduler_api_requests_total{verb=\"replace\",resource=\"leases\",code=\"200\"} 3\n",
        );
        assert_eq!(counted.per_trigger_since(&counted, 10), "0.00 (none)");
    }
}
