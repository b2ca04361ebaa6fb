//! The kinds targets name, as discovery found them. Their keys are whatever apiVersion and
//! kind users write, so the cache is bounded: outcomes expire (a found kind after
//! [`KIND_TTL`], an unknown one after [`UNKNOWN_KIND_TTL`], as a CRD may be installed
//! meanwhile), expired ones are dropped, and at most [`CAPACITY`] kinds are kept. A kind is
//! looked up once at a time — the reconciles of a burst needing it send one request — and
//! never behind another kind's lookup, so one tenant's unknown kinds delay no one else.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::core::{ApiResource, GroupVersionKind};
use tokio::time::Instant;

/// How long a discovered kind is trusted before it is looked up again.
pub const KIND_TTL: Duration = Duration::from_secs(600);

/// How long an unknown kind stays unknown.
pub const UNKNOWN_KIND_TTL: Duration = Duration::from_secs(5);

/// Kinds kept at most; beyond, the one looked up longest ago is forgotten.
pub const CAPACITY: usize = 1024;

/// A discovered kind: its resource and whether it has `/scale`; `None` when unknown.
pub type Discovered = Option<(ApiResource, bool)>;

/// A lookup's outcome: the kind, or why discovery failed (a transient failure, reported to
/// the lookups that waited for it).
pub type Outcome = Result<Discovered, String>;

/// What is known of one kind.
#[derive(Default)]
struct Entry {
    /// The last lookup's end and outcome; `None` until one ended.
    last: Option<(Instant, Outcome)>,
    /// Held while the kind is looked up.
    lookup: Arc<tokio::sync::Mutex<()>>,
}

impl Entry {
    /// Its outcome while trusted (a failure is never trusted).
    fn fresh(&self, now: Instant) -> Option<Discovered> {
        match &self.last {
            Some((at, Ok(found))) if now.duration_since(*at) < ttl(found) => Some(found.clone()),
            _ => None,
        }
    }

    /// Whether it may be dropped: no lookup holds it and what it knows is stale.
    fn idle_and_stale(&self, now: Instant) -> bool {
        Arc::strong_count(&self.lookup) == 1 && self.fresh(now).is_none()
    }
}

/// The discovered kinds.
#[derive(Default)]
pub struct Kinds {
    entries: Mutex<HashMap<GroupVersionKind, Entry>>,
}

impl Kinds {
    /// The kind `gvk`, from the cache while trusted, else from `look_up` — run once at a
    /// time for this kind: a caller that waited for another's lookup takes its outcome,
    /// found or failed, instead of asking again.
    pub async fn get<F, Fut>(&self, gvk: &GroupVersionKind, look_up: F) -> Outcome
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let asked = Instant::now();
        let lookup = {
            let mut entries = self.lock();
            if let Some(found) = entries.get(gvk).and_then(|e| e.fresh(asked)) {
                return Ok(found);
            }
            if !entries.contains_key(gvk) {
                make_room(&mut entries, asked);
            }
            entries.entry(gvk.clone()).or_default().lookup.clone()
        };
        let _one_at_a_time = lookup.lock().await;
        if let Some(entry) = self.lock().get(gvk) {
            let now = Instant::now();
            if let Some(found) = entry.fresh(now) {
                return Ok(found);
            }
            if let Some((at, Err(failure))) = &entry.last
                && *at >= asked
            {
                return Err(failure.clone());
            }
        }
        let outcome = look_up().await;
        let mut entries = self.lock();
        let entry = entries.entry(gvk.clone()).or_insert_with(|| Entry {
            last: None,
            lookup: lookup.clone(),
        });
        entry.last = Some((Instant::now(), outcome.clone()));
        outcome
    }

    /// Kinds held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupVersionKind, Entry>> {
        crate::sync::lock(&self.entries)
    }
}

