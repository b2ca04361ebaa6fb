//! What a reconcile reads from and writes to the cluster, behind one small trait — the
//! pattern of `election/lock.rs` — so whole reconciles are unit-tested against an
//! in-memory fake ([`super::fake`]) and run against the API server through
//! [`KubeCluster`].

use std::future::Future;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch};
use kube::core::Request;
use kube::{Client, Resource};

use super::strategy::Strategy;
use super::target::{Target, Targets, patch_params};
use crate::api::{TargetRef, TidalScheduler};
use crate::controller::cache::target_versions::TargetVersions;
use crate::controller::key::{ObjectName, Written};
use crate::controller::plan::ApplyProblem;
use crate::controller::publish::event::EventSink;
use crate::controller::publish::reason::Reason;
use crate::election::{NotLeading, WriteGate};

/// The reads and writes of a reconcile.
pub trait Cluster: Send + Sync + 'static {
    /// The object as the API server has it now; `None` if it is gone.
    fn read(
        &self,
        name: &ObjectName,
    ) -> impl Future<Output = kube::Result<Option<TidalScheduler>>> + Send;

    /// Applies the JSON `patch` (which carries the resourceVersion precondition) to the
    /// object's status subresource; returns which object it wrote, at which version.
    fn patch_status(
        &self,
        name: &ObjectName,
        patch: json_patch::Patch,
    ) -> impl Future<Output = kube::Result<Written>> + Send;

    /// Finds the resource of `target_ref` in `namespace`.
    fn resolve(
        &self,
        target_ref: &TargetRef,
        namespace: &str,
    ) -> impl Future<Output = Result<Target, ApplyProblem>> + Send;

    /// Checks the target exists and can take `strategy`'s writes; returns warnings.
    fn check(
        &self,
        target: &Target,
        strategy: Strategy,
    ) -> impl Future<Output = Result<Vec<String>, ApplyProblem>> + Send;

    /// Writes `replicas` to the target as `strategy` says, fenced by `gate` (docs/design.md
    /// §6); `claim` makes it the term's first write to the target.
    fn write_level(
        &self,
        target: &Target,
        strategy: Strategy,
        replicas: i32,
        gate: &WriteGate,
        claim: bool,
    ) -> impl Future<Output = Result<Result<(), ApplyProblem>, NotLeading>> + Send;

    /// Queues an Event about `regarding` (published in the background).
    fn event(&self, regarding: &ObjectReference, reason: Reason, note: String);

    /// Prepares what `check` and `write_level` will read for the target of `object` (its
    /// kind's discovery, the watches of its kind and of the HPAs), reading no target: a
    /// standby's work, so that a takeover does not start by reading every one. Best effort.
    fn warm(&self, object: &TidalScheduler) -> impl Future<Output = ()> + Send;
}

/// The cluster behind a Kubernetes client.
pub struct KubeCluster {
    client: Client,
    targets: Targets,
    events: EventSink,
}

impl KubeCluster {
    /// Reconciles' reads and writes through `client`, Events through `events`; targets'
    /// `/scale` written at the versions `versions` holds.
    pub fn new(client: Client, events: EventSink, versions: TargetVersions) -> KubeCluster {
        KubeCluster {
            targets: Targets::new(client.clone(), versions),
            client,
            events,
        }
    }

    fn api(&self, name: &ObjectName) -> Api<TidalScheduler> {
        Api::namespaced(self.client.clone(), &name.namespace)
    }
}

impl Cluster for KubeCluster {
    async fn read(&self, name: &ObjectName) -> kube::Result<Option<TidalScheduler>> {
        self.api(name).get_opt(&name.name).await
    }

    /// As `Api::patch_status`, but the answer is read as a [`Written`]: the object it
    /// carries is not deserialized.
    async fn patch_status(
        &self,
        name: &ObjectName,
        patch: json_patch::Patch,
    ) -> kube::Result<Written> {
        let url = TidalScheduler::url_path(&(), Some(&name.namespace));
        let patch = Patch::Json::<()>(patch);
        let mut request = Request::new(url)
            .patch_subresource("status", &name.name, &patch_params(), &patch)
            .map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("patch_status");
        self.client.request(request).await
    }

    async fn resolve(
        &self,
        target_ref: &TargetRef,
        namespace: &str,
    ) -> Result<Target, ApplyProblem> {
        self.targets.resolve(target_ref, namespace).await
    }

    async fn check(
        &self,
        target: &Target,
        strategy: Strategy,
    ) -> Result<Vec<String>, ApplyProblem> {
        self.targets.check(target, strategy).await
    }

    async fn write_level(
        &self,
        target: &Target,
        strategy: Strategy,
        replicas: i32,
        gate: &WriteGate,
        claim: bool,
    ) -> Result<Result<(), ApplyProblem>, NotLeading> {
        self.targets
            .write(target, strategy, replicas, gate, claim)
            .await
    }

    fn event(&self, regarding: &ObjectReference, reason: Reason, note: String) {
        self.events.send(regarding, reason, note);
    }

    async fn warm(&self, object: &TidalScheduler) {
        let Some(namespace) = object.metadata.namespace.as_deref() else {
            return;
        };
        match self
            .targets
            .resolve(&object.spec.target_ref, namespace)
            .await
        {
            Ok(target) => {
                let strategy = Strategy::of(object.spec.apply, &target);
                self.targets.warm(&target, strategy);
            }
            Err(problem) => {
                tracing::debug!(tidal = %ObjectName::of(object), problem = %problem.message, "target not warmed");
            }
        }
    }
}

/// A reference to `object` with its resourceVersion (kube's `object_ref` leaves it
/// out): Events about one version are counted as a series, a later version's are Events
/// of their own — each trigger's, with its own note and trace id.
pub fn regarding(object: &TidalScheduler) -> ObjectReference {
    let mut reference = object.object_ref(&());
    reference.resource_version = object.metadata.resource_version.clone();
    reference
}
