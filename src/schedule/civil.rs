//! Wall-clock ("civil") date-times as plain numbers, and the search for the nearest civil
//! time that a set of cron fields matches. No time zone here: `zone.rs` maps civil times to
//! instants.

use super::bits::FieldBits;

/// Seconds in a day.
pub const DAY: i64 = 86_400;

/// A civil date-time broken into fields (proleptic Gregorian, second precision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Civil {
    /// Year.
    pub year: i32,
    /// Month, 1–12.
    pub month: u32,
    /// Day of month, 1–31.
    pub day: u32,
    /// Hour, 0–23.
    pub hour: u32,
    /// Minute, 0–59.
    pub minute: u32,
    /// Second, 0–59.
    pub second: u32,
}

impl Civil {
    /// The civil time `seconds` after 1970-01-01T00:00:00 (negative before).
    pub fn from_seconds(seconds: i64) -> Civil {
        let days = seconds.div_euclid(DAY);
        let secs = seconds.rem_euclid(DAY) as u32;
        let (year, month, day) = date_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
        }
    }

    /// Seconds since 1970-01-01T00:00:00 of this civil time.
    pub fn to_seconds(self) -> i64 {
        days_from_date(self.year, self.month, self.day) * DAY
            + i64::from(self.hour * 3600 + self.minute * 60 + self.second)
    }

    fn date(year: i32, month: u32, day: u32) -> Civil {
        Civil {
            year,
            month,
            day,
            hour: 0,
            minute: 0,
            second: 0,
        }
    }

    fn next_month(self) -> Civil {
        if self.month == 12 {
            Civil::date(self.year + 1, 1, 1)
        } else {
            Civil::date(self.year, self.month + 1, 1)
        }
    }

    fn next_day(self) -> Civil {
        if self.day >= days_in_month(self.year, self.month) {
            self.next_month()
        } else {
            Civil::date(self.year, self.month, self.day + 1)
        }
    }

    fn next_hour(self) -> Civil {
        if self.hour == 23 {
            self.next_day()
        } else {
            Civil {
                hour: self.hour + 1,
                minute: 0,
                second: 0,
                ..self
            }
        }
    }

    fn next_minute(self) -> Civil {
        if self.minute == 59 {
            self.next_hour()
        } else {
            Civil {
                minute: self.minute + 1,
                second: 0,
                ..self
            }
        }
    }

    fn end_of_day(year: i32, month: u32, day: u32) -> Civil {
        Civil {
            year,
            month,
            day,
            hour: 23,
            minute: 59,
            second: 59,
        }
    }

    fn prev_month(self) -> Civil {
        let (year, month) = if self.month == 1 {
            (self.year - 1, 12)
        } else {
            (self.year, self.month - 1)
        };
        Civil::end_of_day(year, month, days_in_month(year, month))
    }

    fn prev_day(self) -> Civil {
        if self.day == 1 {
            self.prev_month()
        } else {
            Civil::end_of_day(self.year, self.month, self.day - 1)
        }
    }

    fn prev_hour(self) -> Civil {
        if self.hour == 0 {
            self.prev_day()
        } else {
            Civil {
                hour: self.hour - 1,
                minute: 59,
                second: 59,
                ..self
            }
        }
    }

    fn prev_minute(self) -> Civil {
        if self.minute == 0 {
            self.prev_hour()
        } else {
            Civil {
                minute: self.minute - 1,
                second: 59,
                ..self
            }
        }
    }
}

