//! One cron field parsed into a bit set, with robfig/cron v3's exact grammar: `*`, `?`,
//! `a`, `a-b`, `*/n`, `a-b/n`, `a/n` (= `a-max/n`), lists, names.

use super::error::CronError;
use super::field::Field;

/// The values one field matches, as a bit set (bit `n` set = value `n` matches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldBits {
    /// Matching values.
    pub bits: u64,
    /// Set when the field was written as `*` or `?` (or `*/1`): it then takes part in the
    /// "both day fields must match" rule, exactly as robfig's `starBit`.
    pub star: bool,
    /// Set when the field uses `*`, `?` or a step, i.e. it is not a list of fixed values.
    pub wildcard: bool,
}

impl FieldBits {
    /// All values of the field, as robfig's `all()` (star set).
    pub fn all(field: Field) -> FieldBits {
        let (min, max) = field.bounds();
        FieldBits {
            bits: bit_range(min, max, 1),
            star: true,
            wildcard: true,
        }
    }

    /// A single value, as descriptors use.
    pub fn single(value: u32) -> FieldBits {
        FieldBits {
            bits: 1 << value,
            star: false,
            wildcard: false,
        }
    }

    /// Parses one field: comma-separated items, empty items ignored (as robfig does).
    pub fn parse(field: Field, text: &str) -> Result<FieldBits, CronError> {
        let mut out = FieldBits {
            bits: 0,
            star: false,
            wildcard: false,
        };
        for item in text.split(',').filter(|item| !item.is_empty()) {
            let parsed = parse_item(field, item)?;
            out.bits |= parsed.bits;
            out.star |= parsed.star;
            out.wildcard |= parsed.wildcard;
        }
        // robfig accepts an empty list anywhere. In a day field it is meaningful (with the
        // other day field restricted, "either may match" leaves that one in charge); in the
        // others it can never fire, so it is refused here with a precise message.
        let day_field = matches!(field, Field::DayOfMonth | Field::DayOfWeek);
        if out.bits == 0 && !day_field {
            return Err(CronError::EmptyField {
                field,
                text: text.to_owned(),
            });
        }
        Ok(out)
    }

    /// Whether `value` is in the set.
    #[inline]
    pub fn contains(&self, value: u32) -> bool {
        self.bits & (1 << value) != 0
    }

    /// The smallest value `>= from` in the set.
    #[inline]
    pub fn first_at_or_after(&self, from: u32) -> Option<u32> {
        if from > 63 {
            return None;
        }
        let rest = self.bits >> from;
        (rest != 0).then(|| from + rest.trailing_zeros())
    }

    /// The largest value `<= upto` in the set.
    #[inline]
    pub fn last_at_or_before(&self, upto: u32) -> Option<u32> {
        let mask = if upto >= 63 {
            u64::MAX
        } else {
            (1u64 << (upto + 1)) - 1
        };
        let rest = self.bits & mask;
        (rest != 0).then(|| 63 - rest.leading_zeros())
    }
}

fn bit_range(start: u32, end: u32, step: u32) -> u64 {
    let mut bits = 0u64;
    let mut value = start;
    while value <= end {
        bits |= 1 << value;
        value = match value.checked_add(step) {
            Some(next) => next,
            None => break,
        };
    }
    bits
}

