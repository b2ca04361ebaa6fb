//! The workload a TidalScheduler points at: resolved from apiVersion/kind by API
//! discovery, checked for existence (and for an HPA fighting over it), and written in
//! `Scale` mode through its `/scale` subresource — or, for an HPA, its `minReplicas`.

use std::sync::Mutex;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::json;

use super::strategy::Strategy;
use crate::api::{ConditionReason, TargetRef};
use crate::controller::cache::kinds::{self, Kinds};
use crate::controller::cache::target_versions::{Scaled, TargetVersions, max_replicas};
use crate::controller::plan::ApplyProblem;
use crate::election::{NotLeading, WriteGate};

/// The field manager of every write to a target.
pub const FIELD_MANAGER: &str = "tidal-scheduler";

/// A resolved target.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its resource (group, version, plural).
    pub resource: ApiResource,
    /// Whether it has a `/scale` subresource.
    pub scalable: bool,
    /// Its name.
    pub name: String,
    /// Its namespace (always the TidalScheduler's).
    pub namespace: String,
}

impl Target {
    /// An `autoscaling` HorizontalPodAutoscaler, whose `minReplicas` is the floor to set.
    pub fn is_hpa(&self) -> bool {
        self.resource.group == "autoscaling" && self.resource.kind == "HorizontalPodAutoscaler"
    }

    /// What identifies it within its namespace: `group/kind/name`.
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{}",
            self.resource.group, self.resource.kind, self.name
        )
    }

    /// Whether its `/scale` takes server-side apply: the built-in kinds do; for custom
    /// resources the API server (1.34) fails it ("request to convert CR to an invalid
    /// group/version: autoscaling/v1"), so they only get merge patches, with the same
    /// resourceVersion precondition but no claim under a field manager of the term.
    fn applies_scale(&self) -> bool {
        matches!(self.resource.group.as_str(), "" | "apps")
    }

    fn describe(&self) -> String {
        format!("{} {}", self.resource.kind, self.name)
    }
}

/// Resolves, checks and scales targets; remembers discovered kinds.
pub struct Targets {
    client: Client,
    kinds: Kinds,
    versions: TargetVersions,
}

impl Targets {
    /// Targets reached through `client`, their `/scale` written at the version held in
    /// `versions` when it holds one.
    pub fn new(client: Client, versions: TargetVersions) -> Targets {
        Targets {
            client,
            kinds: Kinds::default(),
            versions,
        }
    }

    /// Finds the resource of `target_ref` (in `namespace`) by discovery.
    pub async fn resolve(
        &self,
        target_ref: &TargetRef,
        namespace: &str,
    ) -> Result<Target, ApplyProblem> {
        let gvk = gvk_of(target_ref);
        let (resource, scalable) = self.kind(&gvk).await?;
        Ok(Target {
            resource,
            scalable,
            name: target_ref.name.clone(),
            namespace: namespace.to_owned(),
        })
    }

    async fn kind(&self, gvk: &GroupVersionKind) -> Result<(ApiResource, bool), ApplyProblem> {
        let found = self
            .kinds
            .get(gvk, || discover(&self.client, gvk))
            .await
            .map_err(failed)?;
        found.ok_or_else(|| ApplyProblem {
            reason: ConditionReason::TargetNotFound,
            message: format!(
                "spec.targetRef: the API server serves no kind {} in {}",
                gvk.kind,
                gvk.api_version()
            ),
        })
    }

    /// Checks that the target exists; when its `/scale` is written, also that it has one
    /// and that no HPA manages it. Returns warnings (an HPA fighting over the workload).
    ///
    /// A target the kind's metadata watch holds exists without a read (a new leader checks
    /// every target once: at 100,000 objects that was 100,000 GETs); one it does not hold,
    /// or any while the watch is not healthy, is read.
    pub async fn check(
        &self,
        target: &Target,
        strategy: Strategy,
    ) -> Result<Vec<String>, ApplyProblem> {
        let watched = self
            .versions
            .version(&target.resource, &target.namespace, &target.name);
        if watched.is_none() {
            let api = self.api(target);
            let exists = retry_transient(|| api.get_metadata_opt(&target.name))
                .await
                .map_err(|error| failed(format!("failed to get {}: {error}", target.describe())))?;
            if exists.is_none() {
                return Err(not_found(target));
            }
        }
        match strategy {
            Strategy::Status | Strategy::HpaFloor => Ok(Vec::new()),
            Strategy::Scale if !target.scalable => Err(not_scalable(target)),
            Strategy::Scale => self.managing_hpas(target).await,
        }
    }

