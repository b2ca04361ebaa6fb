//! Why a reconcile failed; the controller retries it with backoff.

use crate::election::NotLeading;

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object changed between read and write (HTTP 409); it is read again.
    #[error("the object changed while being reconciled")]
    Conflict,
    /// This process may not write now (not the leader).
    #[error("not acting: writes are gated off")]
    NotActing,
    /// The object has no namespace (TidalScheduler is namespaced; a malformed event).
    #[error("object without a namespace")]
    MissingNamespace,
    /// Reading the object failed.
    #[error("failed to read the object: {source}")]
    Read {
        /// The API error.
        source: kube::Error,
    },
    /// Writing the status failed.
    #[error("failed to write status: {source}")]
    WriteStatus {
        /// The API error.
        source: kube::Error,
    },
    /// The object uses calendars and their watch caches have not listed yet.
    #[error(
        "the TidalCalendar and ClusterTidalCalendar caches have not listed yet: are their \
         CRDs installed (deploy/crd.yaml) and may the controller list them?"
    )]
    CalendarsNotListed,
    /// Planning the object panicked (a bug); the panic's message is in the log.
    #[error("planning the object panicked")]
    PlanPanicked,
    /// The status could not be serialized (a bug).
    #[error("failed to serialize status: {0}")]
    Serialize(serde_json::Error),
}

impl From<NotLeading> for Error {
    fn from(NotLeading: NotLeading) -> Error {
        Error::NotActing
    }
}