/// One list item: robfig's `getRange`, including its quirks (`*-5` means `*`, `+5` is 5).
fn parse_item(field: Field, item: &str) -> Result<FieldBits, CronError> {
    let (min, max) = field.bounds();
    let mut range_and_step = item.split('/');
    let range = range_and_step.next().unwrap_or_default();
    let step_text = range_and_step.next();
    if range_and_step.next().is_some() {
        return Err(CronError::Syntax {
            field,
            item: item.to_owned(),
            problem: "too many slashes",
        });
    }
    let bounds: Vec<&str> = range.split('-').collect();
    let single = bounds.len() == 1;
    let (start, mut end, mut star, wildcard_range) = if bounds[0] == "*" || bounds[0] == "?" {
        (u64::from(min), u64::from(max), true, true)
    } else {
        let start = parse_value(field, bounds[0], item)?;
        let end = match bounds.len() {
            1 => start,
            2 => parse_value(field, bounds[1], item)?,
            _ => {
                return Err(CronError::Syntax {
                    field,
                    item: item.to_owned(),
                    problem: "too many hyphens",
                });
            }
        };
        (start, end, false, false)
    };
    let mut step = 1u64;
    if let Some(step_text) = step_text {
        step = parse_number(step_text).ok_or_else(|| CronError::Number {
            field,
            item: item.to_owned(),
            token: step_text.to_owned(),
        })?;
        if single {
            end = u64::from(max);
        }
        if step > 1 {
            star = false;
        }
    }
    let below = start < u64::from(min);
    if below || end > u64::from(max) {
        return Err(CronError::OutOfRange {
            field,
            item: item.to_owned(),
            value: if below { start } else { end },
            min,
            max,
        });
    }
    if start > end {
        return Err(CronError::RangeReversed {
            field,
            item: item.to_owned(),
            start,
            end,
        });
    }
    if step == 0 {
        return Err(CronError::ZeroStep {
            field,
            item: item.to_owned(),
        });
    }
    // Bounds were checked above, so the narrowing is exact.
    let step = u32::try_from(step).unwrap_or(u32::MAX);
    Ok(FieldBits {
        bits: bit_range(start as u32, end as u32, step),
        star,
        wildcard: wildcard_range || step_text.is_some(),
    })
}

/// A value: a case-insensitive name (months, weekdays) or a number.
fn parse_value(field: Field, token: &str, item: &str) -> Result<u64, CronError> {
    let lower = token.to_ascii_lowercase();
    if let Some(index) = field
        .names()
        .iter()
        .position(|name| !name.is_empty() && *name == lower)
    {
        return Ok(index as u64);
    }
    parse_number(token).ok_or_else(|| {
        if is_quartz_extension(token) {
            CronError::Unsupported {
                field,
                item: item.to_owned(),
            }
        } else {
            CronError::Number {
                field,
                item: item.to_owned(),
                token: token.to_owned(),
            }
        }
    })
}

/// Go's `strconv.Atoi` restricted to non-negative results: `[+-]?[0-9]+`, no overflow.
fn parse_number(token: &str) -> Option<u64> {
    let digits = token
        .strip_prefix('+')
        .or_else(|| token.strip_prefix('-'))
        .unwrap_or(token);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = token.strip_prefix('+').unwrap_or(token).parse().ok()?;
    u64::try_from(value).ok()
}

