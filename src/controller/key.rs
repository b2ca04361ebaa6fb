//! How the controller names a TidalScheduler: its place (namespace and name, which a
//! recreated object takes over) and, with it, its UID (which tells the two apart); and,
//! of its own status write, the version it got.

use std::fmt;

use kube::ResourceExt;
use serde::{Deserialize, Deserializer};

use crate::api::TidalScheduler;

/// A TidalScheduler's namespace and name; shown as `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectName {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ObjectName {
    /// The place of `object` (an empty namespace if it has none).
    pub fn of(object: &TidalScheduler) -> ObjectName {
        ObjectName {
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
        }
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One TidalScheduler: its place and its UID; shown as `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// Where it is.
    pub name: ObjectName,
    /// Which object it is (empty if the object carries none).
    pub uid: String,
}

impl ObjectKey {
    /// The key of `object`.
    pub fn of(object: &TidalScheduler) -> ObjectKey {
        ObjectKey {
            name: ObjectName::of(object),
            uid: object.uid().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.name.fmt(f)
    }
}

/// An object as a write of ours left it: which one, at which resourceVersion — all that a
/// reconcile keeps of the API server's answer (see [`Consistency::wrote`]).
///
/// Read from the answer without the rest of the object: deserializing it whole (its
/// managedFields above all) was ~7 % of the controller's CPU per trigger.
///
/// [`Consistency::wrote`]: crate::controller::cache::consistency::Consistency::wrote
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The object.
    pub key: ObjectKey,
    /// Its resourceVersion after the write (empty if the answer carried none).
    pub resource_version: String,
}

#[cfg(test)]
impl Written {
    /// What `object`, as written, records.
    pub fn of(object: &TidalScheduler) -> Written {
        Written {
            key: ObjectKey::of(object),
            resource_version: object.resource_version().unwrap_or_default(),
        }
    }
}

impl<'de> Deserialize<'de> for Written {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Written, D::Error> {
        #[derive(Deserialize)]
        struct Answer {
            metadata: Metadata,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Metadata {
            #[serde(default)]
            namespace: String,
            #[serde(default)]
            name: String,
            #[serde(default)]
            uid: String,
            #[serde(default)]
            resource_version: String,
        }
        let Metadata {
            namespace,
            name,
            uid,
            resource_version,
        } = Answer::deserialize(deserializer)?.metadata;
        Ok(Written {
            key: ObjectKey {
                name: ObjectName { namespace, name },
                uid,
            },
            resource_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_object_is_read_from_its_metadata_alone() {
        let answer = serde_json::json!({
            "apiVersion": "scheduling.tidal.io/v1alpha1",
            "kind": "TidalScheduler",
            "metadata": {
                "name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "42",
                "generation": 3,
                "managedFields": [{
                    "manager": "tidal-scheduler", "operation": "Update",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": { "f:status": { "f:desiredReplicas": {} } },
                }],
            },
            "spec": {
                "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" },
                "triggers": { "times": { "rules": [
                    { "name": "base", "cron": "0 0 8 * * *", "replicas": 3 },
                ] } },
            },
            "status": { "desiredReplicas": 3 },
        });
        let object: TidalScheduler = serde_json::from_value(answer.clone()).expect("an object");
        let written: Written = serde_json::from_value(answer).expect("an answer");
        assert_eq!(written, Written::of(&object));
        assert_eq!(written.key.name.to_string(), "shop/web");
        assert_eq!(
            (written.key.uid.as_str(), written.resource_version.as_str()),
            ("u1", "42")
        );
    }
}
