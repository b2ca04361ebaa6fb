//! The days a rule may fire on (docs/design.md §10): calendars of single dates, date ranges and
//! yearly dates, each read in its own time zone. A rule skips the days of its `skip`
//! calendars and, with `only` calendars, fires on their days alone; skip wins where both
//! hold.
//!
//! ```
//! use std::sync::Arc;
//! use jiff::civil::date;
//! use tidal_scheduler::schedule::{Calendar, Day, Days, Zone};
//!
//! let holidays = Calendar::new(
//!     "TidalCalendar shop/uk-holidays",
//!     Zone::named("Europe/London")?,
//!     vec![Day::Yearly { month: 12, day: 25 }, Day::Date(date(2026, 12, 28))],
//! );
//! let days = Days::new(vec![Arc::new(holidays)], Vec::new());
//! // 2026-12-25 09:00 in London is a skipped day; the 24th is not.
//! assert!(!days.allows("2026-12-25T09:00:00Z".parse()?));
//! assert!(days.allows("2026-12-24T09:00:00Z".parse()?));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use jiff::civil::Date;
use jiff::{SignedDuration, Timestamp, ToSpan};

use super::zone::Zone;

/// Years a yearly date is looked for ahead or back (a 29 February recurs within 8).
const YEARLY_SEARCH: i16 = 8;

/// One entry of a calendar, in the calendar's own zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Day {
    /// A single date.
    Date(Date),
    /// Every date from `first` to `last`, both included.
    Range {
        /// The first date.
        first: Date,
        /// The last date (not before `first`).
        last: Date,
    },
    /// The same month and day every year (29 February: leap years only).
    Yearly {
        /// 1–12.
        month: i8,
        /// 1–31, a day that month can have.
        day: i8,
    },
}

impl Day {
    fn contains(&self, date: Date) -> bool {
        match *self {
            Day::Date(d) => d == date,
            Day::Range { first, last } => first <= date && date <= last,
            Day::Yearly { month, day } => date.month() == month && date.day() == day,
        }
    }

    /// The first date of this entry strictly after `date`.
    fn first_after(&self, date: Date) -> Option<Date> {
        match *self {
            Day::Date(d) => (d > date).then_some(d),
            Day::Range { first, .. } if date < first => Some(first),
            Day::Range { last, .. } if date < last => date.tomorrow().ok(),
            Day::Range { .. } => None,
            Day::Yearly { month, day } => (0..=YEARLY_SEARCH)
                .filter_map(|ahead| Date::new(date.year().checked_add(ahead)?, month, day).ok())
                .find(|d| *d > date),
        }
    }

    /// The last date of this entry strictly before `date`.
    fn last_before(&self, date: Date) -> Option<Date> {
        match *self {
            Day::Date(d) => (d < date).then_some(d),
            Day::Range { last, .. } if date > last => Some(last),
            Day::Range { first, .. } if date > first => date.yesterday().ok(),
            Day::Range { .. } => None,
            Day::Yearly { month, day } => (0..=YEARLY_SEARCH)
                .filter_map(|back| Date::new(date.year().checked_sub(back)?, month, day).ok())
                .find(|d| *d < date),
        }
    }
}

/// Named days in a time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    name: String,
    zone: Zone,
    days: Vec<Day>,
}

impl Calendar {
    /// A calendar called `name` (how messages refer to it) over `days` in `zone`.
    pub fn new(name: impl Into<String>, zone: Zone, days: Vec<Day>) -> Calendar {
        Calendar {
            name: name.into(),
            zone,
            days,
        }
    }

    /// How messages refer to it, e.g. `TidalCalendar shop/uk-holidays`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its time zone.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// Its entries.
    pub fn days(&self) -> &[Day] {
        &self.days
    }

    /// The date of `instant` in this calendar's zone.
    pub fn date_of(&self, instant: Timestamp) -> Date {
        instant.to_zoned(self.zone.time_zone().clone()).date()
    }

    /// Whether the date of `instant`, in this calendar's zone, is one of its days.
    pub fn contains(&self, instant: Timestamp) -> bool {
        self.contains_date(self.date_of(instant))
    }

    /// Whether `date` is one of its days.
    pub fn contains_date(&self, date: Date) -> bool {
        self.days.iter().any(|day| day.contains(date))
    }

    /// The first instant of `date` in this zone (after a gap if midnight is skipped).
    pub fn start_of(&self, date: Date) -> Option<Timestamp> {
        let day = date.to_zoned(self.zone.time_zone().clone()).ok()?;
        Some(day.start_of_day().ok()?.timestamp())
    }

