//! Kubernetes Events, sent off the reconcile path: a reconcile queues them and one
//! background task publishes them (like client-go's event broadcaster) once no reconcile
//! has run for [`QUIET`] — or at the latest [`MAX_DEFERRAL`] after they were queued — so a
//! burst of triggers does not compete with as many Event writes. A full queue drops events.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::controller::in_flight::InFlight;
use crate::controller::publish::metrics::DroppedEvents;
use crate::controller::publish::reason::Reason;
use crate::controller::publish::recorder::{Recorder, Reporter};
use crate::election::WriteGate;
use crate::task::{self, Task};

/// Events waiting to be published; beyond this they are dropped (and logged).
const QUEUE: usize = 4096;

/// Longest an Event waits for the reconciles to go quiet: long enough that a burst's
/// Events do not spill into the next burst a few seconds later.
pub const MAX_DEFERRAL: Duration = Duration::from_secs(30);

/// How long reconciles must have been idle before Events go out: the gaps between the
/// reconciles of a burst are shorter.
pub const QUIET: Duration = Duration::from_millis(250);

/// An Event waiting to be published.
struct Queued {
    reference: ObjectReference,
    reason: Reason,
    note: String,
    since: Instant,
}

/// Where reconciles queue Events.
#[derive(Clone)]
pub struct EventSink {
    queue: mpsc::Sender<Queued>,
    dropped: DroppedEvents,
}

impl EventSink {
    /// Starts the publishing task, which waits for `reconciles` to be quiet and publishes
    /// only while `gate` is open; it ends when every sink is dropped. Events not
    /// published are counted on `dropped`.
    pub fn spawn(
        client: Client,
        reporter: Reporter,
        reconciles: InFlight,
        gate: WriteGate,
        dropped: DroppedEvents,
    ) -> (EventSink, Task) {
        let sink_dropped = dropped.clone();
        let (queue, mut pending) = mpsc::channel::<Queued>(QUEUE);
        let mut recorder = Recorder::new(client, reporter);
        let publisher = async move {
            while let Some(queued) = pending.recv().await {
                let Queued {
                    reference,
                    reason,
                    note,
                    since,
                } = queued;
                reconciles.quiet(QUIET, since + MAX_DEFERRAL).await;
                let note = truncate(note, 1024);
                match gate.guard(recorder.publish(&reference, reason, note)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        dropped.count("publish_failed");
                        tracing::warn!(%error, reason = reason.as_str(), "failed to publish event");
                    }
                    Err(_) => {
                        dropped.count("not_leading");
                        tracing::debug!(reason = reason.as_str(), "not leading: event dropped");
                    }
                }
            }
        };
        let sink = EventSink {
            queue,
            dropped: sink_dropped,
        };
        (sink, task::spawn("event publisher", publisher))
    }

    /// Queues an Event about `reference`.
    pub fn send(&self, reference: &ObjectReference, reason: Reason, note: String) {
        let queued = Queued {
            reference: reference.clone(),
            reason,
            note,
            since: Instant::now(),
        };
        if self.queue.try_send(queued).is_err() {
            self.dropped.count("queue_full");
            tracing::warn!(reason = reason.as_str(), "event queue full: event dropped");
        }
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
