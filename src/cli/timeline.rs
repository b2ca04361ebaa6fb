//! What an object's tide does over a window — the level at the start, every level change
//! and conflict, the instants its calendars skip — computed once for `plan`'s text, JSON
//! and SVG outputs.

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::api::{TidalScheduler, ValidSpec};
use crate::schedule::{Calendar, Refusal, Tide, Trigger};

/// Triggers walked per object (a rule firing every second makes 604,800 a week).
const MAX_TRIGGERS: usize = 2_000_000;
/// Level changes and conflicts kept per object.
const MAX_CHANGES: usize = 10_000;
/// Skipped instants kept per rule.
const MAX_SKIPPED: usize = 1_000;

/// One object's plan over `[from, until)`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// `namespace/name`.
    pub object: String,
    /// `apiVersion kind name` of the target.
    pub target: String,
    /// `Status` or `Scale`.
    pub apply: String,
    /// `spec.suspend`: nothing would be applied.
    pub suspended: bool,
    /// The zone days are shown in: the first rule's.
    pub zone: String,
    /// Window start.
    pub from: Timestamp,
    /// Window end (excluded).
    pub until: Timestamp,
    /// Non-fatal findings.
    pub warnings: Vec<String>,
    /// The trigger in effect at `from`, if any rule fired within a year.
    pub start: Option<Step>,
    /// Every level change and conflict in the window, in time order (at most 10,000).
    pub changes: Vec<Step>,
    /// Instants the rules' calendars skip (at most 1,000 per rule).
    pub skipped: Vec<Skipped>,
    /// The days of the rules' onlyDays calendars within the window.
    pub only_days: Vec<OnlyDay>,
    /// Triggers in the window.
    pub triggers: usize,
    /// Level changes in the window.
    pub level_changes: usize,
    /// Conflicting triggers in the window.
    pub conflicts: usize,
    /// Whether the walk stopped early (too many triggers or changes to keep).
    pub truncated: bool,
}

/// A trigger: the rule that set a level, when, and who it collided with.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The instant.
    pub time: Timestamp,
    /// The same instant in the rule's zone, e.g. `Mon 2026-12-07 08:00:00 CST`.
    pub local_time: String,
    /// The winning rule.
    pub rule: String,
    /// Its replicas.
    pub replicas: i32,
    /// The level before it (`None` before any rule fired).
    pub previous: Option<i32>,
    /// Rules firing together (winner included); empty without a conflict.
    pub colliding: Vec<String>,
}

/// An instant a rule would have fired at but for a calendar.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    /// The rule.
    pub rule: String,
    /// The instant.
    pub time: Timestamp,
    /// The calendar that refused it, e.g. `TidalCalendar shop/uk-holidays`.
    pub calendar: String,
    /// `skipDays` (the day is in that calendar) or `onlyDays` (it is in none of them).
    pub by: SkippedBy,
    /// Start of the refused day in the calendar's zone.
    pub day_start: Timestamp,
    /// End of that day.
    pub day_end: Timestamp,
}

/// Which list of calendars refused an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SkippedBy {
    /// Its day is in a `skipDays` calendar.
    SkipDays,
    /// Its day is in none of the `onlyDays` calendars.
    OnlyDays,
}

/// A day of an onlyDays calendar: the days its rules may fire on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OnlyDay {
    /// The calendar, e.g. `TidalCalendar shop/promotion-days`.
    pub calendar: String,
    /// Start of the day in the calendar's zone.
    pub day_start: Timestamp,
    /// End of that day.
    pub day_end: Timestamp,
}

impl Timeline {
    /// The plan of `object` (validated as `valid`) over `[from, until)`.
    pub fn of(
        id: &str,
        object: &TidalScheduler,
        valid: &ValidSpec,
        from: Timestamp,
        until: Timestamp,
    ) -> Timeline {
        let tide = &valid.tide;
        let target = &object.spec.target_ref;
        let mut timeline = Timeline {
            object: id.to_owned(),
            target: format!("{} {} {}", target.api_version, target.kind, target.name),
            apply: format!("{:?}", object.spec.apply),
            suspended: object.spec.suspend,
            zone: tide
                .rules()
                .first()
                .map_or("UTC", |r| r.cron.zone().name())
                .to_owned(),
            from,
            until,
            warnings: valid.warnings.clone(),
            start: tide.level_at(from).map(|level| step(tide, &level, None)),
            changes: Vec::new(),
            skipped: skipped(tide, from, until),
            only_days: only_days(tide, from, until),
            triggers: 0,
            level_changes: 0,
            conflicts: 0,
            truncated: false,
        };
        timeline.walk(tide);
        timeline
    }

