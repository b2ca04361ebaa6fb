//! The elector on virtual time against an in-memory Lease with resourceVersions.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::{Instant, advance, sleep};

use super::*;
use crate::clock::{ClockBound, ClockOffset, ClockSkew, SystemClock};

/// The Lease everybody shares: a record and a version bumped by every write.
#[derive(Default)]
struct Store {
    record: Option<LeaseRecord>,
    version: u64,
    /// Every request fails while set (an unreachable API server).
    down: bool,
}

/// One process's view of the Lease: the version it last read or wrote.
#[derive(Clone)]
struct FakeLock {
    store: Arc<Mutex<Store>>,
    seen: Option<u64>,
}

impl FakeLock {
    fn new(store: &Arc<Mutex<Store>>) -> FakeLock {
        FakeLock {
            store: store.clone(),
            seen: None,
        }
    }
}

fn unreachable() -> LockError {
    LockError::Api("connection refused".to_owned())
}

impl LeaseLock for FakeLock {
    async fn get(&mut self) -> Result<Option<LeaseRecord>, LockError> {
        let store = self.store.lock().unwrap();
        if store.down {
            return Err(unreachable());
        }
        self.seen = store.record.as_ref().map(|_| store.version);
        Ok(store.record.clone())
    }

    async fn create(&mut self, record: &LeaseRecord) -> Result<(), LockError> {
        let mut store = self.store.lock().unwrap();
        if store.down {
            return Err(unreachable());
        }
        if store.record.is_some() {
            return Err(LockError::Conflict);
        }
        store.version += 1;
        store.record = Some(record.clone());
        self.seen = Some(store.version);
        Ok(())
    }

    async fn update(&mut self, record: &LeaseRecord) -> Result<(), LockError> {
        let mut store = self.store.lock().unwrap();
        if store.down {
            return Err(unreachable());
        }
        let seen = self.seen.ok_or(LockError::NotRead)?;
        if store.version != seen {
            return Err(LockError::Conflict);
        }
        store.version += 1;
        store.record = Some(record.clone());
        self.seen = Some(store.version);
        Ok(())
    }

    fn version(&self) -> Option<u64> {
        self.seen
    }

    fn describe(&self) -> String {
        "fake lease".to_owned()
    }
}

const LEASE: Duration = Duration::from_secs(15);

fn elector(store: &Arc<Mutex<Store>>, identity: &str) -> Elector<FakeLock> {
    Elector::new(FakeLock::new(store), identity, LEASE, Arc::new(SystemClock))
}

fn record(store: &Arc<Mutex<Store>>) -> LeaseRecord {
    store.lock().unwrap().record.clone().expect("a lease")
}

#[tokio::test(start_paused = true)]
async fn the_first_candidate_creates_the_lease() {
    let store = Arc::default();
    let mut a = elector(&store, "a");
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Holding);
    let held = record(&store);
    assert_eq!(held.holder, "a");
    assert_eq!(held.lease_duration_seconds, 15);
    assert_eq!(held.transitions, 0);
    assert!(a.is_leader());
}

#[tokio::test(start_paused = true)]
async fn renewing_moves_the_renew_time_and_keeps_the_acquire_time() {
    let store = Arc::default();
    let mut a = elector(&store, "a");
    a.try_acquire_or_renew().await;
    let first = record(&store);
    std::thread::sleep(Duration::from_millis(2)); // wall clock, for distinct renew times
    advance(Duration::from_secs(2)).await;
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Holding);
    let renewed = record(&store);
    assert_eq!(renewed.acquire_time, first.acquire_time);
    assert!(renewed.renew_time > first.renew_time);
    assert_eq!(renewed.transitions, 0);
}

#[tokio::test(start_paused = true)]
async fn a_standby_waits_for_the_lease_to_expire_then_takes_over() {
    let store = Arc::default();
    let mut a = elector(&store, "a");
    let mut b = elector(&store, "b");
    a.try_acquire_or_renew().await;
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    // a goes silent; b saw the record change at t=0.
    advance(LEASE - Duration::from_millis(1)).await;
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    advance(Duration::from_millis(1)).await;
    assert_eq!(b.try_acquire_or_renew().await, Attempt::Holding);
    let taken = record(&store);
    assert_eq!(taken.holder, "b");
    assert_eq!(taken.transitions, 1);
}