/// Whether `year` is a Gregorian leap year.
pub fn is_leap(year: i32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days in a month of a year.
pub fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a date (H. Hinnant's `days_from_civil`).
pub fn days_from_date(year: i32, month: u32, day: u32) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(month) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` after 1970-01-01 (H. Hinnant's `civil_from_days`).
pub fn date_from_days(days: i64) -> (i32, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year as i32, month, day)
}

/// Day of the week, 0 = Sunday.
pub fn weekday(year: i32, month: u32, day: u32) -> u32 {
    (days_from_date(year, month, day) + 4).rem_euclid(7) as u32
}

/// The six fields of a cron expression, and the civil-time search over them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    /// Seconds.
    pub second: FieldBits,
    /// Minutes.
    pub minute: FieldBits,
    /// Hours.
    pub hour: FieldBits,
    /// Days of the month.
    pub day_of_month: FieldBits,
    /// Months.
    pub month: FieldBits,
    /// Days of the week.
    pub day_of_week: FieldBits,
}

impl Pattern {
    /// robfig's day rule: if either day field is `*`/`?` both must match, otherwise either.
    #[inline]
    fn day_matches(&self, day: u32, weekday: u32) -> bool {
        let dom = self.day_of_month.contains(day);
        let dow = self.day_of_week.contains(weekday);
        if self.day_of_month.star || self.day_of_week.star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// Whether every day matches (both day fields `*`/`?`): the weekday need not be known.
    #[inline]
    fn matches_every_day(&self) -> bool {
        self.day_of_month.star && self.day_of_week.star
    }

    /// Whether the time of day is fixed (no `*`, `?` or step in second, minute or hour):
    /// such times follow the "fixed wall-clock time" DST policy.
    pub fn has_fixed_time_of_day(&self) -> bool {
        !(self.second.wildcard || self.minute.wildcard || self.hour.wildcard)
    }

    /// Whether the pattern matches some date at all (day-of-month checked on a leap year).
    pub fn matches_some_date(&self) -> bool {
        let some_day_of_month = (1..=12).any(|month| {
            self.month.contains(month)
                && self
                    .day_of_month
                    .first_at_or_after(1)
                    .is_some_and(|day| day <= days_in_month(2000, month))
        });
        // Every month has every weekday.
        let some_weekday = self.day_of_week.bits != 0;
        if self.day_of_month.star || self.day_of_week.star {
            some_day_of_month && some_weekday
        } else {
            some_day_of_month || some_weekday
        }
    }

    /// The smallest matching civil time `>= from`, searching no further than `last_year`.
    pub fn next_match(&self, from: Civil, last_year: i32) -> Option<Civil> {
        let mut c = from;
        loop {
            if c.year > last_year {
                return None;
            }
            match self.month.first_at_or_after(c.month) {
                None => {
                    c = Civil::date(c.year + 1, 1, 1);
                    continue;
                }
                Some(month) if month != c.month => c = Civil::date(c.year, month, 1),
                Some(_) => {}
            }
            if !self.matches_every_day() {
                let last_day = days_in_month(c.year, c.month);
                let mut day = c.day;
                let mut wd = weekday(c.year, c.month, day);
                while day <= last_day && !self.day_matches(day, wd) {
                    day += 1;
                    wd = (wd + 1) % 7;
                }
                if day > last_day {
                    c = c.next_month();
                    continue;
                }
                if day != c.day {
                    c = Civil::date(c.year, c.month, day);
                }
            }
            match self.hour.first_at_or_after(c.hour) {
                None => {
                    c = c.next_day();
                    continue;
                }
                Some(hour) if hour != c.hour => {
                    c.hour = hour;
                    c.minute = 0;
                    c.second = 0;
                }
                Some(_) => {}
            }
            match self.minute.first_at_or_after(c.minute) {
                None => {
                    c = c.next_hour();
                    continue;
                }
                Some(minute) if minute != c.minute => {
                    c.minute = minute;
                    c.second = 0;
                }
                Some(_) => {}
            }
            match self.second.first_at_or_after(c.second) {
                None => c = c.next_minute(),
                Some(second) => {
                    c.second = second;
                    return Some(c);
                }
            }
        }
    }

    /// The largest matching civil time `<= from`, searching no further back than `first_year`.
    pub fn prev_match(&self, from: Civil, first_year: i32) -> Option<Civil> {
        let mut c = from;
        loop {
            if c.year < first_year {
                return None;
            }
            match self.month.last_at_or_before(c.month) {
                None => {
                    c = Civil::end_of_day(c.year - 1, 12, 31);
                    continue;
                }
                Some(month) if month != c.month => {
                    c = Civil::end_of_day(c.year, month, days_in_month(c.year, month));
                }
                Some(_) => {}
            }
            if !self.matches_every_day() {
                let mut day = c.day;
                let mut wd = weekday(c.year, c.month, day);
                while day >= 1 && !self.day_matches(day, wd) {
                    day -= 1;
                    wd = (wd + 6) % 7;
                }
                if day == 0 {
                    c = c.prev_month();
                    continue;
                }
                if day != c.day {
                    c = Civil::end_of_day(c.year, c.month, day);
                }
            }
            match self.hour.last_at_or_before(c.hour) {
                None => {
                    c = c.prev_day();
                    continue;
                }
                Some(hour) if hour != c.hour => {
                    c.hour = hour;
                    c.minute = 59;
                    c.second = 59;
                }
                Some(_) => {}
            }
            match self.minute.last_at_or_before(c.minute) {
                None => {
                    c = c.prev_hour();
                    continue;
                }
                Some(minute) if minute != c.minute => {
                    c.minute = minute;
                    c.second = 59;
                }
                Some(_) => {}
            }
            match self.second.last_at_or_before(c.second) {
                None => c = c.prev_minute(),
                Some(second) => {
                    c.second = second;
                    return Some(c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::field::Field;

    fn pattern(fields: &str) -> Pattern {
        let parts: Vec<&str> = fields.split(' ').collect();
        let f = |i: usize| FieldBits::parse(Field::ALL[i], parts[i]).unwrap();
        Pattern {
            second: f(0),
            minute: f(1),
            hour: f(2),
            day_of_month: f(3),
            month: f(4),
            day_of_week: f(5),
        }
    }

    fn civil(text: &str) -> Civil {
        let n: Vec<u32> = text
            .split(|c: char| !c.is_ascii_digit())
            .map(|p| p.parse().unwrap())
            .collect();
        Civil {
            year: n[0] as i32,
            month: n[1],
            day: n[2],
            hour: n[3],
            minute: n[4],
            second: n[5],
        }
    }

    #[test]
    fn seconds_round_trip_through_civil_fields() {
        for seconds in [
            0,
            -1,
            951_782_400,
            4_107_542_399,
            -62_135_596_800,
            253_402_300_799,
        ] {
            assert_eq!(Civil::from_seconds(seconds).to_seconds(), seconds);
        }
        assert_eq!(
            Civil::from_seconds(951_782_400),
            civil("2000-02-29 00:00:00")
        );
    }

    #[test]
    fn weekdays_and_leap_years_are_right() {
        assert_eq!(weekday(1970, 1, 1), 4);
        assert_eq!(weekday(2026, 11, 29), 0);
        assert_eq!(weekday(2000, 2, 29), 2);
        assert!(is_leap(2000) && is_leap(2028) && !is_leap(2100) && !is_leap(2026));
        assert_eq!(days_in_month(2100, 2), 28);
    }

    #[test]
    fn next_match_walks_fields_like_robfig() {
        let cases = [
            ("0 0 8 * * *", "2026-01-01 08:00:00", "2026-01-01 08:00:00"),
            ("0 0 8 * * *", "2026-01-01 08:00:01", "2026-01-02 08:00:00"),
            (
                "0 30 9 31 * *",
                "2026-02-01 00:00:00",
                "2026-03-31 09:30:00",
            ),
            ("0 0 0 29 2 *", "2026-03-01 00:00:00", "2028-02-29 00:00:00"),
            (
                "59 59 23 31 12 *",
                "2026-06-01 00:00:00",
                "2026-12-31 23:59:59",
            ),
            (
                "0 0 12 * * MON-FRI",
                "2026-11-28 13:00:00",
                "2026-11-30 12:00:00",
            ),
            (
                "0 0 0 1 * MON",
                "2026-11-03 00:00:00",
                "2026-11-09 00:00:00",
            ),
        ];
        for (expr, from, want) in cases {
            let got = pattern(expr).next_match(civil(from), 2100);
            assert_eq!(got, Some(civil(want)), "{expr} from {from}");
        }
    }

    #[test]
    fn prev_match_is_the_mirror_of_next_match() {
        let cases = [
            ("0 0 8 * * *", "2026-01-02 07:59:59", "2026-01-01 08:00:00"),
            ("0 0 8 * * *", "2026-01-02 08:00:00", "2026-01-02 08:00:00"),
            (
                "0 30 9 31 * *",
                "2026-04-15 00:00:00",
                "2026-03-31 09:30:00",
            ),
            ("0 0 0 29 2 *", "2027-01-01 00:00:00", "2024-02-29 00:00:00"),
            ("0 0 0 1 1 *", "2026-01-01 00:00:00", "2026-01-01 00:00:00"),
            (
                "*/15 * * * * *",
                "2026-01-01 00:00:14",
                "2026-01-01 00:00:00",
            ),
        ];
        for (expr, from, want) in cases {
            let got = pattern(expr).prev_match(civil(from), 2000);
            assert_eq!(got, Some(civil(want)), "{expr} from {from}");
        }
    }

    #[test]
    fn searches_stop_at_their_year_bound() {
        let p = pattern("0 0 0 29 2 *");
        assert_eq!(p.next_match(civil("2029-03-01 00:00:00"), 2031), None);
        assert_eq!(p.prev_match(civil("2027-03-01 00:00:00"), 2025), None);
    }

    #[test]
    fn impossible_dates_are_detected() {
        assert!(!pattern("0 0 0 30 2 *").matches_some_date());
        assert!(!pattern("0 0 0 31 4,6,9,11 *").matches_some_date());
        assert!(pattern("0 0 0 29 2 *").matches_some_date());
        assert!(pattern("0 0 0 30 2 MON").matches_some_date());
        assert!(pattern("0 0 0 31 * *").matches_some_date());
        assert!(pattern("0 0 0 , * MON").matches_some_date());
        assert!(!pattern("0 0 0 , * *").matches_some_date());
        assert!(!pattern("0 0 0 * * ,").matches_some_date());
    }
}
