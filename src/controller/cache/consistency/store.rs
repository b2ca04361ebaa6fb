//! The store of Kubernetes' ConsistencyStore (`pkg/controller/util/consistency`): per
//! owner (namespace/name + UID), the highest resourceVersion written per group-resource,
//! compared with what the watch caches have seen; and resourceVersion comparison.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use crate::controller::key::{ObjectKey, ObjectName};

/// Compares two resourceVersions the way Kubernetes does
/// (`apimachinery/pkg/util/resourceversion`): well-formed ones are positive decimal
/// integers without leading zeros, of any length; the shorter is smaller, equal lengths
/// compare digit by digit. `None` when either is malformed or empty.
pub fn compare_resource_versions(a: &str, b: &str) -> Option<Ordering> {
    let well_formed =
        |v: &str| !v.is_empty() && !v.starts_with('0') && v.bytes().all(|b| b.is_ascii_digit());
    if !well_formed(a) || !well_formed(b) {
        return None;
    }
    Some(a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    /// The cache has seen every write of ours to this owner (or nothing can be compared).
    Fresh,
    /// The cache is behind our write to `resource` at `written`; it has seen `seen`.
    Stale {
        /// The group-resource written.
        resource: String,
        /// The resourceVersion we wrote.
        written: String,
        /// The newest resourceVersion the cache has seen.
        seen: String,
    },
    /// A write of ours to this owner may have been applied without our knowing its
    /// resourceVersion (cancelled when leadership ended, or unanswered): no cache can vouch
    /// for it, so the object must be read from the API server before acting.
    Unsure,
}

/// What one owner (by UID) has written.
#[derive(Debug, Default)]
struct OwnerWrites {
    uid: String,
    /// Highest resourceVersion written, per group-resource.
    by_resource: HashMap<String, String>,
}

/// The writes not yet confirmed by a check, per owner.
#[derive(Debug, Default)]
pub struct ConsistencyStore {
    owners: Mutex<HashMap<ObjectName, OwnerWrites>>,
}

impl ConsistencyStore {
    /// Records that we wrote `resource_version` of `resource` on behalf of `owner`. A new
    /// UID under the same name starts a fresh record; a malformed version is not
    /// recorded (it could never be compared).
    pub fn wrote(&self, owner: &ObjectKey, resource: &str, resource_version: &str) {
        let uid = owner.uid.as_str();
        if compare_resource_versions(resource_version, resource_version).is_none() {
            return;
        }
        let mut owners = self.lock();
        let written = owners.entry(owner.name.clone()).or_default();
        if written.uid != uid {
            *written = OwnerWrites {
                uid: uid.to_owned(),
                ..OwnerWrites::default()
            };
        }
        let highest = written
            .by_resource
            .entry(resource.to_owned())
            .or_insert_with(|| resource_version.to_owned());
        if compare_resource_versions(resource_version, highest) == Some(Ordering::Greater) {
            *highest = resource_version.to_owned();
        }
    }

    /// Whether the caches (`seen`: the newest resourceVersion of a group-resource's cache,
    /// if there is one) have caught up with our writes for `owner`. Anything that cannot
    /// be compared passes (fail open). A fresh owner's record is cleared; a record of
    /// another UID is dropped.
    pub fn check(&self, owner: &ObjectKey, seen: impl Fn(&str) -> Option<String>) -> Freshness {
        let mut owners = self.lock();
        let Some(written) = owners.get(&owner.name) else {
            return Freshness::Fresh;
        };
        if written.uid == owner.uid {
            for (resource, version) in &written.by_resource {
                let Some(cache) = seen(resource) else {
                    continue;
                };
                if compare_resource_versions(&cache, version) == Some(Ordering::Less) {
                    return Freshness::Stale {
                        resource: resource.clone(),
                        written: version.clone(),
                        seen: cache,
                    };
                }
            }
        }
        owners.remove(&owner.name);
        Freshness::Fresh
    }

    /// Forgets `owner` if its record is of its UID (it was deleted, or is not found).
    pub fn forget(&self, owner: &ObjectKey) {
        let mut owners = self.lock();
        if owners.get(&owner.name).is_some_and(|w| w.uid == owner.uid) {
            owners.remove(&owner.name);
        }
    }

    /// Owners with writes not yet confirmed.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectName, OwnerWrites>> {
        crate::sync::lock(&self.owners)
    }
}

/// The newest resourceVersion one watch cache has seen (objects applied, listed or
/// deleted); cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct CacheVersion(Arc<AtomicU64>);

impl CacheVersion {
    /// Notes a resourceVersion delivered by the watch; malformed ones are ignored.
    pub fn saw(&self, resource_version: &str) {
        if let Ok(version) = resource_version.parse::<u64>()
            && compare_resource_versions(resource_version, resource_version).is_some()
        {
            self.0.fetch_max(version, AtomicOrdering::Relaxed);
        }
    }

    /// The newest resourceVersion seen, if any.
    pub fn newest(&self) -> Option<String> {
        match self.value() {
            0 => None,
            version => Some(version.to_string()),
        }
    }

