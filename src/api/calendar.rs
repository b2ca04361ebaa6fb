//! `TidalCalendar` (namespaced) and `ClusterTidalCalendar`: days in a time zone that rules
//! skip (`skipDays`) or are limited to (`onlyDays`), and how a rule refers to them.

use std::fmt;
use std::str::FromStr;

use jiff::civil::Date;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schedule::{self, Day, Zone};

/// Most entries a calendar may hold.
pub const MAX_CALENDAR_DAYS: usize = 1000;

/// Days in one time zone: single dates, date ranges and yearly dates.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "scheduling.tidal.io",
    version = "v1alpha1",
    kind = "TidalCalendar",
    doc = "Days in a time zone (holidays, promotion days) that TidalScheduler rules in this \
           namespace skip (skipDays) or fire on alone (onlyDays).",
    plural = "tidalcalendars",
    singular = "tidalcalendar",
    shortname = "tidalcal",
    namespaced,
    printcolumn = r#"{"name":"Time Zone","type":"string","jsonPath":".spec.timeZone"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TidalCalendarSpec {
    /// IANA time zone the days are read in, e.g. `Europe/London`: a rule's instant is on a
    /// calendar day when its date in this zone is one of the days.
    #[schemars(length(min = 1, max = 64))]
    pub time_zone: String,

    /// The days (at most 1000 entries); empty: no day.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub days: Vec<CalendarDay>,
}

/// Organisation-wide days, usable by rules in every namespace.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "scheduling.tidal.io",
    version = "v1alpha1",
    kind = "ClusterTidalCalendar",
    doc = "Days in a time zone (e.g. an organisation's public holidays) that TidalScheduler \
           rules in any namespace skip (skipDays) or fire on alone (onlyDays).",
    plural = "clustertidalcalendars",
    singular = "clustertidalcalendar",
    shortname = "ctidalcal",
    printcolumn = r#"{"name":"Time Zone","type":"string","jsonPath":".spec.timeZone"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct ClusterTidalCalendarSpec {
    /// The time zone and the days, as in a `TidalCalendar`.
    #[serde(flatten)]
    pub calendar: TidalCalendarSpec,
}

/// One entry: exactly one of `date`, `from`/`to`, `yearly`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "[has(self.date), has(self.from) || has(self.to), has(self.yearly)].exists_one(x, x)",
        "message": "set exactly one of date, from/to (a range) or yearly",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "has(self.from) == has(self.to)",
        "message": "a range needs both from and to",
        "fieldPath": ".to",
        "reason": "FieldValueRequired"
    },
    {
        "rule": "!has(self.from) || !has(self.to) || self.from <= self.to",
        "message": "to is before from: a range runs from its first day to its last",
        "fieldPath": ".to",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "!has(self.yearly) || !(self.yearly in ['02-30', '02-31', '04-31', '06-31', '09-31', '11-31'])",
        "message": "no month has this day",
        "fieldPath": ".yearly",
        "reason": "FieldValueInvalid"
    }
]))]
pub struct CalendarDay {
    /// A single date, `YYYY-MM-DD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        length(max = 10),
        regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
    )]
    #[schemars(extend("format" = "date"))]
    pub date: Option<String>,

    /// The first day of a range, `YYYY-MM-DD` (with `to`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        length(max = 10),
        regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
    )]
    #[schemars(extend("format" = "date"))]
    pub from: Option<String>,

    /// The last day of a range, included, `YYYY-MM-DD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        length(max = 10),
        regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
    )]
    #[schemars(extend("format" = "date"))]
    pub to: Option<String>,

    /// Every year on this month and day, `MM-DD` (`02-29`: leap years only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        length(max = 5),
        regex(pattern = r"^(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$")
    )]
    pub yearly: Option<String>,

    /// What the day is, for humans, e.g. `Christmas Day`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(max = 256))]
    pub name: Option<String>,
}

/// A rule's reference to a calendar.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub struct CalendarRef {
    /// Name of the calendar: a DNS-1123 subdomain, as every Kubernetes object's name.
    #[schemars(length(min = 1, max = 253))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",
        "message": "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit), as the name of a Kubernetes object"
    }]))]
    pub name: String,
    /// `TidalCalendar` (default; in the rule's namespace) or `ClusterTidalCalendar`.
    #[serde(default)]
    pub kind: CalendarKind,
}

