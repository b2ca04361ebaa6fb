//! When a cron expression fires: the next instant after a given one, the latest at or
//! before one, and all instants in an interval — with the DST policy of docs/design.md §3:
//!
//! * a fixed wall-clock time inside a spring-forward gap fires at the first instant after
//!   the gap, that day;
//! * a fixed wall-clock time that occurs twice fires once, at its first occurrence;
//! * times with wildcards or steps fire at every real matching instant (both passes of a
//!   repeated hour, none in a gap);
//!
//! and robfig/cron v3's results everywhere else (including its five-year search horizon).

use jiff::Timestamp;

use super::civil::{Civil, DAY, Pattern};
use super::expression::{Cron, Kind};
use super::zone::{Segment, Zone};

/// How far ahead `next_after` searches, in years (robfig's limit).
const SEARCH_YEARS: i32 = 5;

impl Cron {
    /// The first fire instant strictly after `after`, or `None` if there is none within
    /// five years. Always a whole second, never earlier than or equal to `after`.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let start = floor_seconds(after).checked_add(1)?;
        let fire = match self.kind {
            Kind::Every { period, anchor } => every_at_or_after(start, anchor, period)?,
            Kind::Pattern(pattern) => PatternInZone::new(&pattern, &self.zone).next(start)?,
        };
        Timestamp::from_second(fire).ok()
    }

    /// The latest fire instant at or before `at` and not before `not_before`.
    pub fn latest_at_or_before(&self, at: Timestamp, not_before: Timestamp) -> Option<Timestamp> {
        let end = floor_seconds(at);
        let floor = floor_seconds(not_before) + i64::from(not_before.subsec_nanosecond() > 0);
        let fire = match self.kind {
            Kind::Every { period, anchor } => {
                anchor.checked_add((end - anchor).div_euclid(period).checked_mul(period)?)?
            }
            Kind::Pattern(pattern) => PatternInZone::new(&pattern, &self.zone).prev(end, floor)?,
        };
        (fire >= floor).then(|| Timestamp::from_second(fire).ok())?
    }

    /// Fire instants in `(after, until]`, in order, at most `cap` of them.
    pub fn fires_between(&self, after: Timestamp, until: Timestamp, cap: usize) -> Vec<Timestamp> {
        let mut fires = Vec::new();
        let mut cursor = after;
        while fires.len() < cap {
            match self.next_after(cursor) {
                Some(fire) if fire <= until => {
                    fires.push(fire);
                    cursor = fire;
                }
                _ => break,
            }
        }
        fires
    }
}

/// The smallest instant `anchor + k × period >= start`.
fn every_at_or_after(start: i64, anchor: i64, period: i64) -> Option<i64> {
    let steps = (start.checked_sub(anchor)?.checked_add(period - 1)?).div_euclid(period);
    anchor.checked_add(steps.checked_mul(period)?)
}

/// Whole Unix seconds at or before `t`.
fn floor_seconds(t: Timestamp) -> i64 {
    t.as_second() - i64::from(t.subsec_nanosecond() < 0)
}

/// A wall-clock pattern evaluated in a zone, one constant-offset segment at a time.
struct PatternInZone<'a> {
    pattern: &'a Pattern,
    zone: &'a Zone,
    fixed: bool,
}

impl<'a> PatternInZone<'a> {
    fn new(pattern: &'a Pattern, zone: &'a Zone) -> PatternInZone<'a> {
        PatternInZone {
            pattern,
            zone,
            fixed: pattern.has_fixed_time_of_day(),
        }
    }

    /// Whether a fixed time falls into the wall-clock gap skipped at the segment's start;
    /// it then fires at the segment's first instant.
    fn fires_at_gap_end(&self, segment: &Segment) -> bool {
        let Some(begin) = segment.begin else {
            return false;
        };
        if !(self.fixed && segment.starts_after_gap()) {
            return false;
        }
        let gap_start = begin + segment.previous_offset;
        let gap_end = begin + segment.offset;
        let gap = Civil::from_seconds(gap_start);
        self.pattern
            .next_match(gap, gap.year + 1)
            .is_some_and(|c| c.to_seconds() < gap_end)
    }

    /// The earliest wall-clock time this segment may fire at: with a fixed time of day,
    /// the repeated wall-clock times after a fall-back fired already, in the previous
    /// segment.
    fn first_own_wall_time(&self, segment: &Segment) -> Option<i64> {
        let begin = segment.begin?;
        Some(if self.fixed && segment.starts_with_repeat() {
            begin + segment.previous_offset
        } else {
            begin + segment.offset
        })
    }

    /// First fire at or after `start` (Unix seconds).
    fn next(&self, start: i64) -> Option<i64> {
        let last_year = Civil::from_seconds(start + self.zone.offset_at(start)).year + SEARCH_YEARS;
        // Where the segment began matters only to a fixed time of day, and only within a
        // day of that transition (gap push at its first instant, repeated wall times).
        let horizon = if self.fixed { DAY } else { 0 };
        let mut segment = self.zone.segment_from(start, horizon);
        let mut from = start;
        loop {
            if segment.begin.is_some_and(|b| b >= from) && self.fires_at_gap_end(&segment) {
                return segment.begin;
            }
            let mut wall = from + segment.offset;
            if let Some(own) = self.first_own_wall_time(&segment) {
                wall = wall.max(own);
            }
            let found = self
                .pattern
                .next_match(Civil::from_seconds(wall), last_year)?
                .to_seconds()
                - segment.offset;
            if segment.end.is_none_or(|end| found < end) {
                return Some(found);
            }
            from = segment.end?;
            segment = self.zone.segment_after(&segment)?;
        }
    }

    /// Last fire at or before `end` and at or after `floor` (Unix seconds).
    fn prev(&self, end: i64, floor: i64) -> Option<i64> {
        let first_year = Civil::from_seconds(floor + self.zone.offset_at(floor)).year - 1;
        let mut segment = self.zone.segment_at(end);
        let mut to = end;
        loop {
            let lowest_wall = self
                .first_own_wall_time(&segment)
                .unwrap_or(i64::MIN)
                .max(floor + segment.offset);
            if let Some(c) = self
                .pattern
                .prev_match(Civil::from_seconds(to + segment.offset), first_year)
            {
                let wall = c.to_seconds();
                if wall >= lowest_wall {
                    return Some(wall - segment.offset);
                }
            }
            let begin = segment.begin?;
            if begin < floor {
                return None;
            }
            if self.fires_at_gap_end(&segment) {
                return Some(begin);
            }
            to = begin - 1;
            segment = self.zone.segment_before(&segment)?;
        }
    }
}

#[cfg(test)]
mod tests;