    /// Starts the watches that [`Targets::check`] and [`Targets::write`] read for
    /// `target` under `strategy`, without reading anything itself: what a standby does, so
    /// that its first reconciles as leader find the targets held instead of reading each.
    pub fn warm(&self, target: &Target, strategy: Strategy) {
        self.versions
            .watch_kind(&target.resource, &target.namespace);
        if strategy != Strategy::Status {
            self.versions.watch_hpas(&target.namespace);
        }
    }

    /// HPAs in the target's namespace whose scaleTargetRef is the target: they would fight
    /// with the `/scale` writes. Found in the HPA watch while it is healthy (a LIST per
    /// check was a tenth of a request per trigger at 10,000 objects), else listed.
    async fn managing_hpas(&self, target: &Target) -> Result<Vec<String>, ApplyProblem> {
        let (group, kind) = (&target.resource.group, &target.resource.kind);
        let watched = self
            .versions
            .scaling_hpas(&target.namespace, group, kind, &target.name);
        let names = match watched {
            Some(names) => names,
            None => self.list_managing_hpas(target).await?,
        };
        Ok(names
            .into_iter()
            .map(|hpa| {
                format!(
                    "HorizontalPodAutoscaler {hpa} also scales {}: two writers would fight; \
                     target the HPA instead to set its minReplicas",
                    target.describe()
                )
            })
            .collect())
    }

    async fn list_managing_hpas(&self, target: &Target) -> Result<Vec<String>, ApplyProblem> {
        let hpas = self.hpas(&target.namespace);
        let params = ListParams::default();
        let list = retry_transient(|| hpas.list(&params))
            .await
            .map_err(|error| failed(format!("failed to list HorizontalPodAutoscalers: {error}")))?;
        let (group, kind) = (&target.resource.group, &target.resource.kind);
        Ok(list
            .items
            .iter()
            .filter(|hpa| Scaled::by(hpa).is(group, kind, &target.name))
            .map(ResourceExt::name_any)
            .collect())
    }

    /// Writes `replicas` to the target as `strategy` says — its `/scale`, or an HPA's
    /// `minReplicas` (raising `maxReplicas` only if needed to keep min <= max) — while
    /// `gate` is open. [`Strategy::Status`] writes nothing.
    ///
    /// Every write is fenced, so that one sent in a leadership term that has ended changes
    /// nothing however late it arrives (docs/design.md §6): it is conditional on a
    /// resourceVersion observed before — the one [`TargetVersions`] holds for a `/scale`
    /// or an HPA, else one read just before — and sent only if the gate is still open once
    /// it was observed. The term's first write to a target (`claim`) is a server-side
    /// apply under the term's own field manager (see [`field_manager`]): it always changes
    /// the target's managedFields, hence its resourceVersion, even when the replicas are
    /// already right, so from then on any write prepared in an earlier term fails its
    /// precondition (409). Later writes of the term are plain merge patches with the
    /// precondition (cheaper for the API server). A conflict within the term (another
    /// writer in between) is read again and retried.
    pub async fn write(
        &self,
        target: &Target,
        strategy: Strategy,
        replicas: i32,
        gate: &WriteGate,
        claim: bool,
    ) -> Result<Result<(), ApplyProblem>, NotLeading> {
        match strategy {
            Strategy::Status => Ok(Ok(())),
            Strategy::Scale => self.scale(target, replicas, gate, claim).await,
            Strategy::HpaFloor => self.set_hpa_floor(target, replicas, gate, claim).await,
        }
    }

