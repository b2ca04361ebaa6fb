//! The status as the controller reads it back, checked before it is trusted. A status
//! this controller did not write — restored from a backup taken on another cluster,
//! edited by hand, written by a tool with a wrong clock — must never silence an object:
//! a watermark in the far future would make every instant "already applied".
//!
//! What each field read back does when it is impossible (later than now by more than
//! the tolerance that clocks within the bound allow):
//! - `lastTriggerTime` (the idempotency watermark) and its `lastTriggeredRule`: not a
//!   watermark; the newest plausible history entry stands in for it (so the level it
//!   applied is not applied twice), or none.
//! - `history` entries scheduled in the future: no trigger is ever scheduled there, so they
//!   record nothing that happened; dropped.
//! - `observedGeneration` greater than `metadata.generation`: treated as absent (the target
//!   is checked again) and written right.
//! - the `Ready` condition's `lastTransitionTime` in the future: the transition is dated now.
//! - Not read back, so never trusted: `desiredReplicas`, `activeRule`, `nextTriggerTime`,
//!   `nextTriggerRule` and `rules[]` are recomputed from the spec at every reconcile and
//!   overwritten by its write.
//!
//! Each correction is a finding, said once: a Warning Event and the Ready message of the
//! write that corrects the status (after it, the stored status is plausible again).

use jiff::{SignedDuration, Timestamp};

use crate::api::TidalSchedulerStatus;
use crate::controller::plan::seconds;

/// The status to act on and what was wrong with the stored one.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack {
    /// The stored status with every impossible value corrected.
    pub status: TidalSchedulerStatus,
    /// One sentence per correction, naming the field and its value.
    pub findings: Vec<String>,
}

/// How far in the future a time written by another replica can be when both clocks are
/// within `max_clock_offset` of the API server's (none: clocks are not bounded, an hour).
pub fn future_tolerance(max_clock_offset: Option<std::time::Duration>) -> SignedDuration {
    match max_clock_offset.and_then(|max| SignedDuration::try_from(max).ok()) {
        Some(max) => max * 2 + SignedDuration::from_secs(1),
        None => SignedDuration::from_hours(1),
    }
}