/// Which kind of calendar a reference names.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum CalendarKind {
    /// A `TidalCalendar` in the rule's namespace.
    #[default]
    TidalCalendar,
    /// A `ClusterTidalCalendar`.
    ClusterTidalCalendar,
}

impl CalendarRef {
    /// How messages name the calendar, e.g. `TidalCalendar shop/uk-holidays`.
    pub fn describe(&self, namespace: &str) -> String {
        match self.kind {
            CalendarKind::TidalCalendar => format!("TidalCalendar {namespace}/{}", self.name),
            CalendarKind::ClusterTidalCalendar => format!("ClusterTidalCalendar {}", self.name),
        }
    }
}

/// Where `validate` finds the calendars that rules refer to.
pub trait Calendars {
    /// The calendar `reference` names for an object in `namespace`, or `None` if there is
    /// none.
    fn find(&self, reference: &CalendarRef, namespace: &str) -> Option<TidalCalendarSpec>;
}

/// No calendars at all: every reference is missing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCalendars;

impl Calendars for NoCalendars {
    fn find(&self, _: &CalendarRef, _: &str) -> Option<TidalCalendarSpec> {
        None
    }
}

/// A problem in a calendar's spec; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarProblem {
    /// The field, e.g. `spec.days[2].to`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for CalendarProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl TidalCalendarSpec {
    /// The engine's calendar, called `name` in messages; checks what the schema checks
    /// (for `plan` and older CRDs) and the time zone, which it cannot.
    pub fn to_calendar(&self, name: &str) -> Result<schedule::Calendar, Vec<CalendarProblem>> {
        let mut problems = Vec::new();
        let zone = Zone::named(&self.time_zone)
            .map_err(|error| problems.push(problem("spec.timeZone".into(), error.to_string())))
            .ok();
        if self.days.len() > MAX_CALENDAR_DAYS {
            problems.push(problem(
                "spec.days".into(),
                format!(
                    "{} entries; at most {MAX_CALENDAR_DAYS} are allowed",
                    self.days.len()
                ),
            ));
        }
        let mut days = Vec::with_capacity(self.days.len());
        for (index, day) in self.days.iter().enumerate() {
            match day.to_day() {
                Ok(day) => days.push(day),
                Err((field, message)) => {
                    problems.push(problem(format!("spec.days[{index}]{field}"), message))
                }
            }
        }
        match zone {
            Some(zone) if problems.is_empty() => Ok(schedule::Calendar::new(name, zone, days)),
            _ => Err(problems),
        }
    }
}

fn problem(field: String, message: String) -> CalendarProblem {
    CalendarProblem { field, message }
}

impl CalendarDay {
    /// The engine's day; on error, the field (`.to`, or empty for the entry) and why.
    fn to_day(&self) -> Result<Day, (&'static str, String)> {
        let date = |field: &'static str, text: &str| {
            Date::from_str(text)
                .ok()
                .filter(|_| text.len() == 10)
                .ok_or((field, format!("`{text}` is not a date (YYYY-MM-DD)")))
        };
        match (&self.date, &self.from, &self.to, &self.yearly) {
            (Some(d), None, None, None) => Ok(Day::Date(date(".date", d)?)),
            (None, Some(from), Some(to), None) => {
                let (first, last) = (date(".from", from)?, date(".to", to)?);
                if last < first {
                    return Err((".to", format!("{to} is before from ({from})")));
                }
                Ok(Day::Range { first, last })
            }
            (None, None, None, Some(yearly)) => parse_yearly(yearly).ok_or((
                ".yearly",
                format!("`{yearly}` is not a month and day (MM-DD) any year has"),
            )),
            (None, Some(_), None, None) | (None, None, Some(_), None) => {
                Err((".to", "a range needs both from and to".to_owned()))
            }
            _ => Err((
                "",
                "set exactly one of date, from/to (a range) or yearly".to_owned(),
            )),
        }
    }
}

/// `MM-DD` as a yearly day; 02-29 is allowed (it recurs in leap years).
fn parse_yearly(text: &str) -> Option<Day> {
    let (month, day) = text.split_once('-')?;
    if month.len() != 2 || day.len() != 2 {
        return None;
    }
    let (month, day): (i8, i8) = (month.parse().ok()?, day.parse().ok()?);
    // 2024 is a leap year: every month-day that exists in some year exists then.
    Date::new(2024, month, day).ok()?;
    Some(Day::Yearly { month, day })
}