    async fn scale(
        &self,
        target: &Target,
        replicas: i32,
        gate: &WriteGate,
        claim: bool,
    ) -> Result<Result<(), ApplyProblem>, NotLeading> {
        if !target.scalable {
            return Ok(Err(not_scalable(target)));
        }
        let api = self.api(target);
        let (resource, namespace, name) = (&target.resource, &target.namespace, &target.name);
        // The first attempt writes at the version held, if any; a retry (a 409 when it
        // was no longer current) reads the target first.
        let held = Mutex::new(self.versions.version(resource, namespace, name));
        let write = || async {
            let held = crate::sync::lock(&held).take();
            let version = match held {
                Some(version) => Some(version),
                None => api.get_scale(name).await?.metadata.resource_version,
            };
            let scale = json!({
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "resourceVersion": version,
                },
                "spec": { "replicas": replicas },
            });
            let (params, patch) = fenced_write(gate, claim && target.applies_scale(), scale)?;
            let written = api.patch_scale(name, &params, &patch).await?;
            if let Some(version) = &written.metadata.resource_version {
                self.versions.wrote(resource, namespace, name, version);
            }
            Ok(written)
        };
        fenced(write, |error| {
            classify(target, "failed to patch scale of", error)
        })
        .await
    }

    async fn set_hpa_floor(
        &self,
        target: &Target,
        replicas: i32,
        gate: &WriteGate,
        claim: bool,
    ) -> Result<Result<(), ApplyProblem>, NotLeading> {
        let api = self.hpas(&target.namespace);
        // As for a `/scale`: the first attempt writes at the version (and against the
        // maxReplicas) the HPA watch holds, if any; a retry reads the HPA first.
        let held = Mutex::new(
            self.versions
                .hpa_max_replicas(&target.namespace, &target.name),
        );
        let write = || async {
            let held = crate::sync::lock(&held).take();
            let (version, max) = match held {
                Some((version, max)) => (Some(version), max),
                None => {
                    let hpa = api.get(&target.name).await?;
                    (hpa.resource_version(), max_replicas(&hpa))
                }
            };
            let mut spec = json!({ "minReplicas": replicas });
            if max.is_some_and(|max| max < replicas) {
                spec["maxReplicas"] = replicas.into();
            }
            let floor = json!({
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {
                    "name": target.name,
                    "namespace": target.namespace,
                    "resourceVersion": version,
                },
                "spec": spec,
            });
            let (params, patch) = fenced_write(gate, claim, floor)?;
            let written = api.patch(&target.name, &params, &patch).await?;
            self.versions.wrote_hpa(written.clone());
            Ok(written)
        };
        fenced(write, |error| {
            classify(target, "failed to set minReplicas of", error)
        })
        .await
    }

    /// The HPAs of `namespace` (`autoscaling/v2`), as the HPA watch reads them.
    fn hpas(&self, namespace: &str) -> Api<DynamicObject> {
        let resource = ApiResource::erase::<HorizontalPodAutoscaler>(&());
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }

    fn api(&self, target: &Target) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &target.namespace, &target.resource)
    }
}

/// The field manager of target writes in the term with fencing token `fence`
/// (`tidal-scheduler-<fence>`); plain `tidal-scheduler` without leader election.
pub fn field_manager(fence: Option<u64>) -> String {
    match fence {
        Some(fence) => format!("{FIELD_MANAGER}-{fence}"),
        None => FIELD_MANAGER.to_owned(),
    }
}

/// Patch parameters naming this controller as the field manager.
pub fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Looks `gvk` up by discovery: the kind, `None` when the API server serves no such kind,
/// or why discovery failed.
async fn discover(client: &Client, gvk: &GroupVersionKind) -> kinds::Outcome {
    match kube::discovery::pinned_kind(client, gvk).await {
        Ok((resource, capabilities)) => {
            let scalable = capabilities
                .subresources
                .iter()
                .any(|(sub, _)| sub.plural == "scale");
            Ok(Some((resource, scalable)))
        }
        Err(error) if is_transient(&error) => Err(format!(
            "failed to discover {} {}: {error}",
            gvk.api_version(),
            gvk.kind
        )),
        Err(_) => Ok(None),
    }
}

fn gvk_of(target_ref: &TargetRef) -> GroupVersionKind {
    let (group, version) = match target_ref.api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", target_ref.api_version.as_str()),
    };
    GroupVersionKind::gvk(group, version, &target_ref.kind)
}

/// A few fast retries inside one reconcile, for errors that a retry can fix; the
/// controller's requeue backoff takes over after them.
pub fn quick_retries() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(1))
        .with_max_times(3)
        .with_jitter()
}

