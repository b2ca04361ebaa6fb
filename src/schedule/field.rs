//! The six cron fields (`second` … `day-of-week`): their bounds and names.

use std::fmt;

/// Which of the six fields a value belongs to; names the field in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// Seconds, 0–59.
    Second,
    /// Minutes, 0–59.
    Minute,
    /// Hours, 0–23.
    Hour,
    /// Day of the month, 1–31.
    DayOfMonth,
    /// Month, 1–12 or `JAN`–`DEC`.
    Month,
    /// Day of the week, 0–6 (0 = Sunday) or `SUN`–`SAT`.
    DayOfWeek,
}

impl Field {
    /// The six fields in expression order.
    pub const ALL: [Field; 6] = [
        Field::Second,
        Field::Minute,
        Field::Hour,
        Field::DayOfMonth,
        Field::Month,
        Field::DayOfWeek,
    ];

    /// Smallest and largest value the field accepts.
    pub const fn bounds(self) -> (u32, u32) {
        match self {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (0, 6),
        }
    }

    pub(super) fn names(self) -> &'static [&'static str] {
        const MONTHS: [&str; 13] = [
            "", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ];
        const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
        match self {
            Field::Month => &MONTHS,
            Field::DayOfWeek => &DAYS,
            _ => &[],
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        })
    }
}
