//! Publishes `events.k8s.io/v1` Events with client-go's series semantics: an Event like one
//! published within [`SERIES_WINDOW`] (same reason about the same object reference, which
//! includes its resourceVersion) is counted on that Event — a patch of its `series` —
//! instead of being created again. A retried failure on an unchanged object becomes one
//! Event with a count; each trigger changes the object, so it gets an Event of its own.
//!
//! Instead of kube-runtime's `Recorder`, which keeps every published Event whole for six
//! minutes and scans all of them on each publish (kube-runtime 5.0, `events.rs`,
//! `Recorder::publish`): quadratic after a burst of thousands of triggers, and megabytes
//! with 10,000 objects. Here a series is a name and a count, swept once a minute, and at
//! most [`LEDGER_CAPACITY`] are kept.

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::time::Instant;

use crate::controller::publish::reason::Reason;

/// How long an Event stays open for counting similar ones (client-go's and kube's).
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// How often closed series are dropped.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Open series kept at most (client-go's correlator keeps an LRU of 4,096): beyond it the
/// least recently counted one is forgotten, and its next Event is created anew.
pub const LEDGER_CAPACITY: usize = 4096;

/// Who reports the Events.
#[derive(Debug, Clone)]
pub struct Reporter {
    /// `reportingController`.
    pub controller: String,
    /// `reportingInstance`, e.g. the pod name.
    pub instance: String,
}

/// Events with one reason about one version of one object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    name: String,
    uid: String,
    resource_version: String,
    reason: Reason,
}

/// The Event a series is counted on.
#[derive(Debug)]
struct Series {
    event: String,
    count: i32,
    last: Instant,
}

/// What to write for one Event.
#[derive(Debug, PartialEq, Eq)]
enum Write {
    /// A new Event.
    Create,
    /// Count it on the open series' Event `event`, now at `count`.
    Count { event: String, count: i32 },
}

/// The open series.
#[derive(Debug)]
struct Ledger {
    open: HashMap<Key, Series>,
    swept: Instant,
}

impl Ledger {
    fn new(now: Instant) -> Ledger {
        Ledger {
            open: HashMap::new(),
            swept: now,
        }
    }

    /// What to write for an Event under `key` at `now`.
    fn write_for(&mut self, key: &Key, now: Instant) -> Write {
        if now.duration_since(self.swept) >= SWEEP_EVERY {
            self.open
                .retain(|_, series| now.duration_since(series.last) < SERIES_WINDOW);
            self.swept = now;
        }
        match self.open.get(key) {
            Some(series) if now.duration_since(series.last) < SERIES_WINDOW => Write::Count {
                event: series.event.clone(),
                count: series.count + 1,
            },
            _ => Write::Create,
        }
    }

    /// Records the Event `event` written under `key` at `now`, `count` times so far.
    fn wrote(&mut self, key: Key, event: String, count: i32, now: Instant) {
        if self.open.len() >= LEDGER_CAPACITY && !self.open.contains_key(&key) {
            let stalest = self
                .open
                .iter()
                .min_by_key(|(_, series)| series.last)
                .map(|(key, _)| key.clone());
            if let Some(stalest) = stalest {
                self.open.remove(&stalest);
            }
        }
        self.open.insert(
            key,
            Series {
                event,
                count,
                last: now,
            },
        );
    }

    /// Ends the series under `key` (its Event is gone).
    fn close(&mut self, key: &Key) {
        self.open.remove(key);
    }
}

/// Publishes Events; one per process, used by one task.
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    ledger: Ledger,
}

