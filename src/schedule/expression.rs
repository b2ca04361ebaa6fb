//! Parsing a whole cron expression: the optional `CRON_TZ=`/`TZ=` prefix, descriptors
//! (`@daily`, `@every 90s`, …) and the six fields, with robfig/cron v3's grammar.

use super::bits::FieldBits;
use super::civil::Pattern;
use super::duration::parse_go_duration;
use super::error::CronError;
use super::field::Field;
use super::zone::Zone;

/// A parsed, validated cron expression bound to a time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    pub(super) source: String,
    pub(super) zone: Zone,
    pub(super) kind: Kind,
}

/// What the expression describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Wall-clock fields evaluated in the zone.
    Pattern(Pattern),
    /// `@every`: instants `anchor + k × period`, independent of any zone.
    Every {
        /// Whole seconds, at least 1.
        period: i64,
        /// Unix seconds of one instant of the lattice.
        anchor: i64,
    },
}

const NANOS_PER_SECOND: i64 = 1_000_000_000;

impl Cron {
    /// Parses `expression`. The zone comes from its `CRON_TZ=`/`TZ=` prefix or from
    /// `time_zone` — exactly one of them; neither or both is an error.
    pub fn parse(expression: &str, time_zone: Option<&str>) -> Result<Cron, CronError> {
        let (prefix_zone, body) = split_zone_prefix(expression)?;
        let zone = match (prefix_zone, time_zone) {
            (Some(prefix), Some(field)) => {
                return Err(CronError::ZoneGivenTwice {
                    prefix: prefix.to_owned(),
                    field: field.to_owned(),
                });
            }
            (Some(name), None) | (None, Some(name)) => Zone::named(name)?,
            (None, None) => return Err(CronError::MissingZone),
        };
        let kind = if body.starts_with('@') {
            parse_descriptor(body)?
        } else {
            Kind::Pattern(parse_fields(body)?)
        };
        if let Kind::Pattern(pattern) = &kind
            && !pattern.matches_some_date()
        {
            return Err(CronError::NeverFires {
                expression: expression.to_owned(),
            });
        }
        Ok(Cron {
            source: expression.to_owned(),
            zone,
            kind,
        })
    }

