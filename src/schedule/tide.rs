//! The tide: which rule's replicas are in effect at an instant, which trigger comes next,
//! and which rules collide (docs/design.md §4).
//!
//! The rule with the latest fire time at or before the instant sets the level; rules firing
//! at the same instant collide, the largest `replicas` wins and ties break by name.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use jiff::{SignedDuration, Timestamp};

use super::days::Days;
use super::expression::Cron;

/// How far back a rule's last fire is looked for; older fires do not set a level.
pub const LOOKBACK: SignedDuration = SignedDuration::from_hours(24 * 366);

/// Distinct superseded instants are counted exactly up to this number, then capped.
pub const SUPERSEDED_CAP: usize = 10_000;

/// How far a rule's next allowed fire is searched for past refused days (robfig's five
/// years).
const DAYS_HORIZON: SignedDuration = SignedDuration::from_hours(24 * 366 * 5);

/// One scaling rule as the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Unique name within its object.
    pub name: String,
    /// When it fires.
    pub cron: Cron,
    /// Replicas it sets.
    pub replicas: i32,
    /// A suspended rule never fires and never sets the level.
    pub suspended: bool,
    /// The days it may fire on (its calendars); an instant on another day is no instant.
    pub days: Days,
}

impl Rule {
    /// The first instant strictly after `after` at which the cron fires on an allowed day.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let limit = after.checked_add(DAYS_HORIZON).unwrap_or(Timestamp::MAX);
        let mut cursor = after;
        loop {
            let fire = self.cron.next_after(cursor)?;
            if self.days.allows(fire) {
                return Some(fire);
            }
            let chance = self.days.next_chance(fire, limit)?;
            // `next_after` looks strictly after whole seconds: this makes it look from
            // `chance` on.
            cursor = chance.checked_sub(SignedDuration::from_nanos(1)).ok()?;
        }
    }

    /// The latest instant at or before `at`, and not before `not_before`, at which the
    /// cron fires on an allowed day.
    pub fn latest_at_or_before(&self, at: Timestamp, not_before: Timestamp) -> Option<Timestamp> {
        let mut cursor = at;
        loop {
            let fire = self.cron.latest_at_or_before(cursor, not_before)?;
            if self.days.allows(fire) {
                return Some(fire);
            }
            cursor = self.days.previous_chance(fire, not_before)?;
        }
    }

    /// Its latest fire at or before `now`, looking back at most [`LOOKBACK`].
    pub fn last_within_lookback(&self, now: Timestamp) -> Option<Timestamp> {
        let not_before = now.checked_sub(LOOKBACK).unwrap_or(Timestamp::MIN);
        self.latest_at_or_before(now, not_before)
    }

    /// The cron's instants in `(after, until]` that its calendars refuse, at most `cap`.
    pub fn skipped_between(
        &self,
        after: Timestamp,
        until: Timestamp,
        cap: usize,
    ) -> Vec<Timestamp> {
        if self.days.is_every_day() || self.suspended {
            return Vec::new();
        }
        let mut skipped = Vec::new();
        let mut cursor = after;
        while skipped.len() < cap {
            let Some(fire) = self.cron.next_after(cursor).filter(|fire| *fire <= until) else {
                break;
            };
            if !self.days.allows(fire) {
                skipped.push(fire);
            }
            cursor = fire;
        }
        skipped
    }
}

/// The tide at one instant: [`Tide::level_at`], [`Tide::next_after`] and each rule's own
/// fires, from one search per rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moment {
    /// The trigger in effect.
    pub level: Option<Trigger>,
    /// The next trigger.
    pub next: Option<Trigger>,
    /// Each rule's fires, in the rules' order.
    pub rules: Vec<RuleFires>,
}

/// One rule's fires around an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleFires {
    /// Its latest fire at or before the instant, within [`LOOKBACK`] (suspended rules too).
    pub last: Option<Timestamp>,
    /// Its first fire after the instant; `None` when suspended.
    pub next: Option<Timestamp>,
}

/// A rule firing at an instant: the winner among every rule firing then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// The winning rule.
    pub rule: String,
    /// Its replicas.
    pub replicas: i32,
    /// The scheduled instant.
    pub schedule_time: Timestamp,
    /// Every rule firing at this instant, winner included, by name; empty without a conflict.
    pub colliding: Vec<String>,
}