/// Quartz-style `L`, `W`, `LW`, `nL`, `nW` and `n#k`, which robfig rejects.
fn is_quartz_extension(token: &str) -> bool {
    let upper = token.to_ascii_uppercase();
    let digits_then = |suffix: &str| {
        upper
            .strip_suffix(suffix)
            .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit()))
    };
    upper.contains('#') || digits_then("L") || digits_then("W") || upper == "LW"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(field: Field, text: &str) -> u64 {
        FieldBits::parse(field, text).unwrap().bits
    }

    fn values(field: Field, text: &str) -> Vec<u32> {
        let b = bits(field, text);
        (0..64).filter(|v| b & (1 << v) != 0).collect()
    }

    #[test]
    fn every_construct_parses_to_its_values() {
        let cases: &[(Field, &str, &[u32])] = &[
            (Field::Second, "*", &[]),
            (Field::Minute, "5", &[5]),
            (Field::Minute, "5-8", &[5, 6, 7, 8]),
            (Field::Minute, "5/15", &[5, 20, 35, 50]),
            (Field::Minute, "10-20/5", &[10, 15, 20]),
            (Field::Hour, "*/6", &[0, 6, 12, 18]),
            (Field::Hour, "1,3,,5", &[1, 3, 5]),
            (Field::Month, "jan,MAR-may", &[1, 3, 4, 5]),
            (Field::DayOfWeek, "MON-FRI", &[1, 2, 3, 4, 5]),
            (Field::DayOfWeek, "sun", &[0]),
            (Field::DayOfMonth, "+5", &[5]),
            (Field::DayOfMonth, "05", &[5]),
            (Field::Hour, "*-5", &[]),
        ];
        for (field, text, expected) in cases {
            if expected.is_empty() {
                let all = FieldBits::all(*field).bits;
                assert_eq!(bits(*field, text), all, "{field} {text}");
            } else {
                assert_eq!(values(*field, text), *expected, "{field} {text}");
            }
        }
    }

    #[test]
    fn star_flag_follows_robfig() {
        assert!(FieldBits::parse(Field::DayOfMonth, "*").unwrap().star);
        assert!(FieldBits::parse(Field::DayOfMonth, "?").unwrap().star);
        assert!(FieldBits::parse(Field::DayOfMonth, "*/1").unwrap().star);
        assert!(!FieldBits::parse(Field::DayOfMonth, "*/2").unwrap().star);
        assert!(!FieldBits::parse(Field::DayOfMonth, "1-31").unwrap().star);
    }

    #[test]
    fn wildcard_flag_marks_stars_and_steps_only() {
        assert!(FieldBits::parse(Field::Hour, "*").unwrap().wildcard);
        assert!(FieldBits::parse(Field::Hour, "2/3").unwrap().wildcard);
        assert!(!FieldBits::parse(Field::Hour, "2,3").unwrap().wildcard);
        assert!(!FieldBits::parse(Field::Hour, "2-4").unwrap().wildcard);
    }

    #[test]
    fn every_error_names_the_field_and_the_problem() {
        let cases: &[(Field, &str, &str)] = &[
            (
                Field::Second,
                "60",
                "second: 60 in `60` is out of range 0-59",
            ),
            (
                Field::DayOfMonth,
                "0",
                "day-of-month: 0 in `0` is out of range 1-31",
            ),
            (
                Field::DayOfWeek,
                "7",
                "day-of-week: 7 in `7` is out of range 0-6",
            ),
            (
                Field::Minute,
                "*/0",
                "minute: step 0 in `*/0`: a step must be at least 1",
            ),
            (
                Field::Hour,
                "5-3",
                "hour: range `5-3` starts after it ends (5 > 3)",
            ),
            (Field::Hour, "1-2-3", "hour: `1-2-3` has too many hyphens"),
            (Field::Hour, "1/2/3", "hour: `1/2/3` has too many slashes"),
            (
                Field::Month,
                "foo",
                "month: `foo` in `foo` is not a number or a name",
            ),
            (
                Field::DayOfMonth,
                "L",
                "day-of-month: `L` uses L, W or # (not supported)",
            ),
            (
                Field::DayOfMonth,
                "15W",
                "day-of-month: `15W` uses L, W or # (not supported)",
            ),
            (
                Field::DayOfWeek,
                "5#3",
                "day-of-week: `5#3` uses L, W or # (not supported)",
            ),
            (Field::Minute, ",", "minute: `,` lists no value"),
            (Field::Month, ",,", "month: `,,` lists no value"),
            (
                Field::Minute,
                "*/-1",
                "minute: `-1` in `*/-1` is not a number or a name",
            ),
        ];
        for (field, text, message) in cases {
            let error = FieldBits::parse(*field, text).unwrap_err();
            assert_eq!(error.to_string(), *message, "{field} {text}");
        }
    }

    #[test]
    fn nearest_values_are_found_both_ways() {
        let set = FieldBits::parse(Field::Minute, "5,20,59").unwrap();
        assert_eq!(set.first_at_or_after(0), Some(5));
        assert_eq!(set.first_at_or_after(21), Some(59));
        assert_eq!(set.last_at_or_before(19), Some(5));
        assert_eq!(set.last_at_or_before(4), None);
        assert_eq!(set.last_at_or_before(63), Some(59));
        assert_eq!(set.first_at_or_after(60), None);
    }
}