    /// The newest resourceVersion seen as a number; 0 before any.
    pub fn value(&self) -> u64 {
        self.0.load(AtomicOrdering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIDES: &str = "tidalschedulers.scheduling.tidal.io";

    fn key(name: &str, uid: &str) -> ObjectKey {
        ObjectKey {
            name: ObjectName {
                namespace: "ns".to_owned(),
                name: name.to_owned(),
            },
            uid: uid.to_owned(),
        }
    }

    fn seen(version: &'static str) -> impl Fn(&str) -> Option<String> {
        move |_| Some(version.to_owned())
    }

    #[test]
    fn resource_versions_compare_by_length_then_digits() {
        use Ordering::*;
        assert_eq!(compare_resource_versions("9", "10"), Some(Less));
        assert_eq!(compare_resource_versions("100", "99"), Some(Greater));
        assert_eq!(compare_resource_versions("123", "124"), Some(Less));
        assert_eq!(compare_resource_versions("124", "124"), Some(Equal));
        assert_eq!(
            compare_resource_versions("18446744073709551616", "18446744073709551615"),
            Some(Greater),
            "longer than u64"
        );
    }

    #[test]
    fn malformed_or_empty_resource_versions_do_not_compare() {
        for bad in ["", "0", "012", "12a", "-1", " 12", "1.5"] {
            assert_eq!(compare_resource_versions(bad, "5"), None, "{bad:?}");
            assert_eq!(compare_resource_versions("5", bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_cache_behind_our_write_is_stale_and_one_that_caught_up_is_fresh() {
        let store = ConsistencyStore::default();
        store.wrote(&key("a", "u1"), TIDES, "100");
        assert_eq!(
            store.check(&key("a", "u1"), seen("99")),
            Freshness::Stale {
                resource: TIDES.to_owned(),
                written: "100".to_owned(),
                seen: "99".to_owned()
            }
        );
        assert_eq!(store.pending(), 1, "a stale check keeps the record");
        assert_eq!(store.check(&key("a", "u1"), seen("100")), Freshness::Fresh);
    }

    #[test]
    fn a_successful_check_clears_the_record() {
        let store = ConsistencyStore::default();
        store.wrote(&key("a", "u1"), TIDES, "100");
        assert_eq!(store.check(&key("a", "u1"), seen("150")), Freshness::Fresh);
        assert_eq!(store.pending(), 0);
        assert_eq!(store.check(&key("a", "u1"), seen("1")), Freshness::Fresh);
    }

    #[test]
    fn the_highest_write_per_resource_is_kept() {
        let store = ConsistencyStore::default();
        store.wrote(&key("a", "u1"), TIDES, "100");
        store.wrote(&key("a", "u1"), TIDES, "90");
        store.wrote(&key("a", "u1"), "deployments.apps", "95");
        let cache = |resource: &str| Some(if resource == TIDES { "99" } else { "200" }.to_owned());
        assert!(matches!(
            store.check(&key("a", "u1"), cache),
            Freshness::Stale { resource, .. } if resource == TIDES
        ));
    }

    #[test]
    fn anything_not_comparable_fails_open() {
        let store = ConsistencyStore::default();
        store.wrote(&key("a", "u1"), TIDES, "");
        store.wrote(&key("a", "u1"), TIDES, "07");
        assert_eq!(store.pending(), 0, "malformed writes are not recorded");
        store.wrote(&key("a", "u1"), TIDES, "100");
        assert_eq!(
            store.check(&key("a", "u1"), seen("garbage")),
            Freshness::Fresh
        );
        store.wrote(&key("b", "u2"), TIDES, "100");
        assert_eq!(
            store.check(&key("b", "u2"), |_| None),
            Freshness::Fresh,
            "no cache"
        );
    }

    #[test]
    fn a_new_uid_under_the_same_name_starts_fresh() {
        let store = ConsistencyStore::default();
        store.wrote(&key("a", "old"), TIDES, "100");
        assert_eq!(store.check(&key("a", "new"), seen("50")), Freshness::Fresh);
        assert_eq!(store.pending(), 0, "the old UID's record is dropped");
        store.wrote(&key("a", "old"), TIDES, "100");
        store.wrote(&key("a", "new"), TIDES, "60");
        assert!(matches!(
            store.check(&key("a", "new"), seen("55")),
            Freshness::Stale { written, .. } if written == "60"
        ));
    }

    #[test]
    fn deletion_clears_only_a_matching_uid() {
        let store = ConsistencyStore::default();
        store.wrote(&key("a", "u1"), TIDES, "100");
        store.forget(&key("a", "other"));
        assert_eq!(store.pending(), 1);
        store.forget(&key("a", "u1"));
        assert_eq!(store.pending(), 0);
    }

    #[test]
    fn the_cache_version_only_moves_forward() {
        let cache = CacheVersion::default();
        assert_eq!(cache.newest(), None);
        cache.saw("100");
        cache.saw("90");
        cache.saw("not a version");
        cache.saw("0");
        assert_eq!(cache.newest().as_deref(), Some("100"));
    }
}
