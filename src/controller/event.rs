//! Kubernetes Events, sent off the reconcile path: a reconcile queues them and one
//! background task publishes them (like client-go's event broadcaster), so a burst of
//! triggers is not slowed down by as many extra API calls. A full queue drops events.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

/// Events waiting to be published; beyond this they are dropped (and logged).
const QUEUE: usize = 4096;

/// Reasons of the Events this controller emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A trigger was applied on time.
    Triggered,
    /// A trigger was applied late: missed while nobody was acting, or before creation.
    CaughtUp,
    /// The level changed without a new trigger (a spec edit).
    LevelChanged,
    /// Several rules fire at the same instant.
    RuleConflict,
    /// The spec cannot be acted on.
    InvalidSpec,
    /// A non-fatal finding (missing labels, an HPA fighting over the target).
    SpecWarning,
    /// The target does not exist.
    TargetNotFound,
    /// The target has no `/scale`.
    TargetNotScalable,
    /// Applying the level failed.
    ApplyFailed,
    /// The level was applied after failures.
    Recovered,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Triggered => "Triggered",
            Reason::CaughtUp => "CaughtUp",
            Reason::LevelChanged => "LevelChanged",
            Reason::RuleConflict => "RuleConflict",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::SpecWarning => "SpecWarning",
            Reason::TargetNotFound => "TargetNotFound",
            Reason::TargetNotScalable => "TargetNotScalable",
            Reason::ApplyFailed => "ApplyFailed",
            Reason::Recovered => "Recovered",
        }
    }

    fn severity(self) -> EventType {
        match self {
            Reason::Triggered | Reason::CaughtUp | Reason::LevelChanged | Reason::Recovered => {
                EventType::Normal
            }
            _ => EventType::Warning,
        }
    }

    fn action(self) -> &'static str {
        match self {
            Reason::InvalidSpec | Reason::SpecWarning | Reason::RuleConflict => "Validate",
            Reason::TargetNotFound | Reason::TargetNotScalable => "ResolveTarget",
            _ => "Apply",
        }
    }
}

/// Where reconciles queue Events.
#[derive(Clone)]
pub struct EventSink {
    queue: mpsc::Sender<(ObjectReference, Reason, String)>,
}

impl EventSink {
    /// Starts the publishing task; it ends when every sink is dropped.
    pub fn spawn(client: Client, reporter: Reporter) -> EventSink {
        let (queue, mut pending) = mpsc::channel::<(ObjectReference, Reason, String)>(QUEUE);
        let recorder = Recorder::new(client, reporter);
        tokio::spawn(async move {
            while let Some((reference, reason, note)) = pending.recv().await {
                let event = Event {
                    type_: reason.severity(),
                    reason: reason.as_str().to_owned(),
                    note: Some(truncate(note, 1024)),
                    action: reason.action().to_owned(),
                    secondary: None,
                };
                if let Err(error) = recorder.publish(&event, &reference).await {
                    tracing::warn!(%error, reason = reason.as_str(), "failed to publish event");
                }
            }
        });
        EventSink { queue }
    }

    /// Queues an Event about `reference`.
    pub fn send(&self, reference: &ObjectReference, reason: Reason, note: String) {
        if self
            .queue
            .try_send((reference.clone(), reason, note))
            .is_err()
        {
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