    /// The span `[start, end)` of the local day of `instant`.
    pub fn day_around(&self, instant: Timestamp) -> Option<(Timestamp, Timestamp)> {
        let date = self.date_of(instant);
        Some((self.start_of(date)?, self.start_of(date.tomorrow().ok()?)?))
    }

    fn next_date_after(&self, date: Date) -> Option<Date> {
        self.days.iter().filter_map(|d| d.first_after(date)).min()
    }

    fn last_date_before(&self, date: Date) -> Option<Date> {
        self.days.iter().filter_map(|d| d.last_before(date)).max()
    }
}

/// Why a rule does not fire at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal<'a> {
    /// Its day is in this `skip` calendar.
    Skipped(&'a Calendar),
    /// Its day is in none of the `only` calendars (this is the first of them).
    NotOnly(&'a Calendar),
}

impl Refusal<'_> {
    /// The calendar that refused.
    pub fn calendar(&self) -> &Calendar {
        match self {
            Refusal::Skipped(c) | Refusal::NotOnly(c) => c,
        }
    }
}

/// Which days a rule fires on: not on its `skip` calendars' days and, if it has `only`
/// calendars, on theirs alone. The default fires every day.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Days {
    skip: Vec<Arc<Calendar>>,
    only: Vec<Arc<Calendar>>,
}

impl Days {
    /// Days without the days of `skip` and, unless `only` is empty, within its days.
    pub fn new(skip: Vec<Arc<Calendar>>, only: Vec<Arc<Calendar>>) -> Days {
        Days { skip, only }
    }

    /// Whether no calendar limits the days.
    pub fn is_every_day(&self) -> bool {
        self.skip.is_empty() && self.only.is_empty()
    }

    /// The calendars whose days are skipped.
    pub fn skip(&self) -> &[Arc<Calendar>] {
        &self.skip
    }

    /// The calendars whose days alone are allowed (none: every day).
    pub fn only(&self) -> &[Arc<Calendar>] {
        &self.only
    }

    /// Whether a rule may fire at `instant`.
    pub fn allows(&self, instant: Timestamp) -> bool {
        self.refusal(instant).is_none()
    }

    /// Why a rule may not fire at `instant`, if it may not.
    pub fn refusal(&self, instant: Timestamp) -> Option<Refusal<'_>> {
        if let Some(skip) = self.skip.iter().find(|c| c.contains(instant)) {
            return Some(Refusal::Skipped(skip));
        }
        if self.only.is_empty() || self.only.iter().any(|c| c.contains(instant)) {
            return None;
        }
        self.only.first().map(|only| Refusal::NotOnly(only))
    }

    /// For a refused `instant`: the earliest instant after it that may be allowed
    /// (`None`: no day is ever allowed again).
    pub fn next_chance(&self, instant: Timestamp) -> Option<Timestamp> {
        let mut chance = instant;
        for calendar in self.skip.iter().filter(|c| c.contains(instant)) {
            let tomorrow = calendar.date_of(instant).tomorrow().ok()?;
            chance = chance.max(calendar.start_of(tomorrow)?);
        }
        if !self.only.is_empty() && !self.only.iter().any(|c| c.contains(instant)) {
            let earliest = self
                .only
                .iter()
                .filter_map(|c| c.start_of(c.next_date_after(c.date_of(instant))?))
                .min()?;
            chance = chance.max(earliest);
        }
        (chance > instant).then_some(chance)
    }

    /// For a refused `instant`: the latest instant before it that may be allowed
    /// (`None`: no earlier day was ever allowed).
    pub fn previous_chance(&self, instant: Timestamp) -> Option<Timestamp> {
        let just_before = |start: Timestamp| start.checked_sub(SignedDuration::from_nanos(1)).ok();
        let mut chance = instant;
        for calendar in self.skip.iter().filter(|c| c.contains(instant)) {
            chance = chance.min(just_before(calendar.start_of(calendar.date_of(instant))?)?);
        }
        if !self.only.is_empty() && !self.only.iter().any(|c| c.contains(instant)) {
            let latest = self
                .only
                .iter()
                .filter_map(|c| {
                    let date = c.last_date_before(c.date_of(instant))?;
                    just_before(c.start_of(date.checked_add(1.day()).ok()?)?)
                })
                .max()?;
            chance = chance.min(latest);
        }
        (chance < instant).then_some(chance)
    }
}

#[cfg(test)]
mod tests;
