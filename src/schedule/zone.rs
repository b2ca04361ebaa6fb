//! IANA time zones from the tz database bundled into the binary (no system zoneinfo needed),
//! and the stretches of time between two offset changes that the DST policy works on.

use std::sync::OnceLock;

use jiff::Timestamp;
use jiff::tz::{TimeZone, TimeZoneDatabase};

use super::error::CronError;

/// A named IANA time zone.
#[derive(Debug, Clone)]
pub struct Zone {
    name: String,
    tz: TimeZone,
    /// The offset of a zone that never changes it (UTC, `Etc/GMT+5`): no lookups needed.
    constant_offset: Option<i64>,
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

fn database() -> &'static TimeZoneDatabase {
    static DB: OnceLock<TimeZoneDatabase> = OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}

impl Zone {
    /// Looks a zone up by its exact IANA name (case-sensitive, as Go's `LoadLocation`).
    /// `Local` and the empty name are refused: the zone never comes from the process.
    pub fn named(name: &str) -> Result<Zone, CronError> {
        if name.is_empty() || name == "Local" {
            return Err(CronError::UnknownZone {
                zone: name.to_owned(),
            });
        }
        let tz = database().get(name).map_err(|_| CronError::UnknownZone {
            zone: name.to_owned(),
        })?;
        if tz.iana_name() != Some(name) || tz.is_unknown() {
            return Err(CronError::UnknownZone {
                zone: name.to_owned(),
            });
        }
        Ok(Zone::new(name, tz))
    }

    fn new(name: &str, tz: TimeZone) -> Zone {
        let has_transitions = tz.following(Timestamp::MIN).next().is_some();
        let constant_offset =
            (!has_transitions).then(|| i64::from(tz.to_offset(Timestamp::UNIX_EPOCH).seconds()));
        Zone {
            name: name.to_owned(),
            tz,
            constant_offset,
        }
    }

    /// The IANA name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The jiff time zone, for formatting.
    pub fn time_zone(&self) -> &TimeZone {
        &self.tz
    }

    /// UTC offset in seconds at an instant (Unix seconds).
    pub fn offset_at(&self, instant: i64) -> i64 {
        if let Some(offset) = self.constant_offset {
            return offset;
        }
        i64::from(self.tz.to_offset(timestamp(instant)).seconds())
    }

    /// The stretch of constant offset that contains `instant`.
    pub fn segment_at(&self, instant: i64) -> Segment {
        self.segment_from(instant, i64::MAX)
    }

    /// The segment containing `instant`, looking up where it began only if that was less
    /// than `horizon` seconds before `instant` (otherwise `begin` is `None`). Callers that
    /// do not care about distant beginnings save two time-zone lookups.
    pub fn segment_from(&self, instant: i64, horizon: i64) -> Segment {
        if let Some(offset) = self.constant_offset {
            return Segment {
                begin: None,
                end: None,
                offset,
                previous_offset: offset,
            };
        }
        let offset = self.offset_at(instant);
        let end = self
            .tz
            .following(timestamp(instant))
            .next()
            .map(|t| t.timestamp().as_second());
        let mut segment = Segment {
            begin: None,
            end,
            offset,
            previous_offset: offset,
        };
        if horizon > 0 {
            // `preceding` yields transitions strictly before its argument.
            let begin = self
                .tz
                .preceding(timestamp(instant.saturating_add(1)))
                .next()
                .map(|t| t.timestamp().as_second())
                .filter(|b| instant - b < horizon);
            if let Some(b) = begin {
                segment.begin = Some(b);
                segment.previous_offset = self.offset_at(b - 1);
            }
        }
        segment
    }

    /// The segment right after `segment` (which must have an end).
    pub fn segment_after(&self, segment: &Segment) -> Option<Segment> {
        segment.end.map(|end| self.segment_at(end))
    }

    /// The segment right before `segment` (which must have a beginning).
    pub fn segment_before(&self, segment: &Segment) -> Option<Segment> {
        segment.begin.map(|begin| self.segment_at(begin - 1))
    }
}

/// Instants `[begin, end)` during which a zone keeps one UTC offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// First instant (Unix seconds); `None` when no transition precedes it (or, from
    /// [`Zone::segment_from`], when it began too long ago to matter).
    pub begin: Option<i64>,
    /// First instant after the segment; `None` when no transition follows.
    pub end: Option<i64>,
    /// Offset in seconds during the segment.
    pub offset: i64,
    /// Offset in seconds just before `begin` (equal to `offset` without a `begin`).
    pub previous_offset: i64,
}

impl Segment {
    /// Whether the segment starts by skipping wall-clock time (spring forward).
    pub fn starts_after_gap(&self) -> bool {
        self.offset > self.previous_offset
    }

    /// Whether the segment starts by repeating wall-clock time (fall back).
    pub fn starts_with_repeat(&self) -> bool {
        self.offset < self.previous_offset
    }
}

/// Unix seconds to a jiff timestamp, clamped to jiff's range.
pub fn timestamp(seconds: i64) -> Timestamp {
    let clamped = seconds.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    Timestamp::from_second(clamped).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_iana_names_resolve_without_system_zoneinfo() {
        for name in [
            "UTC",
            "Asia/Shanghai",
            "America/New_York",
            "Australia/Lord_Howe",
        ] {
            assert_eq!(Zone::named(name).unwrap().name(), name);
        }
    }

    #[test]
    fn wrong_case_local_and_unknown_names_are_refused() {
        for name in [
            "asia/shanghai",
            "Local",
            "",
            "Mars/Olympus",
            "Etc/Unknown",
            "../UTC",
        ] {
            let error = Zone::named(name).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("unknown time zone `{name}` (expected an IANA name such as Asia/Shanghai)")
            );
        }
    }

    #[test]
    fn segments_tell_gaps_from_repeats() {
        let ny = Zone::named("America/New_York").unwrap();
        // 2026-03-08T07:00:00Z is 03:00 EDT, right after the spring-forward gap.
        let spring = ny.segment_at(1_772_953_200);
        assert_eq!(spring.begin, Some(1_772_953_200));
        assert!(spring.starts_after_gap());
        assert_eq!((spring.previous_offset, spring.offset), (-18_000, -14_400));
        let fall = ny.segment_after(&spring).unwrap();
        assert!(fall.starts_with_repeat());
        assert_eq!(ny.segment_before(&fall), Some(spring));
        let utc = Zone::named("UTC").unwrap().segment_at(0);
        assert_eq!((utc.begin, utc.end), (None, None));
        let fixed = Zone::named("Etc/GMT+5").unwrap();
        assert_eq!(fixed.segment_at(0).offset, -18_000);
        assert_eq!(fixed.offset_at(2_000_000_000), -18_000);
    }
}