    /// Places the `@every` lattice so that `anchor` (Unix seconds, e.g. the owning object's
    /// creation) is one of its instants; no effect on other expressions. Default: the epoch.
    #[must_use]
    pub fn anchored_at(mut self, anchor_seconds: i64) -> Cron {
        if let Kind::Every { anchor, .. } = &mut self.kind {
            *anchor = anchor_seconds;
        }
        self
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The zone the expression is evaluated in.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// Whether fixed-time DST rules apply (fixed second, minute and hour).
    pub fn has_fixed_time_of_day(&self) -> bool {
        matches!(&self.kind, Kind::Pattern(p) if p.has_fixed_time_of_day())
    }
}

/// Splits robfig's `TZ=`/`CRON_TZ=` prefix off: the zone runs to the first space.
fn split_zone_prefix(expression: &str) -> Result<(Option<&str>, &str), CronError> {
    if expression.is_empty() {
        return Err(CronError::Empty);
    }
    if !(expression.starts_with("TZ=") || expression.starts_with("CRON_TZ=")) {
        return Ok((None, expression));
    }
    let Some(space) = expression.find(' ') else {
        return Err(CronError::PrefixWithoutSpace {
            prefix: expression.to_owned(),
        });
    };
    let equals = expression.find('=').unwrap_or(0);
    Ok((
        Some(&expression[equals + 1..space]),
        expression[space..].trim(),
    ))
}

fn parse_fields(body: &str) -> Result<Pattern, CronError> {
    let fields: Vec<&str> = body.split_whitespace().collect();
    if fields.len() != 6 {
        return Err(CronError::FieldCount {
            found: fields.len(),
        });
    }
    let parse = |i: usize| FieldBits::parse(Field::ALL[i], fields[i]);
    Ok(Pattern {
        second: parse(0)?,
        minute: parse(1)?,
        hour: parse(2)?,
        day_of_month: parse(3)?,
        month: parse(4)?,
        day_of_week: parse(5)?,
    })
}

/// robfig's descriptors; matching is exact (case-sensitive, no trailing space).
fn parse_descriptor(body: &str) -> Result<Kind, CronError> {
    let midnight = |day_of_month: FieldBits, month: FieldBits, day_of_week: FieldBits| {
        Kind::Pattern(Pattern {
            second: FieldBits::single(0),
            minute: FieldBits::single(0),
            hour: FieldBits::single(0),
            day_of_month,
            month,
            day_of_week,
        })
    };
    let all = FieldBits::all;
    let kind = match body {
        "@yearly" | "@annually" => midnight(
            FieldBits::single(1),
            FieldBits::single(1),
            all(Field::DayOfWeek),
        ),
        "@monthly" => midnight(
            FieldBits::single(1),
            all(Field::Month),
            all(Field::DayOfWeek),
        ),
        "@weekly" => midnight(
            all(Field::DayOfMonth),
            all(Field::Month),
            FieldBits::single(0),
        ),
        "@daily" | "@midnight" => midnight(
            all(Field::DayOfMonth),
            all(Field::Month),
            all(Field::DayOfWeek),
        ),
        "@hourly" => Kind::Pattern(Pattern {
            second: FieldBits::single(0),
            minute: FieldBits::single(0),
            hour: all(Field::Hour),
            day_of_month: all(Field::DayOfMonth),
            month: all(Field::Month),
            day_of_week: all(Field::DayOfWeek),
        }),
        _ => {
            let Some(duration) = body.strip_prefix("@every ") else {
                return Err(CronError::UnknownDescriptor {
                    descriptor: body.to_owned(),
                });
            };
            let nanos =
                parse_go_duration(duration).map_err(|problem| CronError::InvalidDuration {
                    duration: duration.to_owned(),
                    problem,
                })?;
            if nanos <= 0 {
                return Err(CronError::NonPositiveDuration {
                    duration: duration.to_owned(),
                });
            }
            // robfig: below one second becomes one second; otherwise whole seconds.
            let period = (nanos / NANOS_PER_SECOND).max(1);
            Kind::Every { period, anchor: 0 }
        }
    };
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(expression: &str) -> String {
        Cron::parse(expression, None).unwrap_err().to_string()
    }

    #[test]
    fn zone_comes_from_the_prefix_or_the_field_but_not_both() {
        let a = Cron::parse("CRON_TZ=Asia/Shanghai 0 0 8 * * *", None).unwrap();
        let b = Cron::parse("TZ=Asia/Shanghai   0 0 8 * * *", None).unwrap();
        let c = Cron::parse("0 0 8 * * *", Some("Asia/Shanghai")).unwrap();
        assert_eq!(a.zone(), c.zone());
        assert_eq!(a.kind, b.kind);
        assert_eq!(b.kind, c.kind);
        assert_eq!(
            Cron::parse("CRON_TZ=UTC 0 0 8 * * *", Some("UTC"))
                .unwrap_err()
                .to_string(),
            "time zone given twice: in the cron prefix (UTC) and in timeZone (UTC); keep one"
        );
        assert_eq!(
            error("0 0 8 * * *"),
            "no time zone: add a `CRON_TZ=<zone> ` prefix or set timeZone"
        );
    }

    #[test]
    fn malformed_expressions_say_what_is_wrong() {
        let cases = [
            ("", "cron expression is empty"),
            (
                "CRON_TZ=UTC",
                "time zone prefix `CRON_TZ=UTC` must be followed by a space and the schedule",
            ),
            (
                "CRON_TZ=Nowhere/City 0 * * * * *",
                "unknown time zone `Nowhere/City` (expected an IANA name such as Asia/Shanghai)",
            ),
            (
                "TZ=UTC 0 8 * * *",
                "expected 6 fields (second minute hour day-of-month month day-of-week), found 5",
            ),
            (
                "TZ=UTC 0 0 8 * * * 2026",
                "expected 6 fields (second minute hour day-of-month month day-of-week), found 7",
            ),
            (
                "TZ=UTC 0 0 0 30 2 *",
                "`TZ=UTC 0 0 0 30 2 *` can never fire: no month it allows has such a day",
            ),
            (
                "TZ=UTC @Daily",
                "unknown descriptor `@Daily` (expected @yearly, @annually, @monthly, @weekly, \
                 @daily, @midnight, @hourly or @every <duration>)",
            ),
            (
                "TZ=UTC @every 5",
                "@every: invalid duration `5`: missing unit (ns, us, ms, s, m, h)",
            ),
            (
                "TZ=UTC 0 0 0 L * *",
                "day-of-month: `L` uses L, W or # (not supported)",
            ),
        ];
        for (expression, message) in cases {
            assert_eq!(error(expression), message, "{expression:?}");
        }
    }

    #[test]
    fn descriptors_expand_like_robfig() {
        let daily = Cron::parse("TZ=UTC @daily", None).unwrap();
        let spelled = Cron::parse("TZ=UTC 0 0 0 * * *", None).unwrap();
        assert_eq!(daily.kind, spelled.kind);
        assert!(daily.has_fixed_time_of_day());
        assert!(
            !Cron::parse("TZ=UTC @hourly", None)
                .unwrap()
                .has_fixed_time_of_day()
        );
        let every = Cron::parse("TZ=UTC @every 1m30.5s", None).unwrap();
        assert_eq!(
            every.kind,
            Kind::Every {
                period: 90,
                anchor: 0
            }
        );
        let tiny = Cron::parse("TZ=UTC @every 10ms", None).unwrap();
        assert_eq!(
            tiny.kind,
            Kind::Every {
                period: 1,
                anchor: 0
            }
        );
    }

    #[test]
    fn every_refuses_durations_that_are_not_positive() {
        // robfig rounds them up to one second; here a typo must not fire every second.
        for nothing in ["0", "0s", "+0h0m", "0.000s", "-0s", "-1h", "-500ms"] {
            assert_eq!(
                error(&format!("TZ=UTC @every {nothing}")),
                format!(
                    "@every: duration `{nothing}` is not positive (it would fire every second)"
                )
            );
        }
    }
}
