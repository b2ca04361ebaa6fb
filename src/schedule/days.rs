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

/// Named days in a time zone.
///
/// Its entries are indexed once, when it is made: dates and ranges merged into sorted,
/// disjoint spans and yearly days sorted, so that a look-up is a binary search and a run
/// of consecutive days — one range, or adjacent entries — is passed over in one step,
/// however many entries the calendar has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    name: String,
    zone: Zone,
    days: Vec<Day>,
    /// The dates and ranges: sorted, disjoint, none adjacent to the next.
    spans: Vec<(Date, Date)>,
    /// The yearly days as `(month, day)`, sorted, each once.
    yearly: Vec<(i8, i8)>,
}

impl Calendar {
    /// A calendar called `name` (how messages refer to it) over `days` in `zone`.
    pub fn new(name: impl Into<String>, zone: Zone, days: Vec<Day>) -> Calendar {
        let mut spans: Vec<(Date, Date)> = Vec::new();
        let mut yearly = Vec::new();
        for day in &days {
            match *day {
                Day::Date(date) => spans.push((date, date)),
                Day::Range { first, last } => spans.push((first, last.max(first))),
                Day::Yearly { month, day } => yearly.push((month, day)),
            }
        }
        spans.sort_unstable();
        yearly.sort_unstable();
        yearly.dedup();
        Calendar {
            name: name.into(),
            zone,
            days,
            spans: merged(spans),
            yearly,
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
        self.span_at(date).is_some() || self.is_yearly(date)
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

    /// The span of dates and ranges holding `date`.
    fn span_at(&self, date: Date) -> Option<(Date, Date)> {
        let index = self.spans.partition_point(|&(_, last)| last < date);
        self.spans
            .get(index)
            .copied()
            .filter(|&(first, _)| first <= date)
    }

    fn is_yearly(&self, date: Date) -> bool {
        self.yearly
            .binary_search(&(date.month(), date.day()))
            .is_ok()
    }

    /// The first of its days strictly after `date`.
    fn next_date_after(&self, date: Date) -> Option<Date> {
        let tomorrow = date.tomorrow().ok()?;
        let index = self.spans.partition_point(|&(_, last)| last < tomorrow);
        let span = self.spans.get(index).map(|&(first, _)| first.max(tomorrow));
        [span, self.next_yearly_after(date)]
            .into_iter()
            .flatten()
            .min()
    }

    /// The last of its days strictly before `date`.
    fn last_date_before(&self, date: Date) -> Option<Date> {
        let yesterday = date.yesterday().ok()?;
        let index = self.spans.partition_point(|&(first, _)| first <= yesterday);
        let span = index
            .checked_sub(1)
            .map(|index| self.spans[index].1.min(yesterday));
        [span, self.last_yearly_before(date)]
            .into_iter()
            .flatten()
            .max()
    }

    fn next_yearly_after(&self, date: Date) -> Option<Date> {
        let today = (date.month(), date.day());
        (0..=YEARLY_SEARCH).find_map(|ahead| {
            let year = date.year().checked_add(ahead)?;
            let from = if ahead == 0 {
                self.yearly.partition_point(|&day| day <= today)
            } else {
                0
            };
            // At most one entry a year does not exist (29 February).
            self.yearly[from..]
                .iter()
                .find_map(|&(month, day)| Date::new(year, month, day).ok())
        })
    }

    fn last_yearly_before(&self, date: Date) -> Option<Date> {
        let today = (date.month(), date.day());
        (0..=YEARLY_SEARCH).find_map(|back| {
            let year = date.year().checked_sub(back)?;
            let to = if back == 0 {
                self.yearly.partition_point(|&day| day < today)
            } else {
                self.yearly.len()
            };
            self.yearly[..to]
                .iter()
                .rev()
                .find_map(|&(month, day)| Date::new(year, month, day).ok())
        })
    }

    /// The first date after `date` that is none of its days, not later than `limit`:
    /// a run of its days is passed over a span at a time.
    fn first_free_after(&self, date: Date, limit: Date) -> Option<Date> {
        let mut candidate = date.tomorrow().ok()?;
        while candidate <= limit {
            candidate = match self.span_at(candidate) {
                Some((_, last)) => last.tomorrow().ok()?,
                None if self.is_yearly(candidate) => candidate.tomorrow().ok()?,
                None => return Some(candidate),
            };
        }
        None
    }

    /// The last date before `date` that is none of its days, not earlier than `floor`.
    fn last_free_before(&self, date: Date, floor: Date) -> Option<Date> {
        let mut candidate = date.yesterday().ok()?;
        while candidate >= floor {
            candidate = match self.span_at(candidate) {
                Some((first, _)) => first.yesterday().ok()?,
                None if self.is_yearly(candidate) => candidate.yesterday().ok()?,
                None => return Some(candidate),
            };
        }
        None
    }
}

/// Sorted spans with overlapping and adjacent ones joined.
fn merged(sorted: Vec<(Date, Date)>) -> Vec<(Date, Date)> {
    let mut spans: Vec<(Date, Date)> = Vec::with_capacity(sorted.len());
    for (first, last) in sorted {
        match spans.last_mut() {
            Some((_, end)) if end.tomorrow().is_ok_and(|next| first <= next) => {
                *end = (*end).max(last);
            }
            _ => spans.push((first, last)),
        }
    }
    spans
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

    /// For a refused `instant`: the earliest instant after it, not later than `limit`, that
    /// may be allowed (`None`: none is). A skipping calendar's run of days is passed whole.
    pub fn next_chance(&self, instant: Timestamp, limit: Timestamp) -> Option<Timestamp> {
        let mut chance = instant;
        for calendar in self.skip.iter().filter(|c| c.contains(instant)) {
            let (date, last) = (calendar.date_of(instant), calendar.date_of(limit));
            let free = calendar.first_free_after(date, last)?;
            chance = chance.max(calendar.start_of(free)?);
        }
        if !self.only.is_empty() && !self.only.iter().any(|c| c.contains(instant)) {
            let earliest = self
                .only
                .iter()
                .filter_map(|c| c.start_of(c.next_date_after(c.date_of(instant))?))
                .min()?;
            chance = chance.max(earliest);
        }
        (chance > instant && chance <= limit).then_some(chance)
    }

    /// For a refused `instant`: the latest instant before it, not earlier than `floor`,
    /// that may be allowed (`None`: none is). A skipping calendar's run of days is passed
    /// whole.
    pub fn previous_chance(&self, instant: Timestamp, floor: Timestamp) -> Option<Timestamp> {
        let just_before = |start: Timestamp| start.checked_sub(SignedDuration::from_nanos(1)).ok();
        let end_of = |calendar: &Calendar, date: Date| {
            just_before(calendar.start_of(date.checked_add(1.day()).ok()?)?)
        };
        let mut chance = instant;
        for calendar in self.skip.iter().filter(|c| c.contains(instant)) {
            let (date, first) = (calendar.date_of(instant), calendar.date_of(floor));
            let free = calendar.last_free_before(date, first)?;
            chance = chance.min(end_of(calendar, free)?);
        }
        if !self.only.is_empty() && !self.only.iter().any(|c| c.contains(instant)) {
            let latest = self
                .only
                .iter()
                .filter_map(|c| end_of(c, c.last_date_before(c.date_of(instant))?))
                .max()?;
            chance = chance.min(latest);
        }
        (chance < instant && chance >= floor).then_some(chance)
    }
}

#[cfg(test)]
mod tests;
