//! How a level reaches the workload, chosen once per reconcile from `spec.apply` and the
//! target's kind: a new way of applying is one variant here and one arm where it is
//! checked ([`Targets::check`](super::target::Targets::check)) and written
//! ([`Targets::write`](super::target::Targets::write)).

use super::target::Target;
use crate::api::ApplyMode;

/// How the level is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Recorded in status only; the target is checked to exist, never written.
    Status,
    /// Written to the target's `/scale` subresource.
    Scale,
    /// Written to an HPA's `minReplicas` (its `maxReplicas` raised if needed).
    HpaFloor,
}

impl Strategy {
    /// The strategy of `mode` for `target`.
    pub fn of(mode: ApplyMode, target: &Target) -> Strategy {
        match mode {
            ApplyMode::Status => Strategy::Status,
            ApplyMode::Scale if target.is_hpa() => Strategy::HpaFloor,
            ApplyMode::Scale => Strategy::Scale,
        }
    }

    /// Whether the level is written to the target.
    pub fn writes(self) -> bool {
        self != Strategy::Status
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use kube::api::ApiResource;

    use super::*;

    fn target(resource: ApiResource) -> Target {
        Target {
            resource,
            scalable: true,
            name: "web".to_owned(),
            namespace: "default".to_owned(),
        }
    }

    #[test]
    fn scale_mode_writes_the_scale_of_a_workload_and_the_floor_of_an_hpa() {
        let deployment = target(ApiResource::erase::<Deployment>(&()));
        let hpa = target(ApiResource::erase::<HorizontalPodAutoscaler>(&()));
        assert_eq!(Strategy::of(ApplyMode::Scale, &deployment), Strategy::Scale);
        assert_eq!(Strategy::of(ApplyMode::Scale, &hpa), Strategy::HpaFloor);
        assert_eq!(Strategy::of(ApplyMode::Status, &hpa), Strategy::Status);
        assert!(!Strategy::Status.writes());
        assert!(Strategy::Scale.writes() && Strategy::HpaFloor.writes());
    }
}