impl Recorder {
    /// A recorder reporting as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Recorder {
        Recorder {
            client,
            reporter,
            ledger: Ledger::new(Instant::now()),
        }
    }

    /// Publishes an Event about `regarding`: creates it, or counts it on the open series.
    pub async fn publish(
        &mut self,
        regarding: &ObjectReference,
        reason: Reason,
        note: String,
    ) -> Result<(), kube::Error> {
        let namespace = regarding.namespace.clone().unwrap_or_default();
        let key = Key {
            namespace: namespace.clone(),
            name: regarding.name.clone().unwrap_or_default(),
            uid: regarding.uid.clone().unwrap_or_default(),
            resource_version: regarding.resource_version.clone().unwrap_or_default(),
            reason,
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let now = Instant::now();
        if let Write::Count { event, count } = self.ledger.write_for(&key, now) {
            let series = EventSeries {
                count,
                last_observed_time: MicroTime(Timestamp::now()),
            };
            let patch = Patch::Merge(json!({ "series": series }));
            match events.patch(&event, &PatchParams::default(), &patch).await {
                Ok(_) => {
                    self.ledger.wrote(key, event, count, now);
                    return Ok(());
                }
                // Deleted meanwhile (Events expire after an hour by default): start anew.
                Err(kube::Error::Api(status)) if status.code == 404 => self.ledger.close(&key),
                Err(error) => return Err(error),
            }
        }
        let event = self.event(regarding, reason, note);
        let created = events.create(&PostParams::default(), &event).await?;
        let name = created.metadata.name.unwrap_or_default();
        self.ledger.wrote(key, name, 1, now);
        Ok(())
    }

    fn event(&self, regarding: &ObjectReference, reason: Reason, note: String) -> Event {
        let now = Timestamp::now();
        let name = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(reason.severity().to_owned()),
            reason: Some(reason.as_str().to_owned()),
            action: Some(reason.action().to_owned()),
            note: Some(note),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone()),
            ..Event::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, reason: Reason) -> Key {
        Key {
            namespace: "ns".to_owned(),
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            resource_version: "7".to_owned(),
            reason,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_similar_event_within_the_window_is_counted_on_the_first() {
        let mut ledger = Ledger::new(Instant::now());
        let triggered = key("a", Reason::Triggered);
        assert_eq!(ledger.write_for(&triggered, Instant::now()), Write::Create);
        ledger.wrote(triggered.clone(), "a.1".to_owned(), 1, Instant::now());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(
            ledger.write_for(&triggered, Instant::now()),
            Write::Count {
                event: "a.1".to_owned(),
                count: 2
            }
        );
        ledger.wrote(triggered.clone(), "a.1".to_owned(), 2, Instant::now());
        assert_eq!(
            ledger.write_for(&triggered, Instant::now()),
            Write::Count {
                event: "a.1".to_owned(),
                count: 3
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn another_reason_object_or_object_version_is_another_event() {
        let mut ledger = Ledger::new(Instant::now());
        ledger.wrote(
            key("a", Reason::Triggered),
            "a.1".to_owned(),
            1,
            Instant::now(),
        );
        let now = Instant::now();
        assert_eq!(
            ledger.write_for(&key("a", Reason::CaughtUp), now),
            Write::Create
        );
        assert_eq!(
            ledger.write_for(&key("b", Reason::Triggered), now),
            Write::Create
        );
        let recreated = Key {
            uid: "another".to_owned(),
            ..key("a", Reason::Triggered)
        };
        assert_eq!(ledger.write_for(&recreated, now), Write::Create);
        let changed = Key {
            resource_version: "8".to_owned(),
            ..key("a", Reason::Triggered)
        };
        assert_eq!(ledger.write_for(&changed, now), Write::Create);
    }

    #[tokio::test(start_paused = true)]
    async fn a_series_closes_after_the_window_since_its_last_event() {
        let mut ledger = Ledger::new(Instant::now());
        let triggered = key("a", Reason::Triggered);
        ledger.wrote(triggered.clone(), "a.1".to_owned(), 1, Instant::now());
        tokio::time::advance(SERIES_WINDOW - Duration::from_secs(1)).await;
        assert!(matches!(
            ledger.write_for(&triggered, Instant::now()),
            Write::Count { count: 2, .. }
        ));
        ledger.wrote(triggered.clone(), "a.1".to_owned(), 2, Instant::now());
        tokio::time::advance(SERIES_WINDOW).await;
        assert_eq!(ledger.write_for(&triggered, Instant::now()), Write::Create);
    }

    #[tokio::test(start_paused = true)]
    async fn the_ledger_forgets_the_least_recently_counted_series_beyond_its_capacity() {
        let mut ledger = Ledger::new(Instant::now());
        for i in 0..LEDGER_CAPACITY {
            ledger.wrote(
                key(&format!("o{i}"), Reason::Triggered),
                format!("o{i}.1"),
                1,
                Instant::now(),
            );
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        // The first series is counted again: the second is now the stalest.
        ledger.wrote(
            key("o0", Reason::Triggered),
            "o0.1".to_owned(),
            2,
            Instant::now(),
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        ledger.wrote(
            key("new", Reason::Triggered),
            "new.1".to_owned(),
            1,
            Instant::now(),
        );
        assert_eq!(ledger.open.len(), LEDGER_CAPACITY);
        assert!(!ledger.open.contains_key(&key("o1", Reason::Triggered)));
        assert!(ledger.open.contains_key(&key("o0", Reason::Triggered)));
        assert_eq!(
            ledger.write_for(&key("o1", Reason::Triggered), Instant::now()),
            Write::Create
        );
    }

    #[tokio::test(start_paused = true)]
    async fn closed_series_are_swept() {
        let mut ledger = Ledger::new(Instant::now());
        for name in ["a", "b", "c"] {
            ledger.wrote(
                key(name, Reason::Triggered),
                format!("{name}.1"),
                1,
                Instant::now(),
            );
        }
        tokio::time::advance(SERIES_WINDOW).await;
        ledger.wrote(
            key("d", Reason::Triggered),
            "d.1".to_owned(),
            1,
            Instant::now(),
        );
        ledger.write_for(&key("d", Reason::Triggered), Instant::now());
        assert_eq!(ledger.open.len(), 1, "only the open series is kept");
        ledger.close(&key("d", Reason::Triggered));
        assert!(ledger.open.is_empty());
    }
}