/// Checks the `stored` status of an object of `generation` at `now`.
pub fn read_back(
    stored: &TidalSchedulerStatus,
    generation: Option<i64>,
    now: Timestamp,
    tolerance: SignedDuration,
) -> ReadBack {
    let latest_possible = now.checked_add(tolerance).unwrap_or(Timestamp::MAX);
    let mut status = stored.clone();
    let mut findings = Vec::new();

    let (future, plausible): (Vec<_>, Vec<_>) = status
        .history
        .drain(..)
        .partition(|entry| entry.schedule_time.0 > latest_possible);
    status.history = plausible;
    for entry in &future {
        findings.push(format!(
            "status.history has an entry of rule {} scheduled at {}, later than now ({}): no \
             trigger is scheduled in the future, so it was dropped",
            entry.rule,
            entry.schedule_time.0,
            seconds(now)
        ));
    }

    if let Some(mark) = status.last_trigger_time.as_ref().map(|t| t.0)
        && mark > latest_possible
    {
        let newest = status.history.iter().max_by_key(|e| e.schedule_time.0);
        let instead = match newest {
            Some(entry) => format!(
                "the newest history entry ({} at {}) stands in for it",
                entry.rule, entry.schedule_time.0
            ),
            None => "no trigger counts as applied".to_owned(),
        };
        findings.push(format!(
            "status.lastTriggerTime {mark} is later than now ({}): it is not a watermark and \
             was ignored; {instead}",
            seconds(now)
        ));
        status.last_trigger_time = newest.map(|e| e.schedule_time.clone());
        status.last_triggered_rule = newest.map(|e| e.rule.clone());
    }

    if let (Some(observed), Some(generation)) = (status.observed_generation, generation)
        && observed > generation
    {
        findings.push(format!(
            "status.observedGeneration {observed} is greater than metadata.generation \
             {generation}: treated as not observed"
        ));
        status.observed_generation = None;
    }

    for condition in &mut status.conditions {
        if condition.last_transition_time.0 > latest_possible {
            findings.push(format!(
                "status.conditions[{}].lastTransitionTime {} is later than now ({}): dated now",
                condition.type_,
                condition.last_transition_time.0,
                seconds(now)
            ));
            condition.last_transition_time =
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(seconds(now));
        }
    }

    ReadBack { status, findings }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;
    use crate::api::HistoryEntry;

    const TOLERANCE: SignedDuration = SignedDuration::from_secs(5);

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn now() -> Timestamp {
        at("2026-12-02T10:00:00Z")
    }

    fn entry(rule: &str, scheduled: &str) -> HistoryEntry {
        HistoryEntry::applied(rule, at(scheduled))
    }

    fn written_by_us() -> TidalSchedulerStatus {
        TidalSchedulerStatus {
            observed_generation: Some(2),
            last_trigger_time: Some(Time(at("2026-12-02T09:00:00Z"))),
            last_triggered_rule: Some("morning".to_owned()),
            history: vec![
                entry("morning", "2026-12-02T09:00:00Z"),
                entry("night", "2026-12-01T22:00:00Z"),
            ],
            ..TidalSchedulerStatus::default()
        }
    }

    #[test]
    fn a_status_we_could_have_written_is_trusted_as_it_is() {
        let mut stored = written_by_us();
        // Within the tolerance: another replica's clock may be a little ahead.
        stored.last_trigger_time = Some(Time(now() + SignedDuration::from_secs(4)));
        let read = read_back(&stored, Some(2), now(), TOLERANCE);
        assert_eq!(read.status, stored);
        assert!(read.findings.is_empty());
    }

    #[test]
    fn a_watermark_in_the_future_is_no_watermark_and_history_stands_in() {
        let mut stored = written_by_us();
        stored.last_trigger_time = Some(Time(at("2100-01-01T00:00:00Z")));
        stored.last_triggered_rule = Some("restored".to_owned());
        let read = read_back(&stored, Some(2), now(), TOLERANCE);
        assert_eq!(
            read.status.last_trigger_time,
            Some(Time(at("2026-12-02T09:00:00Z")))
        );
        assert_eq!(read.status.last_triggered_rule.as_deref(), Some("morning"));
        assert_eq!(read.findings.len(), 1);
        assert!(
            read.findings[0].starts_with(
                "status.lastTriggerTime 2100-01-01T00:00:00Z is later than now \
                 (2026-12-02T10:00:00Z): it is not a watermark"
            ),
            "{:?}",
            read.findings
        );
    }

    #[test]
    fn a_watermark_in_the_future_without_history_is_absent() {
        let stored = TidalSchedulerStatus {
            last_trigger_time: Some(Time(at("2100-01-01T00:00:00Z"))),
            last_triggered_rule: Some("restored".to_owned()),
            ..TidalSchedulerStatus::default()
        };
        let read = read_back(&stored, None, now(), TOLERANCE);
        assert_eq!(read.status.last_trigger_time, None);
        assert_eq!(read.status.last_triggered_rule, None);
        assert!(read.findings[0].contains("no trigger counts as applied"));
    }

    #[test]
    fn history_entries_scheduled_in_the_future_are_dropped_before_they_stand_in() {
        let mut stored = written_by_us();
        stored
            .history
            .insert(0, entry("restored", "2100-01-01T00:00:00Z"));
        stored.last_trigger_time = Some(Time(at("2100-01-01T00:00:00Z")));
        let read = read_back(&stored, Some(2), now(), TOLERANCE);
        assert_eq!(read.status.history, written_by_us().history);
        assert_eq!(
            read.status.last_trigger_time,
            written_by_us().last_trigger_time
        );
        assert_eq!(read.findings.len(), 2, "{:?}", read.findings);
        assert!(read.findings[0].starts_with("status.history has an entry of rule restored"));
    }

    #[test]
    fn an_observed_generation_beyond_the_objects_is_not_observed() {
        let mut stored = written_by_us();
        stored.observed_generation = Some(99);
        let read = read_back(&stored, Some(2), now(), TOLERANCE);
        assert_eq!(read.status.observed_generation, None);
        assert!(
            read.findings[0]
                .starts_with("status.observedGeneration 99 is greater than metadata.generation 2")
        );
        // An older one is merely out of date: the spec changed since.
        stored.observed_generation = Some(1);
        assert!(
            read_back(&stored, Some(2), now(), TOLERANCE)
                .findings
                .is_empty()
        );
    }

    #[test]
    fn a_transition_in_the_future_is_dated_anew() {
        let mut stored = written_by_us();
        stored.conditions.push(Condition {
            type_: "Ready".to_owned(),
            status: "True".to_owned(),
            reason: "TriggerActive".to_owned(),
            message: String::new(),
            observed_generation: Some(2),
            last_transition_time: Time(at("2100-01-01T00:00:00Z")),
        });
        let read = read_back(&stored, Some(2), now(), TOLERANCE);
        assert_eq!(read.status.conditions[0].last_transition_time, Time(now()));
        assert!(read.findings[0].starts_with("status.conditions[Ready].lastTransitionTime"));
    }

    #[test]
    fn after_a_future_watermark_the_next_instant_is_applied_once() {
        use crate::controller::plan::{Facts, plan};
        use crate::schedule::{Cron, Rule, Tide};
        let tide = Tide::new(vec![Rule {
            name: "morning".to_owned(),
            cron: Cron::parse("CRON_TZ=UTC 0 0 * * * *", None).unwrap(),
            replicas: 3,
            suspended: false,
            days: Default::default(),
        }]);
        let mut stored = written_by_us();
        stored.last_trigger_time = Some(Time(at("2100-01-01T00:00:00Z")));
        let planned = |status: &TidalSchedulerStatus, now: Timestamp| {
            let facts = Facts {
                status,
                created: at("2026-01-01T00:00:00Z"),
                suspended: false,
                armed: None,
            };
            plan(&tide, facts, now).new_trigger
        };
        // 10:00 came after 09:00, the last one applied.
        let stored_plan = planned(&stored, now());
        assert_eq!(
            stored_plan, None,
            "the stored watermark silences every instant"
        );
        let read = read_back(&stored, Some(2), now(), TOLERANCE);
        let new = planned(&read.status, now()).expect("10:00 is new");
        assert_eq!(new.trigger.schedule_time, now());
        assert_eq!(new.superseded, 0, "09:00 was applied, nothing in between");
        // 09:00, the level the history records, is not applied twice.
        let before = at("2026-12-02T09:30:00Z");
        assert_eq!(
            planned(
                &read_back(&stored, Some(2), before, TOLERANCE).status,
                before
            ),
            None
        );
    }

    #[test]
    fn the_tolerance_is_twice_the_clock_bound_and_a_second() {
        assert_eq!(
            future_tolerance(Some(std::time::Duration::from_secs(2))),
            SignedDuration::from_secs(5)
        );
        assert_eq!(future_tolerance(None), SignedDuration::from_hours(1));
    }
}