/// Runs `call`, retrying it a few times ([`quick_retries`]) while it fails transiently.
pub async fn retry_transient<T, F, Fut>(call: F) -> kube::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    call.retry(quick_retries()).when(is_transient).await
}

/// Whether retrying `error` may succeed: server errors, throttling, connection failures.
pub fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Why a fenced read-then-write of a target did not go through.
#[derive(Debug)]
enum Fenced {
    /// The read or the write failed.
    Api(kube::Error),
    /// The term ended before the write could be sent.
    NotLeading,
}

impl From<kube::Error> for Fenced {
    fn from(error: kube::Error) -> Fenced {
        Fenced::Api(error)
    }
}

impl std::fmt::Display for Fenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fenced::Api(error) => write!(f, "{}", api_message(error)),
            Fenced::NotLeading => f.write_str("not leading"),
        }
    }
}

impl Fenced {
    /// Worth another read-then-write: a transient error, or a conflict (the target
    /// changed between the read and the write).
    fn retryable(&self) -> bool {
        match self {
            Fenced::Api(error) => {
                is_transient(error)
                    || matches!(error, kube::Error::Api(status) if status.code == 409)
            }
            Fenced::NotLeading => false,
        }
    }
}

/// The write of `body` (which carries the resourceVersion read), if the gate is open
/// right now: a server-side apply under the current term's field manager to claim the
/// target, else a merge patch.
fn fenced_write(
    gate: &WriteGate,
    claim: bool,
    body: serde_json::Value,
) -> Result<(PatchParams, Patch<serde_json::Value>), Fenced> {
    gate.check().map_err(|NotLeading| Fenced::NotLeading)?;
    Ok(if claim {
        let params = PatchParams::apply(&field_manager(gate.fence())).force();
        (params, Patch::Apply(body))
    } else {
        (patch_params(), Patch::Merge(body))
    })
}

/// Runs a fenced read-then-write, again after a conflict or a transient error; tells
/// leadership lost, a problem to report, or done.
async fn fenced<T, F, Fut>(
    write: F,
    problem: impl FnOnce(kube::Error) -> ApplyProblem,
) -> Result<Result<(), ApplyProblem>, NotLeading>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Fenced>>,
{
    let retried = write
        .retry(quick_retries())
        .when(Fenced::retryable)
        .notify(|error, after| crate::controller::publish::trace::retry_event(error, after));
    match retried.await {
        Ok(_) => Ok(Ok(())),
        Err(Fenced::NotLeading) => Err(NotLeading),
        Err(Fenced::Api(error)) => Ok(Err(problem(error))),
    }
}

fn classify(target: &Target, action: &str, error: kube::Error) -> ApplyProblem {
    match &error {
        kube::Error::Api(status) if status.code == 404 => not_found(target),
        _ => failed(format!(
            "{action} {}: {}",
            target.describe(),
            api_message(&error)
        )),
    }
}

/// The API server's message, without the client's wrapping.
pub fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

fn failed(message: String) -> ApplyProblem {
    ApplyProblem {
        reason: ConditionReason::ApplyFailed,
        message,
    }
}

fn not_found(target: &Target) -> ApplyProblem {
    ApplyProblem {
        reason: ConditionReason::TargetNotFound,
        message: format!(
            "spec.targetRef: {} not found in namespace {}",
            target.describe(),
            target.namespace
        ),
    }
}

fn not_scalable(target: &Target) -> ApplyProblem {
    ApplyProblem {
        reason: ConditionReason::TargetNotScalable,
        message: format!(
            "spec.targetRef: {} has no /scale subresource; use apply: Status or target a \
             scalable kind",
            target.describe()
        ),
    }
}

#[cfg(test)]
mod tests {
    //! The fenced `/scale` write against a scripted API server: which requests it sends,
    //! with which resourceVersion preconditions.

    use std::collections::VecDeque;
    use std::sync::Arc;

    use http::{Request, Response};
    use http_body_util::BodyExt;
    use kube::client::Body;

    use super::*;

    /// Answers each request with the next scripted (status, body) and records it as
    /// `METHOD path resourceVersion-sent`.
    #[derive(Clone, Default)]
    struct Script {
        answers: Arc<Mutex<VecDeque<(u16, serde_json::Value)>>>,
        seen: Arc<Mutex<Vec<String>>>,
    }