impl Trigger {
    /// Whether several rules fire at this instant.
    pub fn is_conflict(&self) -> bool {
        !self.colliding.is_empty()
    }
}

/// The rules of one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tide {
    rules: Vec<Rule>,
}

impl Tide {
    /// A tide over `rules`.
    pub fn new(rules: Vec<Rule>) -> Tide {
        Tide { rules }
    }

    /// All rules, suspended ones included.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    fn active(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(|rule| !rule.suspended)
    }

    /// The trigger in effect at `now`: the latest fire at or before `now` (within
    /// [`LOOKBACK`]); `None` before any rule has fired.
    pub fn level_at(&self, now: Timestamp) -> Option<Trigger> {
        let fires: Vec<(Timestamp, &Rule)> = self
            .active()
            .filter_map(|rule| Some((rule.last_within_lookback(now)?, rule)))
            .collect();
        latest_of(&fires)
    }

    /// The first trigger strictly after `after`, with its collisions detected ahead of time.
    pub fn next_after(&self, after: Timestamp) -> Option<Trigger> {
        let fires: Vec<(Timestamp, &Rule)> = self
            .active()
            .filter_map(|rule| Some((rule.next_after(after)?, rule)))
            .collect();
        earliest_of(&fires)
    }

    /// The tide at `now`, each rule's last and next fire searched once (a rule with
    /// calendars can cost a search over years of days).
    pub fn moment(&self, now: Timestamp) -> Moment {
        let rules: Vec<RuleFires> = self
            .rules
            .iter()
            .map(|rule| RuleFires {
                last: rule.last_within_lookback(now),
                next: (!rule.suspended).then(|| rule.next_after(now)).flatten(),
            })
            .collect();
        let active = || {
            self.rules
                .iter()
                .zip(&rules)
                .filter(|(rule, _)| !rule.suspended)
        };
        let lasts: Vec<(Timestamp, &Rule)> = active()
            .filter_map(|(rule, fires)| Some((fires.last?, rule)))
            .collect();
        let nexts: Vec<(Timestamp, &Rule)> = active()
            .filter_map(|(rule, fires)| Some((fires.next?, rule)))
            .collect();
        Moment {
            level: latest_of(&lasts),
            next: earliest_of(&nexts),
            rules,
        }
    }

    /// Every trigger in `(after, until]`, in time order, at most `cap` of them.
    pub fn triggers_between(&self, after: Timestamp, until: Timestamp, cap: usize) -> Vec<Trigger> {
        let mut triggers = Vec::new();
        self.for_each_trigger(after, until, |trigger| {
            triggers.push(trigger);
            triggers.len() < cap
        });
        triggers
    }

    /// Calls `visit` with every trigger in `(after, until]`, in time order, until it
    /// returns false.
    pub fn for_each_trigger(
        &self,
        after: Timestamp,
        until: Timestamp,
        mut visit: impl FnMut(Trigger) -> bool,
    ) {
        self.merge_fires(after, until, |time, rules| {
            visit(resolve(time, rules.iter().copied()))
        });
    }

    /// Distinct fire instants strictly between `after` and `before`: the triggers that a
    /// catch-up at `before` supersedes. Exact up to [`SUPERSEDED_CAP`], then capped.
    pub fn superseded_between(&self, after: Timestamp, before: Timestamp) -> usize {
        let Some(until) = before.checked_sub(SignedDuration::from_nanos(1)).ok() else {
            return 0;
        };
        let mut count = 0;
        self.merge_fires(after, until, |_, _| {
            count += 1;
            count < SUPERSEDED_CAP
        });
        count
    }

    /// Walks the fire instants of all active rules in `(after, until]` in time order,
    /// calling `visit` once per distinct instant with the rules firing then, until it
    /// returns false.
    fn merge_fires<'a>(
        &'a self,
        after: Timestamp,
        until: Timestamp,
        mut visit: impl FnMut(Timestamp, &[&'a Rule]) -> bool,
    ) {
        let mut heap: BinaryHeap<Reverse<(Timestamp, usize)>> = self
            .rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| !rule.suspended)
            .filter_map(|(index, rule)| Some(Reverse((rule.next_after(after)?, index))))
            .filter(|Reverse((time, _))| *time <= until)
            .collect();
        let mut firing: Vec<&Rule> = Vec::new();
        while let Some(Reverse((time, _))) = heap.peek().copied() {
            firing.clear();
            while let Some(Reverse((t, index))) = heap.peek().copied()
                && t == time
            {
                heap.pop();
                let rule = &self.rules[index];
                firing.push(rule);
                if let Some(next) = rule.next_after(t).filter(|next| *next <= until) {
                    heap.push(Reverse((next, index)));
                }
            }
            if !visit(time, &firing) {
                return;
            }
        }
    }
}

