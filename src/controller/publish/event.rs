//! Kubernetes Events, sent off the reconcile path: a reconcile queues them and one
//! background task publishes them (like client-go's event broadcaster) once no reconcile
//! has run for [`QUIET`] — or at the latest [`MAX_DEFERRAL`] after they were queued — so a
//! burst of triggers does not compete with as many Event writes. A full queue drops events,
//! and says so twice: at the first drop, and with the number dropped once it drains.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
use crate::outage::Outage;
use crate::task::{self, Task};

/// Events waiting to be published; beyond this they are dropped (and counted).
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
    overflow: Overflow,
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
        let overflow = Overflow::default();
        let drained = overflow.clone();
        let (queue, mut pending) = mpsc::channel::<Queued>(QUEUE);
        let mut recorder = Recorder::new(client, reporter);
        let mut outage = Outage::default();
        let publisher = async move {
            while let Some(queued) = pending.recv().await {
                let Queued {
                    reference,
                    reason,
                    note,
                    since,
                } = queued;
                reconciles.quiet(QUIET, since + MAX_DEFERRAL).await;
                drained.summarise();
                let note = truncate(note, 1024);
                match gate.guard(recorder.publish(&reference, reason, note)).await {
                    Ok(Ok(())) => {
                        if let Some(failed) = outage.succeeded() {
                            tracing::warn!(failed, "publishing events works again");
                        }
                    }
                    Ok(Err(error)) => {
                        dropped.count("publish_failed");
                        // Once per outage: a 429 storm would log every Event of a burst.
                        if outage.failed(1) {
                            tracing::warn!(
                                %error,
                                reason = reason.as_str(),
                                "failed to publish event: events are dropped until one \
                                 goes through (counted in events_dropped_total)"
                            );
                        }
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
            overflow,
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
            self.overflow.dropped(reason);
        }
    }
}

/// The Events dropped since the queue last overflowed: a burst of 10,000 triggers drops
/// some 6,000, and a line for each would flood the log.
#[derive(Clone, Default)]
struct Overflow(Arc<AtomicU64>);

impl Overflow {
    /// Counts a drop; the first of an overflow is logged.
    fn dropped(&self, reason: Reason) {
        if self.0.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                reason = reason.as_str(),
                capacity = QUEUE,
                "event queue full: dropping events until it drains"
            );
        }
    }

    /// Logs how many were dropped, if any, and starts counting afresh: called when the
    /// publisher resumes, after the reconciles went quiet.
    fn summarise(&self) {
        let dropped = self.0.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "event queue drained: events were dropped while it was full"
            );
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

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use k8s_openapi::api::core::v1::ObjectReference;
    use tokio::sync::mpsc;

    use super::{EventSink, Overflow};
    use crate::controller::publish::metrics::DroppedEvents;
    use crate::controller::publish::reason::Reason;

    /// The log lines written while `run` runs.
    fn logged(run: impl FnOnce()) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl io::Write for Lines {
            fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
                crate::sync::lock(&self.0).extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, run);
        let text = String::from_utf8(crate::sync::lock(&lines.0).clone()).unwrap();
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn a_full_queue_logs_its_first_drop_and_not_the_others() {
        let (queue, _pending) = mpsc::channel(1);
        let sink = EventSink {
            queue,
            dropped: DroppedEvents::default(),
            overflow: Overflow::default(),
        };
        let lines = logged(|| {
            for _ in 0..5 {
                sink.send(
                    &ObjectReference::default(),
                    Reason::Triggered,
                    String::new(),
                );
            }
        });
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("event queue full"), "{lines:?}");
        assert_eq!(
            sink.overflow.0.load(std::sync::atomic::Ordering::Relaxed),
            4
        );
    }

    #[test]
    fn a_drained_queue_logs_how_many_were_dropped_once() {
        let overflow = Overflow::default();
        let lines = logged(|| {
            overflow.summarise();
            for _ in 0..3 {
                overflow.dropped(Reason::CaughtUp);
            }
            overflow.summarise();
            overflow.summarise();
            overflow.dropped(Reason::CaughtUp);
        });
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("event queue full") && lines[0].contains("CaughtUp"));
        assert!(lines[1].contains("dropped=3"), "{lines:?}");
        assert!(lines[2].contains("event queue full"), "{lines:?}");
    }
}