#[tokio::test(start_paused = true)]
async fn expiry_counts_from_when_the_record_was_seen_not_from_its_timestamps() {
    let store: Arc<Mutex<Store>> = Arc::default();
    // A holder whose clock is an hour behind ours, renewing right now.
    let long_ago = Timestamp::now() - jiff::SignedDuration::from_hours(1);
    store.lock().unwrap().record = Some(LeaseRecord::held_by("a", LEASE, long_ago));
    store.lock().unwrap().version = 1;
    let mut b = elector(&store, "b");
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    advance(LEASE / 2).await;
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    // A renewal by a (a changed record) restarts b's count.
    store.lock().unwrap().record = Some(LeaseRecord::held_by("a", LEASE, long_ago + LEASE));
    store.lock().unwrap().version = 2;
    advance(LEASE / 2).await;
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    advance(LEASE).await;
    assert_eq!(b.try_acquire_or_renew().await, Attempt::Holding);
}

#[tokio::test(start_paused = true)]
async fn of_two_candidates_racing_for_an_expired_lease_one_wins_the_other_gets_a_conflict() {
    let store = Arc::default();
    let mut a = elector(&store, "a");
    a.try_acquire_or_renew().await;
    let mut b = elector(&store, "b");
    let mut c = elector(&store, "c");
    b.try_acquire_or_renew().await;
    c.try_acquire_or_renew().await;
    advance(LEASE).await;
    // Both read the expired record before either writes.
    let mut b_lock = FakeLock::new(&store);
    b_lock.get().await.unwrap();
    assert_eq!(b.try_acquire_or_renew().await, Attempt::Holding);
    assert_eq!(
        c.try_acquire_or_renew().await,
        Attempt::HeldBy("b".into()),
        "c re-reads and finds b's fresh lease"
    );
    // The write itself is conditional: an update on a stale read is a conflict.
    let stale = LeaseRecord::held_by("c", LEASE, Timestamp::now());
    assert_eq!(b_lock.update(&stale).await, Err(LockError::Conflict));
    assert_eq!(record(&store).holder, "b");
    assert_eq!(record(&store).transitions, 1);
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_the_next_attempt() {
    let store = Arc::default();
    let mut a = elector(&store, "a");
    let mut b = elector(&store, "b");
    a.try_acquire_or_renew().await;
    b.try_acquire_or_renew().await;
    a.release().await.unwrap();
    let released = record(&store);
    assert_eq!(released.holder, "");
    assert_eq!(released.lease_duration_seconds, 1);
    assert!(!a.is_leader());
    assert_eq!(b.try_acquire_or_renew().await, Attempt::Holding);
    assert_eq!(record(&store).transitions, 1);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_that_landed_unseen_does_not_keep_the_lease_from_being_released() {
    let store: Arc<Mutex<Store>> = Arc::default();
    let mut a = elector(&store, "a");
    let mut b = elector(&store, "b");
    a.try_acquire_or_renew().await;
    // A renewal of a's that a took for failed landed after all: the Lease still names a,
    // at a version a has not seen.
    {
        let mut store = store.lock().unwrap();
        store.version += 1;
        store.record.as_mut().unwrap().renew_time = Some(Timestamp::now());
    }
    a.release().await.unwrap();
    assert_eq!(
        record(&store).holder,
        "",
        "released at the version read again"
    );
    assert_eq!(b.try_acquire_or_renew().await, Attempt::Holding);
}

#[tokio::test(start_paused = true)]
async fn a_release_that_finds_another_holder_leaves_it() {
    let store: Arc<Mutex<Store>> = Arc::default();
    let mut a = elector(&store, "a");
    a.try_acquire_or_renew().await;
    {
        let mut store = store.lock().unwrap();
        store.version += 1;
        store.record.as_mut().unwrap().holder = "c".to_owned();
    }
    a.release().await.unwrap();
    assert_eq!(record(&store).holder, "c");
}

#[tokio::test(start_paused = true)]
async fn releasing_a_lease_held_by_another_does_nothing() {
    let store = Arc::default();
    let mut a = elector(&store, "a");
    let mut b = elector(&store, "b");
    a.try_acquire_or_renew().await;
    b.try_acquire_or_renew().await;
    b.release().await.unwrap();
    assert_eq!(record(&store).holder, "a");
}

const TIMING: Timing = Timing {
    lease_duration: Duration::from_secs(4),
    renew_deadline: Duration::from_secs(3),
    retry_period: Duration::from_secs(1),
};

/// Records what a campaign reported.
#[derive(Clone, Default)]
struct Reports(Arc<Mutex<Vec<bool>>>);

impl Observer for Reports {
    fn leading(&self, leading: bool) {
        self.0.lock().unwrap().push(leading);
    }
}

fn campaigner(store: &Arc<Mutex<Store>>, identity: &str) -> (WriteGate, Release, Reports) {
    let elector = Elector::new(
        FakeLock::new(store),
        identity,
        TIMING.lease_duration,
        Arc::new(SystemClock),
    );
    let reports = Reports::default();
    let (gate, release, _campaign) = spawn(elector, TIMING, reports.clone());
    (gate, release, reports)
}

/// Lets the campaigns run for `duration` of virtual time.
async fn run_for(duration: Duration) {
    sleep(duration).await;
}

#[tokio::test(start_paused = true)]
async fn a_campaign_acquires_at_once_and_keeps_renewing() {
    let store = Arc::default();
    let (gate, _release, reports) = campaigner(&store, "a");
    run_for(Duration::from_millis(1)).await;
    assert!(gate.check().is_ok());
    run_for(Duration::from_secs(60)).await;
    assert!(gate.check().is_ok(), "renewed all along");
    assert_eq!(*reports.0.lock().unwrap(), vec![true]);
    assert_eq!(record(&store).transitions, 0);
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_steps_down_at_the_renew_deadline() {
    let store: Arc<Mutex<Store>> = Arc::default();
    let (gate, _release, reports) = campaigner(&store, "a");
    run_for(Duration::from_millis(1)).await;
    assert!(gate.check().is_ok());
    // Renewals happen every second; the last successful one started at t=0 + k s.
    run_for(Duration::from_millis(4500)).await;
    store.lock().unwrap().down = true;
    let cut = Instant::now();
    gate.closed().await;
    // The last successful renew started at t=4 s: the gate closes at 4 + 3 = 7 s.
    let closed_after = cut.elapsed();
    assert_eq!(
        closed_after,
        Duration::from_millis(2500) - Duration::from_millis(1)
    );
    run_for(Duration::from_millis(10)).await;
    assert_eq!(*reports.0.lock().unwrap(), vec![true, false]);
    // Back to standby: once the API server is back, it campaigns again.
    store.lock().unwrap().down = false;
    let first_fence = store.lock().unwrap().version;
    run_for(TIMING.retry_period * 2).await;
    assert!(gate.check().is_ok(), "re-acquired its own lease");
    assert_eq!(*reports.0.lock().unwrap(), vec![true, false, true]);
    // Even the same holder's new term has a fence of its own (its writes of the old
    // term may still be on their way).
    let fence = gate.fence().expect("a term");
    assert!(fence > first_fence, "{fence} after {first_fence}");
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_sees_another_holder_steps_down_at_once() {
    let store: Arc<Mutex<Store>> = Arc::default();
    let (gate, _release, _reports) = campaigner(&store, "a");
    run_for(Duration::from_millis(1)).await;
    // Somebody overwrites the Lease (an operator, or a holder with a broken clock).
    {
        let mut store = store.lock().unwrap();
        store.record = Some(LeaseRecord::held_by("z", LEASE, Timestamp::now()));
        store.version += 1;
    }
    let cut = Instant::now();
    gate.closed().await;
    assert!(
        cut.elapsed() <= TIMING.retry_period,
        "closed at the next renew"
    );
}

#[tokio::test(start_paused = true)]
async fn only_one_of_three_campaigns_leads_and_a_release_hands_over_within_a_retry_period() {
    let store = Arc::default();
    let (a_gate, a_release, _) = campaigner(&store, "a");
    run_for(Duration::from_millis(1)).await;
    let (b_gate, _b_release, _) = campaigner(&store, "b");
    let (c_gate, _c_release, _) = campaigner(&store, "c");
    for _ in 0..100 {
        run_for(Duration::from_millis(100)).await;
        let open = [&a_gate, &b_gate, &c_gate]
            .iter()
            .filter(|g| g.is_open())
            .count();
        assert_eq!(open, 1, "exactly one leader");
    }
    assert!(a_gate.is_open());
    let a_fence = a_gate.fence().expect("a leads");
    let released = Instant::now();
    a_release.release().await;
    assert!(!a_gate.is_open());
    loop {
        run_for(Duration::from_millis(10)).await;
        if b_gate.is_open() || c_gate.is_open() {
            break;
        }
    }
    let handover = released.elapsed();
    assert!(
        handover <= TIMING.retry_period.mul_f64(1.2),
        "handover took {handover:?}"
    );
    assert_eq!(record(&store).transitions, 1);
    let successor = [&b_gate, &c_gate].into_iter().find(|g| g.is_open());
    let fence = successor.and_then(WriteGate::fence).expect("a successor");
    assert!(
        fence > a_fence,
        "the successor's fence {fence} after {a_fence}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_killed_leader_is_replaced_after_the_lease_duration() {
    let store = Arc::default();
    let elector_a = Elector::new(
        FakeLock::new(&store),
        "a",
        TIMING.lease_duration,
        Arc::new(SystemClock),
    );
    let (terms, a_gate) = tokio::sync::watch::channel(None);
    let (_release, released) = tokio::sync::oneshot::channel();
    let a = tokio::spawn(campaign(elector_a, TIMING, terms, released, ()));
    run_for(Duration::from_millis(1)).await;
    let (b_gate, _b_release, _) = campaigner(&store, "b");
    run_for(Duration::from_secs(5)).await;
    assert!(WriteGate::leased(a_gate).is_open());
    assert!(!b_gate.is_open());
    a.abort(); // SIGKILL: no release
    let killed = Instant::now();
    b_gate.openings().boxed().next().await;
    let failover = killed.elapsed();
    // b saw a's last renewal at most a retry period (plus jitter) before the kill.
    assert!(failover <= TIMING.lease_duration + TIMING.retry_period.mul_f64(1.2));
    assert!(failover >= TIMING.lease_duration - TIMING.retry_period.mul_f64(1.2));
}

#[test]
fn timing_rules_are_enforced() {
    assert_eq!(Timing::default().validate(), Ok(()));
    assert_eq!(TIMING.validate(), Ok(()));
    let with = |lease, renew, retry| Timing {
        lease_duration: Duration::from_millis(lease),
        renew_deadline: Duration::from_millis(renew),
        retry_period: Duration::from_millis(retry),
    };
    assert_eq!(
        with(10_000, 10_000, 2_000).validate(),
        Err(TimingError::LeaseNotLongerThanDeadline {
            lease: Duration::from_secs(10),
            renew: Duration::from_secs(10)
        })
    );
    assert!(matches!(
        with(15_000, 2_400, 2_000).validate(),
        Err(TimingError::DeadlineNotLongerThanRetries { .. })
    ));
    assert!(with(15_000, 2_401, 2_000).validate().is_ok());
    assert_eq!(
        with(15_000, 10_000, 0).validate(),
        Err(TimingError::NotPositive("retry period"))
    );
    assert!(matches!(
        with(15_500, 10_000, 2_000).validate(),
        Err(TimingError::FractionalLease(_))
    ));
}

use futures::StreamExt;

/// A clock bound of 2 s on an offset measured as `offset_secs` (server minus ours).
fn measured(offset_secs: i64) -> ClockBound {
    let offset = ClockOffset::new(Arc::new(SystemClock));
    set_offset(&offset, offset_secs);
    ClockBound::new(offset, Some(Duration::from_secs(2)))
}

/// Records a response saying the server's clock is `offset_secs` from ours.
fn set_offset(offset: &ClockOffset, offset_secs: i64) {
    let now = std::time::Instant::now();
    let date = Timestamp::now() + jiff::SignedDuration::from_secs(offset_secs);
    offset.record(now, now, date);
}

#[tokio::test(start_paused = true)]
async fn a_replica_whose_clock_is_off_takes_neither_a_free_nor_an_expired_lease() {
    let store: Arc<Mutex<Store>> = Arc::default();
    let mut skewed = elector(&store, "skewed").with_clock_bound(measured(-45));
    assert!(matches!(
        skewed.try_acquire_or_renew().await,
        Attempt::ClockSkewed(skew) if skew.offset.as_secs() == -45 || skew.offset.as_secs() == -44
    ));
    assert!(store.lock().unwrap().record.is_none(), "no Lease created");

    let mut healthy = elector(&store, "healthy").with_clock_bound(measured(0));
    assert_eq!(healthy.try_acquire_or_renew().await, Attempt::Holding);
    // The healthy holder dies; its lease expires.
    assert!(matches!(
        skewed.try_acquire_or_renew().await,
        Attempt::HeldBy(holder) if holder == "healthy"
    ));
    advance(LEASE + Duration::from_secs(1)).await;
    assert!(matches!(
        skewed.try_acquire_or_renew().await,
        Attempt::ClockSkewed(_)
    ));
    assert_eq!(record(&store).holder, "healthy");
}

/// Records what a campaign reported about its clock.
#[derive(Clone, Default)]
struct ClockReports(Arc<Mutex<Vec<bool>>>);

impl Observer for ClockReports {
    fn leading(&self, _: bool) {}

    fn clock_skewed(&self, skew: Option<ClockSkew>) {
        self.0.lock().unwrap().push(skew.is_some());
    }
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_clock_goes_off_stops_writing_at_once_and_hands_over() {
    let store: Arc<Mutex<Store>> = Arc::default();
    let bound = measured(0);
    let offset = bound.offset().clone();
    let a = elector(&store, "a").with_clock_bound(bound);
    let reports = ClockReports::default();
    let (a_gate, _a_release, _a_campaign) = spawn(a, TIMING, reports.clone());
    run_for(Duration::from_millis(1)).await;
    assert!(a_gate.check().is_ok());
    let (b_gate, _b_release, _) = campaigner(&store, "b");
    run_for(Duration::from_secs(5)).await;
    assert!(a_gate.is_open() && !b_gate.is_open());

    // Its clock is now 45 s off (a step of the wall clock, or of the server's).
    set_offset(&offset, 45);
    assert!(!a_gate.is_open(), "writes stop before the step-down");
    let skewed_at = Instant::now();
    loop {
        run_for(Duration::from_millis(10)).await;
        if b_gate.is_open() {
            break;
        }
    }
    // Released at a's next renew (1 s), taken at b's next attempt (1.1 s at most).
    let handover = skewed_at.elapsed();
    assert!(handover <= Duration::from_millis(2200), "{handover:?}");
    assert_eq!(*reports.0.lock().unwrap(), vec![true]);
    run_for(Duration::from_secs(10)).await;
    assert!(!a_gate.is_open(), "a skewed replica does not campaign");
    assert_eq!(record(&store).holder, "b");

    // Clock fixed: it campaigns again (and stands by, b holds the Lease).
    set_offset(&offset, 0);
    run_for(Duration::from_secs(3)).await;
    assert_eq!(*reports.0.lock().unwrap(), vec![true, false]);
    assert_eq!(record(&store).holder, "b");
}
