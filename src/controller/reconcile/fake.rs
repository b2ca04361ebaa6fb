//! An in-memory cluster for unit tests of whole reconciles: TidalSchedulers whose status
//! patches are applied (as JSON merge patches, with the resourceVersion precondition) the
//! way the API server applies them, Deployments to scale, and a log of every write.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::ApiResource;
use kube::core::Status;

use super::Cluster;
use super::strategy::Strategy;
use super::target::Target;
use crate::api::{ConditionReason, TargetRef, TidalScheduler};
use crate::controller::key::{ObjectName, Written};
use crate::controller::plan::ApplyProblem;
use crate::controller::publish::reason::Reason;
use crate::election::{NotLeading, WriteGate};
use crate::sync::lock;

/// A write the fake accepted.
#[derive(Debug, Clone, PartialEq)]
pub enum Accepted {
    /// A level written to a Deployment.
    Level {
        /// The Deployment.
        target: String,
        /// Its replicas.
        replicas: i32,
        /// Whether it was the term's claim.
        claim: bool,
    },
    /// A status patch of a TidalScheduler, as applied.
    Status {
        /// The object.
        object: String,
        /// Its resourceVersion after the write.
        resource_version: String,
    },
    /// An Event queued.
    Event {
        /// Its reason.
        reason: Reason,
        /// Its note.
        note: String,
    },
}

#[derive(Default)]
struct State {
    objects: HashMap<ObjectName, TidalScheduler>,
    /// The last resourceVersion handed out.
    version: u64,
    /// Deployments by name, with their replicas.
    deployments: HashMap<String, i32>,
    /// Status writes still to fail with a 500.
    failing_status_writes: usize,
    writes: Vec<Accepted>,
    /// The objects whose targets were warmed, in order.
    warmed: Vec<String>,
}

impl State {
    fn next_version(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }
}

/// The in-memory cluster.
#[derive(Default)]
pub struct FakeCluster {
    state: Mutex<State>,
}

impl FakeCluster {
    /// Stores `object` as created (a UID and a resourceVersion given); returns it.
    pub fn create(&self, mut object: TidalScheduler) -> TidalScheduler {
        let mut state = lock(&self.state);
        let name = object.metadata.name.clone().unwrap_or_default();
        object.metadata.uid = Some(format!("uid-{name}"));
        object.metadata.resource_version = Some(state.next_version());
        object.metadata.generation = Some(1);
        state
            .objects
            .insert(ObjectName::of(&object), object.clone());
        object
    }

    /// The object `name` of namespace `default` as stored.
    pub fn object(&self, name: &str) -> TidalScheduler {
        let key = ObjectName {
            namespace: "default".to_owned(),
            name: name.to_owned(),
        };
        lock(&self.state).objects[&key].clone()
    }

    /// Creates (or replaces) the Deployment `name` at `replicas`.
    pub fn deployment(&self, name: &str, replicas: i32) {
        lock(&self.state)
            .deployments
            .insert(name.to_owned(), replicas);
    }

    /// Deletes the Deployment `name`.
    pub fn delete_deployment(&self, name: &str) {
        lock(&self.state).deployments.remove(name);
    }

    /// The replicas of Deployment `name`, if it exists.
    pub fn replicas(&self, name: &str) -> Option<i32> {
        lock(&self.state).deployments.get(name).copied()
    }

    /// Makes the next `count` status writes fail with a 500 (unapplied).
    pub fn fail_status_writes(&self, count: usize) {
        lock(&self.state).failing_status_writes = count;
    }

    /// The objects whose targets were warmed since the last call.
    pub fn take_warmed(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.state).warmed)
    }

    /// The writes accepted since the last call.
    pub fn take_writes(&self) -> Vec<Accepted> {
        std::mem::take(&mut lock(&self.state).writes)
    }
}

fn api_error(code: u16, message: &str) -> kube::Error {
    kube::Error::Api(Box::new(Status {
        code,
        message: message.to_owned(),
        ..Status::default()
    }))
}

fn not_found(name: &str) -> ApplyProblem {
    ApplyProblem {
        reason: ConditionReason::TargetNotFound,
        message: format!("spec.targetRef: Deployment {name} not found"),
    }
}

impl Cluster for FakeCluster {
    async fn read(&self, name: &ObjectName) -> kube::Result<Option<TidalScheduler>> {
        Ok(lock(&self.state).objects.get(name).cloned())
    }

    async fn patch_status(
        &self,
        name: &ObjectName,
        patch: json_patch::Patch,
    ) -> kube::Result<Written> {
        let mut state = lock(&self.state);
        if state.failing_status_writes > 0 {
            state.failing_status_writes -= 1;
            return Err(api_error(500, "injected failure"));
        }
        let stored = state
            .objects
            .get(name)
            .cloned()
            .ok_or_else(|| api_error(404, "not found"))?;
        // As the API server: the patch applies to the object stored, and a version it
        // sets that is not the stored one is a conflict.
        let mut document = serde_json::to_value(&stored).expect("a TidalScheduler serializes");
        json_patch::patch(&mut document, &patch).map_err(|e| api_error(422, &e.to_string()))?;
        let mut written: TidalScheduler =
            serde_json::from_value(document).map_err(|e| api_error(422, &e.to_string()))?;
        if written.metadata.resource_version != stored.metadata.resource_version {
            return Err(api_error(409, "the object has been modified"));
        }
        let version = state.next_version();
        written.metadata.resource_version = Some(version.clone());
        state.objects.insert(name.clone(), written.clone());
        state.writes.push(Accepted::Status {
            object: name.name.clone(),
            resource_version: version,
        });
        Ok(Written::of(&written))
    }

    async fn resolve(
        &self,
        target_ref: &TargetRef,
        namespace: &str,
    ) -> Result<Target, ApplyProblem> {
        if (target_ref.api_version.as_str(), target_ref.kind.as_str()) != ("apps/v1", "Deployment")
        {
            return Err(ApplyProblem {
                reason: ConditionReason::TargetNotFound,
                message: format!("the fake serves no kind {}", target_ref.kind),
            });
        }
        Ok(Target {
            resource: ApiResource::erase::<Deployment>(&()),
            scalable: true,
            name: target_ref.name.clone(),
            namespace: namespace.to_owned(),
        })
    }

    async fn check(
        &self,
        target: &Target,
        _strategy: Strategy,
    ) -> Result<Vec<String>, ApplyProblem> {
        match self.replicas(&target.name) {
            Some(_) => Ok(Vec::new()),
            None => Err(not_found(&target.name)),
        }
    }

    async fn write_level(
        &self,
        target: &Target,
        _strategy: Strategy,
        replicas: i32,
        gate: &WriteGate,
        claim: bool,
    ) -> Result<Result<(), ApplyProblem>, NotLeading> {
        gate.check()?;
        let mut state = lock(&self.state);
        let Some(current) = state.deployments.get_mut(&target.name) else {
            return Ok(Err(not_found(&target.name)));
        };
        *current = replicas;
        state.writes.push(Accepted::Level {
            target: target.name.clone(),
            replicas,
            claim,
        });
        Ok(Ok(()))
    }

    fn event(&self, _regarding: &ObjectReference, reason: Reason, note: String) {
        lock(&self.state)
            .writes
            .push(Accepted::Event { reason, note });
    }

    async fn warm(&self, object: &TidalScheduler) {
        let name = object.metadata.name.clone().unwrap_or_default();
        lock(&self.state).warmed.push(name);
    }
}
