//! How the controller names a TidalScheduler: its place (namespace and name, which a
//! recreated object takes over) and, with it, its UID (which tells the two apart).

use std::fmt;

use kube::ResourceExt;

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