/// Drops what is stale, and if still full the idle kind looked up longest ago.
fn make_room(entries: &mut HashMap<GroupVersionKind, Entry>, now: Instant) {
    if entries.len() < CAPACITY {
        return;
    }
    entries.retain(|_, entry| !entry.idle_and_stale(now));
    if entries.len() < CAPACITY {
        return;
    }
    let oldest = entries
        .iter()
        .filter(|(_, entry)| Arc::strong_count(&entry.lookup) == 1)
        .min_by_key(|(_, entry)| entry.last.as_ref().map(|(at, _)| *at))
        .map(|(gvk, _)| gvk.clone());
    if let Some(oldest) = oldest {
        entries.remove(&oldest);
    }
}

fn ttl(found: &Discovered) -> Duration {
    if found.is_some() {
        KIND_TTL
    } else {
        UNKNOWN_KIND_TTL
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn gvk(kind: &str) -> GroupVersionKind {
        GroupVersionKind::gvk("example.com", "v1", kind)
    }

    fn found(kind: &str) -> Outcome {
        Ok(Some((ApiResource::from_gvk(&gvk(kind)), true)))
    }

    #[tokio::test(start_paused = true)]
    async fn a_kind_is_trusted_for_its_ttl_an_unknown_one_for_a_short_while() {
        let kinds = Kinds::default();
        let asked = AtomicUsize::new(0);
        let look_up = |outcome: Outcome| {
            asked.fetch_add(1, Ordering::SeqCst);
            async move { outcome }
        };
        kinds
            .get(&gvk("Known"), || look_up(found("Known")))
            .await
            .unwrap();
        kinds
            .get(&gvk("Known"), || look_up(found("Known")))
            .await
            .unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        assert_eq!(
            kinds.get(&gvk("Gone"), || look_up(Ok(None))).await,
            Ok(None)
        );
        tokio::time::advance(UNKNOWN_KIND_TTL).await;
        kinds.get(&gvk("Gone"), || look_up(Ok(None))).await.unwrap();
        kinds
            .get(&gvk("Known"), || look_up(found("Known")))
            .await
            .unwrap();
        assert_eq!(
            asked.load(Ordering::SeqCst),
            3,
            "only the unknown kind again"
        );
        tokio::time::advance(KIND_TTL).await;
        kinds
            .get(&gvk("Known"), || look_up(found("Known")))
            .await
            .unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn the_cache_holds_at_most_its_capacity_of_kinds_users_made_up() {
        let kinds = Kinds::default();
        for i in 0..CAPACITY + 10 {
            let kind = format!("Made{i}");
            kinds.get(&gvk(&kind), || async { Ok(None) }).await.unwrap();
        }
        assert!(kinds.len() <= CAPACITY, "{}", kinds.len());
        // A known kind survives the unknown ones' churn once they are stale.
        kinds
            .get(&gvk("Known"), || async { found("Known") })
            .await
            .unwrap();
        tokio::time::advance(UNKNOWN_KIND_TTL).await;
        for i in 0..CAPACITY {
            let kind = format!("Again{i}");
            kinds.get(&gvk(&kind), || async { Ok(None) }).await.unwrap();
        }
        assert!(kinds.len() <= CAPACITY);
        let relooked = AtomicUsize::new(0);
        kinds
            .get(&gvk("Known"), || async {
                relooked.fetch_add(1, Ordering::SeqCst);
                found("Known")
            })
            .await
            .unwrap();
        assert!(relooked.load(Ordering::SeqCst) <= 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_lookup_of_one_kind_holds_back_no_other_kind() {
        let kinds = Arc::new(Kinds::default());
        let (release, held) = tokio::sync::oneshot::channel::<()>();
        let slow = {
            let kinds = kinds.clone();
            tokio::spawn(async move {
                kinds
                    .get(&gvk("Slow"), || async {
                        let _ = held.await;
                        Ok(None)
                    })
                    .await
            })
        };
        tokio::task::yield_now().await;
        let other = kinds.get(&gvk("Other"), || async { found("Other") }).await;
        assert!(
            other.is_ok_and(|found| found.is_some()),
            "answered while Slow waits"
        );
        release.send(()).unwrap();
        assert_eq!(slow.await.unwrap(), Ok(None));
    }
}
