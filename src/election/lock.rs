//! Where the election record lives: a `coordination.k8s.io/v1` Lease, behind a trait so
//! the elector can be tested on virtual time against an in-memory lock.

use std::future::Future;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, Error as KubeError};

use super::record::LeaseRecord;

/// Why a lock operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// Somebody else changed (or created) the Lease since it was read: a lost race.
    #[error("the Lease changed since it was read")]
    Conflict,
    /// An update before any read: there is no resourceVersion to carry.
    #[error("the Lease was never read")]
    NotRead,
    /// The API call failed.
    #[error("Lease request failed: {0}")]
    Api(String),
}

/// Reads and writes the election record with optimistic concurrency: every write carries
/// the version of the last read (or write), so a lost race fails instead of overwriting.
pub trait LeaseLock: Send {
    /// The current record; `None` when the Lease does not exist.
    fn get(&mut self) -> impl Future<Output = Result<Option<LeaseRecord>, LockError>> + Send;

    /// Creates the Lease holding `record`; [`LockError::Conflict`] if it already exists.
    fn create(
        &mut self,
        record: &LeaseRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;

    /// Replaces the record, provided the Lease is unchanged since it was last read.
    fn update(
        &mut self,
        record: &LeaseRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;

    /// The resourceVersion of the Lease as last read or written, as a number (the API
    /// server's are etcd revisions); `None` before the first read or if not numeric.
    fn version(&self) -> Option<u64>;

    /// A description for logs, e.g. `lease default/tidal-scheduler`.
    fn describe(&self) -> String;
}

/// The Lease `namespace/name` in a cluster.
pub struct KubeLease {
    api: Api<Lease>,
    name: String,
    namespace: String,
    /// The Lease as last read or written: its resourceVersion guards the next update.
    last: Option<Lease>,
}

impl KubeLease {
    /// The Lease `name` in `namespace`.
    pub fn new(client: Client, namespace: &str, name: &str) -> KubeLease {
        KubeLease {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            last: None,
        }
    }
}

impl LeaseLock for KubeLease {
    async fn get(&mut self) -> Result<Option<LeaseRecord>, LockError> {
        let lease = self.api.get_opt(&self.name).await.map_err(api_error)?;
        let record = lease
            .as_ref()
            .map(|l| LeaseRecord::from_spec(l.spec.as_ref().unwrap_or(&LeaseSpec::default())));
        self.last = lease;
        Ok(record)
    }

    async fn create(&mut self, record: &LeaseRecord) -> Result<(), LockError> {
        let mut spec = LeaseSpec::default();
        record.write_to(&mut spec);
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        let created = self
            .api
            .create(&PostParams::default(), &lease)
            .await
            .map_err(api_error)?;
        self.last = Some(created);
        Ok(())
    }

    async fn update(&mut self, record: &LeaseRecord) -> Result<(), LockError> {
        let mut lease = self.last.clone().ok_or(LockError::NotRead)?;
        record.write_to(lease.spec.get_or_insert_with(LeaseSpec::default));
        // `replace` sends metadata.resourceVersion as read: a 409 if the Lease moved on.
        let updated = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map_err(api_error)?;
        self.last = Some(updated);
        Ok(())
    }

    fn version(&self) -> Option<u64> {
        self.last
            .as_ref()
            .and_then(|lease| lease.metadata.resource_version.as_deref())
            .and_then(|version| version.parse().ok())
    }

    fn describe(&self) -> String {
        format!("lease {}/{}", self.namespace, self.name)
    }
}

fn api_error(error: KubeError) -> LockError {
    match error {
        KubeError::Api(status) if status.code == 409 => LockError::Conflict,
        other => LockError::Api(other.to_string()),
    }
}