    impl tower::Service<Request<Body>> for Script {
        type Response = Response<Body>;
        type Error = std::convert::Infallible;
        type Future = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Response<Body>, Self::Error>> + Send>,
        >;

        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<Body>) -> Self::Future {
            let script = self.clone();
            Box::pin(async move {
                let (parts, body) = request.into_parts();
                let body = body.collect().await.expect("a body").to_bytes();
                let sent: serde_json::Value =
                    serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                let version = sent["metadata"]["resourceVersion"].as_str().unwrap_or("-");
                crate::sync::lock(&script.seen).push(format!(
                    "{} {} {version}",
                    parts.method,
                    parts.uri.path()
                ));
                let (status, answer) = crate::sync::lock(&script.answers)
                    .pop_front()
                    .expect("a scripted answer");
                let response = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&answer).expect("JSON")))
                    .expect("a response");
                Ok(response)
            })
        }
    }

    fn scale(version: &str) -> (u16, serde_json::Value) {
        let scale = json!({
            "apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": { "name": "web", "namespace": "shop", "resourceVersion": version },
            "spec": { "replicas": 3 },
        });
        (200, scale)
    }

    fn conflict() -> (u16, serde_json::Value) {
        let status = json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure",
            "reason": "Conflict", "code": 409,
            "message": "the object has been modified; please apply your changes to the latest version",
        });
        (409, status)
    }

    fn web() -> Target {
        let gvk = GroupVersionKind::gvk("apps", "v1", "Deployment");
        Target {
            resource: ApiResource::from_gvk_with_plural(&gvk, "deployments"),
            scalable: true,
            name: "web".to_owned(),
            namespace: "shop".to_owned(),
        }
    }

    /// Writes 3 replicas to `web` as a later write of the term (no claim); the requests.
    async fn write(
        versions: TargetVersions,
        answers: Vec<(u16, serde_json::Value)>,
    ) -> Vec<String> {
        let script = Script::default();
        crate::sync::lock(&script.answers).extend(answers);
        let targets = Targets::new(Client::new(script.clone(), "default"), versions);
        let written = targets
            .write(&web(), Strategy::Scale, 3, &WriteGate::always_open(), false)
            .await;
        assert!(matches!(written, Ok(Ok(()))), "{written:?}");
        crate::sync::lock(&script.seen).clone()
    }

    const SCALE: &str = "/apis/apps/v1/namespaces/shop/deployments/web/scale";

    /// Checks `web` in Status mode; the result and the requests.
    async fn check(
        versions: TargetVersions,
        answers: Vec<(u16, serde_json::Value)>,
    ) -> (Result<Vec<String>, ApplyProblem>, Vec<String>) {
        let script = Script::default();
        crate::sync::lock(&script.answers).extend(answers);
        let targets = Targets::new(Client::new(script.clone(), "default"), versions);
        let checked = targets.check(&web(), Strategy::Status).await;
        (checked, crate::sync::lock(&script.seen).clone())
    }

    const WEB: &str = "/apis/apps/v1/namespaces/shop/deployments/web";

    /// What `GET /apis/apps/v1` answers: Deployments, with `/scale`.
    fn apps_v1() -> (u16, serde_json::Value) {
        let list = json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1",
            "resources": [
                { "name": "deployments", "singularName": "deployment", "namespaced": true,
                  "kind": "Deployment", "verbs": ["get", "list", "watch", "patch"] },
                { "name": "deployments/scale", "singularName": "", "namespaced": true,
                  "group": "autoscaling", "version": "v1", "kind": "Scale",
                  "verbs": ["get", "patch", "update"] },
            ],
        });
        (200, list)
    }

    /// Resolves `web` eight times at once, against `answers`; the outcomes and requests.
    async fn resolve_at_once(
        answers: Vec<(u16, serde_json::Value)>,
    ) -> (Vec<Result<Target, ApplyProblem>>, Vec<String>) {
        let script = Script::default();
        crate::sync::lock(&script.answers).extend(answers);
        let client = Client::new(script.clone(), "default");
        let targets = Targets::new(client, TargetVersions::off());
        let target_ref: TargetRef = serde_json::from_value(
            json!({ "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" }),
        )
        .expect("a targetRef");
        let resolves = (0..8).map(|_| targets.resolve(&target_ref, "shop"));
        let resolved = futures::future::join_all(resolves).await;
        (resolved, crate::sync::lock(&script.seen).clone())
    }

    #[tokio::test]
    async fn reconciles_resolving_one_kind_at_once_send_one_discovery_request() {
        let (resolved, seen) = resolve_at_once(vec![apps_v1()]).await;
        for target in resolved {
            let target = target.expect("resolved");
            assert_eq!(
                (target.resource.plural.as_str(), target.scalable),
                ("deployments", true)
            );
        }
        assert_eq!(seen, ["GET /apis/apps/v1 -"]);
    }

    #[tokio::test]
    async fn reconciles_that_waited_for_a_failed_discovery_fail_without_asking_again() {
        let unavailable = json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure",
            "reason": "ServiceUnavailable", "code": 503, "message": "try later",
        });
        let (resolved, seen) = resolve_at_once(vec![(503, unavailable)]).await;
        for target in resolved {
            let problem = target.expect_err("a failed discovery");
            assert_eq!(problem.reason, ConditionReason::ApplyFailed, "{problem:?}");
        }
        assert_eq!(seen, ["GET /apis/apps/v1 -"]);
    }

    #[tokio::test]
    async fn a_target_the_watch_holds_exists_without_a_read() {
        let versions = TargetVersions::holding(&web().resource, &[("shop", "web", "7")]);
        let (checked, seen) = check(versions, Vec::new()).await;
        assert_eq!((checked, seen), (Ok(Vec::new()), Vec::<String>::new()));
    }

    #[tokio::test]
    async fn a_target_the_watch_does_not_hold_is_read_and_may_be_missing() {
        let versions = TargetVersions::holding(&web().resource, &[("shop", "api", "7")]);
        let missing = json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": "deployments.apps \"web\" not found",
        });
        let (checked, seen) = check(versions, vec![(404, missing)]).await;
        assert_eq!(
            checked.map_err(|p| p.reason),
            Err(ConditionReason::TargetNotFound)
        );
        assert_eq!(seen, [format!("GET {WEB} -")]);
    }

    #[tokio::test]
    async fn a_held_version_spares_the_read() {
        let versions = TargetVersions::holding(&web().resource, &[("shop", "web", "7")]);
        let seen = write(versions, vec![scale("8")]).await;
        assert_eq!(seen, [format!("PATCH {SCALE} 7")]);
    }

    #[tokio::test]
    async fn a_stale_held_version_is_a_conflict_then_a_read_and_a_write_at_the_version_read() {
        let versions = TargetVersions::holding(&web().resource, &[("shop", "web", "7")]);
        let seen = write(versions, vec![conflict(), scale("9"), scale("10")]).await;
        assert_eq!(
            seen,
            [
                format!("PATCH {SCALE} 7"),
                format!("GET {SCALE} -"),
                format!("PATCH {SCALE} 9"),
            ]
        );
    }

    #[tokio::test]
    async fn without_a_version_held_the_write_reads_first() {
        let seen = write(TargetVersions::off(), vec![scale("5"), scale("6")]).await;
        assert_eq!(seen, [format!("GET {SCALE} -"), format!("PATCH {SCALE} 5")]);
    }

    #[tokio::test]
    async fn the_version_a_write_returns_is_the_next_writes_precondition() {
        let resource = web().resource;
        let versions = TargetVersions::holding(&resource, &[("shop", "web", "7")]);
        let script = Script::default();
        crate::sync::lock(&script.answers).extend([scale("8"), scale("9")]);
        let targets = Targets::new(Client::new(script.clone(), "default"), versions);
        let gate = WriteGate::always_open();
        for replicas in [3, 4] {
            let written = targets
                .write(&web(), Strategy::Scale, replicas, &gate, false)
                .await;
            assert!(matches!(written, Ok(Ok(()))), "{written:?}");
        }
        let seen = crate::sync::lock(&script.seen).clone();
        assert_eq!(
            seen,
            [format!("PATCH {SCALE} 7"), format!("PATCH {SCALE} 8")]
        );
    }
}