    fn walk(&mut self, tide: &Tide) {
        let mut level = tide.level_at(self.from);
        // The window is [from, until): the level at `from` is the starting point.
        let last_instant = self.until - SignedDuration::from_nanos(1);
        tide.for_each_trigger(self.from, last_instant, |trigger| {
            self.triggers += 1;
            let previous = level.as_ref().map(|l| l.replicas);
            let changed = level
                .as_ref()
                .is_none_or(|l| l.rule != trigger.rule || l.replicas != trigger.replicas);
            self.conflicts += usize::from(trigger.is_conflict());
            self.level_changes += usize::from(changed);
            if changed || trigger.is_conflict() {
                if self.changes.len() < MAX_CHANGES {
                    self.changes.push(step(tide, &trigger, previous));
                } else {
                    self.truncated = true;
                    return false;
                }
            }
            level = Some(trigger);
            if self.triggers >= MAX_TRIGGERS {
                self.truncated = true;
            }
            !self.truncated
        });
    }

    /// "N triggers, N level changes, N conflicts", singular where N is 1.
    pub fn counts(&self) -> String {
        let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        format!(
            "{}, {}, {}",
            count(self.triggers, "trigger"),
            count(self.level_changes, "level change"),
            count(self.conflicts, "conflict")
        )
    }

    /// The level at the start and after each change: `(from, level)` pairs in time order.
    pub fn levels(&self) -> Vec<(Timestamp, Option<i32>)> {
        let mut levels = vec![(self.from, self.start.as_ref().map(|s| s.replicas))];
        levels.extend(self.changes.iter().map(|c| (c.time, Some(c.replicas))));
        levels
    }

    /// The highest level in effect during each of `width` equal slices of the window.
    pub fn columns(&self, width: usize) -> Vec<Option<i32>> {
        let span = (self.until.as_second() - self.from.as_second()).max(1) as f64;
        let column_of = |t: Timestamp| {
            (((t.as_second() - self.from.as_second()) as f64 / span * width as f64) as usize)
                .min(width - 1)
        };
        let mut columns = vec![None; width];
        let mut current = self.start.as_ref().map(|s| s.replicas);
        let mut filled = 0;
        for change in &self.changes {
            let column = column_of(change.time);
            while filled <= column {
                columns[filled] = current;
                filled += 1;
            }
            columns[column] = columns[column].max(Some(change.replicas));
            current = Some(change.replicas);
        }
        columns[filled.min(width)..]
            .iter_mut()
            .for_each(|c| *c = current);
        columns
    }
}

fn step(tide: &Tide, trigger: &Trigger, previous: Option<i32>) -> Step {
    let zone = tide
        .rules()
        .iter()
        .find(|r| r.name == trigger.rule)
        .map(|r| r.cron.zone().time_zone().clone())
        .unwrap_or(jiff::tz::TimeZone::UTC);
    Step {
        time: trigger.schedule_time,
        local_time: trigger
            .schedule_time
            .to_zoned(zone)
            .strftime("%a %Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        rule: trigger.rule.clone(),
        replicas: trigger.replicas,
        previous,
        colliding: trigger.colliding.clone(),
    }
}

/// The instants in `[from, until)` that calendars take from each active rule.
fn skipped(tide: &Tide, from: Timestamp, until: Timestamp) -> Vec<Skipped> {
    let last_instant = until - SignedDuration::from_nanos(1);
    // `skipped_between` is `(after, until]`: start a nanosecond early to include `from`.
    let after = from - SignedDuration::from_nanos(1);
    let mut all: Vec<Skipped> = tide
        .rules()
        .iter()
        .flat_map(|rule| {
            rule.skipped_between(after, last_instant, MAX_SKIPPED)
                .into_iter()
                .filter_map(move |time| {
                    let refusal = rule.days.refusal(time)?;
                    let calendar = refusal.calendar();
                    let (day_start, day_end) = calendar.day_around(time)?;
                    Some(Skipped {
                        rule: rule.name.clone(),
                        time,
                        calendar: calendar.name().to_owned(),
                        by: match refusal {
                            Refusal::Skipped(_) => SkippedBy::SkipDays,
                            Refusal::NotOnly(_) => SkippedBy::OnlyDays,
                        },
                        day_start,
                        day_end,
                    })
                })
        })
        .collect();
    all.sort_by(|a, b| a.time.cmp(&b.time).then_with(|| a.rule.cmp(&b.rule)));
    all
}

/// The days in `[from, until)` of every onlyDays calendar of an active rule, once each.
fn only_days(tide: &Tide, from: Timestamp, until: Timestamp) -> Vec<OnlyDay> {
    let mut calendars: Vec<&Calendar> = Vec::new();
    for rule in tide.rules().iter().filter(|r| !r.suspended) {
        for calendar in rule.days.only() {
            if !calendars.iter().any(|c| c.name() == calendar.name()) {
                calendars.push(calendar);
            }
        }
    }
    let mut days = Vec::new();
    for calendar in calendars {
        let mut date = calendar.date_of(from);
        let last = calendar.date_of(until);
        while date <= last {
            let Ok(next) = date.tomorrow() else { break };
            if calendar.contains_date(date)
                && let (Some(day_start), Some(day_end)) =
                    (calendar.start_of(date), calendar.start_of(next))
                && day_end > from
                && day_start < until
            {
                days.push(OnlyDay {
                    calendar: calendar.name().to_owned(),
                    day_start,
                    day_end,
                });
            }
            date = next;
        }
    }
    days.sort_by_key(|a| a.day_start);
    days
}