/// The trigger at the latest of per-rule fire times.
fn latest_of(fires: &[(Timestamp, &Rule)]) -> Option<Trigger> {
    let latest = fires.iter().map(|(time, _)| *time).max()?;
    Some(resolve_at(latest, fires))
}

/// The trigger at the earliest of per-rule fire times.
fn earliest_of(fires: &[(Timestamp, &Rule)]) -> Option<Trigger> {
    let earliest = fires.iter().map(|(time, _)| *time).min()?;
    Some(resolve_at(earliest, fires))
}

/// The trigger at `time` among per-rule fire times: the rules firing exactly then collide.
fn resolve_at(time: Timestamp, fires: &[(Timestamp, &Rule)]) -> Trigger {
    resolve(
        time,
        fires
            .iter()
            .filter(|(t, _)| *t == time)
            .map(|(_, rule)| *rule),
    )
}

/// The winner among rules firing at one instant: most replicas, then smallest name.
fn resolve<'a>(time: Timestamp, rules: impl Iterator<Item = &'a Rule>) -> Trigger {
    let mut rules: Vec<&Rule> = rules.collect();
    rules.sort_by(|a, b| {
        b.replicas
            .cmp(&a.replicas)
            .then_with(|| a.name.cmp(&b.name))
    });
    let winner = rules[0];
    let colliding = if rules.len() > 1 {
        let mut names: Vec<String> = rules.iter().map(|rule| rule.name.clone()).collect();
        names.sort();
        names
    } else {
        Vec::new()
    };
    Trigger {
        rule: winner.name.clone(),
        replicas: winner.replicas,
        schedule_time: time,
        colliding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, cron: &str, replicas: i32) -> Rule {
        Rule {
            name: name.to_owned(),
            cron: Cron::parse(cron, None).unwrap(),
            replicas,
            suspended: false,
            days: Days::default(),
        }
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn ecommerce() -> Tide {
        Tide::new(vec![
            rule("morning-base", "CRON_TZ=Asia/Shanghai 0 0 8 * * *", 20),
            rule(
                "afternoon-peak",
                "CRON_TZ=Asia/Shanghai 0 0 14-17 * * *",
                40,
            ),
            rule("evening-rush", "CRON_TZ=Asia/Shanghai 0 0 19-21 * * *", 60),
            rule("night", "CRON_TZ=Asia/Shanghai 0 0 23 * * *", 5),
        ])
    }

    #[test]
    fn a_moment_is_the_level_the_next_trigger_and_each_rules_fires() {
        let mut rules = ecommerce().rules().to_vec();
        rules[2].suspended = true;
        let tide = Tide::new(rules);
        for now in [
            "2026-11-30T01:00:00Z",
            "2026-11-30T12:00:00Z",
            "2026-11-30T12:00:01Z",
            "2026-12-31T23:59:59Z",
        ] {
            let now = at(now);
            let moment = tide.moment(now);
            assert_eq!(moment.level, tide.level_at(now), "at {now}");
            assert_eq!(moment.next, tide.next_after(now), "at {now}");
            for (rule, fires) in tide.rules().iter().zip(&moment.rules) {
                assert_eq!(fires.last, rule.last_within_lookback(now), "{}", rule.name);
                let next = (!rule.suspended).then(|| rule.next_after(now)).flatten();
                assert_eq!(fires.next, next, "{}", rule.name);
            }
            assert!(moment.rules[2].last.is_some() && moment.rules[2].next.is_none());
        }
    }

    #[test]
    fn the_latest_fire_sets_the_level() {
        let tide = ecommerce();
        let cases = [
            (
                "2026-11-30T01:00:00Z",
                "morning-base",
                20,
                "2026-11-30T00:00:00Z",
            ),
            (
                "2026-11-30T07:30:00Z",
                "afternoon-peak",
                40,
                "2026-11-30T07:00:00Z",
            ),
            (
                "2026-11-30T12:00:00Z",
                "evening-rush",
                60,
                "2026-11-30T12:00:00Z",
            ),
            ("2026-11-30T23:59:59Z", "night", 5, "2026-11-30T15:00:00Z"),
        ];
        for (now, name, replicas, fired) in cases {
            let level = tide.level_at(at(now)).unwrap();
            assert_eq!(
                (level.rule.as_str(), level.replicas, level.schedule_time),
                (name, replicas, at(fired)),
                "at {now}"
            );
            assert!(!level.is_conflict());
        }
    }

    #[test]
    fn no_level_before_any_rule_fired_within_a_year() {
        let tide = Tide::new(vec![rule("leap", "TZ=UTC 0 0 0 29 2 *", 3)]);
        assert!(tide.level_at(at("2027-03-01T00:00:00Z")).is_none());
        assert_eq!(
            tide.level_at(at("2028-03-01T00:00:00Z")).unwrap().replicas,
            3
        );
        assert!(
            Tide::default()
                .level_at(at("2026-01-01T00:00:00Z"))
                .is_none()
        );
    }

    #[test]
    fn simultaneous_rules_collide_and_the_largest_wins() {
        let tide = Tide::new(vec![
            rule("b-small", "TZ=UTC 0 0 8 * * *", 10),
            rule("c-large", "TZ=UTC 0 0 8 * * MON-FRI", 30),
            rule("a-large", "TZ=UTC 0 0 8 * * *", 30),
        ]);
        // 2026-11-30 is a Monday: all three fire; the tie on 30 breaks by name.
        let level = tide.level_at(at("2026-11-30T09:00:00Z")).unwrap();
        assert_eq!((level.rule.as_str(), level.replicas), ("a-large", 30));
        assert_eq!(level.colliding, ["a-large", "b-small", "c-large"]);
        let next = tide.next_after(at("2026-11-30T09:00:00Z")).unwrap();
        assert_eq!(next.schedule_time, at("2026-12-01T08:00:00Z"));
        assert!(next.is_conflict());
    }

    #[test]
    fn suspended_rules_neither_set_the_level_nor_come_next() {
        let mut tide = ecommerce();
        tide.rules
            .iter_mut()
            .for_each(|r| r.suspended = r.name != "night");
        let level = tide.level_at(at("2026-11-30T12:00:00Z")).unwrap();
        assert_eq!(level.rule, "night");
        let next = tide.next_after(at("2026-11-30T12:00:00Z")).unwrap();
        assert_eq!(
            (next.rule.as_str(), next.schedule_time),
            ("night", at("2026-11-30T15:00:00Z"))
        );
    }

    #[test]
    fn superseded_counts_distinct_instants_strictly_between() {
        let tide = Tide::new(vec![
            rule("every-10s", "TZ=UTC */10 * * * * *", 1),
            rule("every-20s", "TZ=UTC */20 * * * * *", 2),
        ]);
        // (00:00, 01:00): 10,20,...,50 → 5 instants, 20 and 40 shared.
        let n = tide.superseded_between(at("2026-01-01T00:00:00Z"), at("2026-01-01T00:01:00Z"));
        assert_eq!(n, 5);
        let capped =
            tide.superseded_between(at("2026-01-01T00:00:00Z"), at("2026-02-01T00:00:00Z"));
        assert_eq!(capped, SUPERSEDED_CAP);
        assert_eq!(
            tide.superseded_between(at("2026-01-01T00:00:10Z"), at("2026-01-01T00:00:10Z")),
            0
        );
    }

    #[test]
    fn triggers_between_lists_every_instant_once_with_its_winner() {
        let tide = Tide::new(vec![
            rule("ten", "TZ=UTC */10 * * * * *", 1),
            rule("twenty", "TZ=UTC */20 * * * * *", 2),
        ]);
        let triggers =
            tide.triggers_between(at("2026-01-01T00:00:00Z"), at("2026-01-01T00:00:40Z"), 100);
        let summary: Vec<(&str, bool)> = triggers
            .iter()
            .map(|t| (t.rule.as_str(), t.is_conflict()))
            .collect();
        assert_eq!(
            summary,
            [
                ("ten", false),
                ("twenty", true),
                ("ten", false),
                ("twenty", true)
            ]
        );
        assert_eq!(
            tide.triggers_between(at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z"), 3)
                .len(),
            3
        );
    }
}
