//! `tidal-scheduler calendar import FILE.ics`: turns an iCalendar file's all-day events into
//! a `TidalCalendar` (or `ClusterTidalCalendar`) manifest. Parsing is the `icalendar`
//! crate's; this maps its events to days: a dated event to a date or a range (DTEND is
//! exclusive), a yearly event on a fixed date (`RRULE:FREQ=YEARLY`) to a `yearly` day, a
//! bounded one (COUNT, UNTIL) to its dates. Anything else is refused with the line it is
//! on, and nothing is written.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use jiff::ToSpan;
use jiff::civil::Date;
use kube::api::ObjectMeta;

use super::error::CliError;
use super::process::print_stdout;
use crate::api::{
    CalendarDay, ClusterTidalCalendar, ClusterTidalCalendarSpec, MAX_CALENDAR_DAYS, TidalCalendar,
    TidalCalendarSpec,
};
use crate::schedule::Zone;

/// Annotation naming the file a calendar was imported from.
pub const IMPORTED_FROM: &str = "scheduling.tidal.io/imported-from";

/// Years a bounded yearly event (COUNT, UNTIL) is expanded over at most.
const MAX_YEARS: i16 = 100;

/// `calendar` subcommands.
#[derive(Debug, Subcommand)]
pub enum CalendarCommand {
    /// Print a TidalCalendar manifest made from an iCalendar (.ics) file's all-day events.
    Import(ImportArgs),
}

/// Arguments of `calendar import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The iCalendar file ('-' reads stdin).
    pub file: String,
    /// Name of the calendar.
    #[arg(long)]
    pub name: String,
    /// Namespace of the TidalCalendar (default: none, kubectl's namespace applies).
    #[arg(short = 'n', long, conflicts_with = "cluster")]
    pub namespace: Option<String>,
    /// Make a ClusterTidalCalendar (for every namespace) instead.
    #[arg(long)]
    pub cluster: bool,
    /// IANA time zone of the days (default: the file's X-WR-TIMEZONE).
    #[arg(long)]
    pub time_zone: Option<String>,
}

/// Runs a `calendar` subcommand.
pub fn run(command: &CalendarCommand) -> Result<(), CliError> {
    match command {
        CalendarCommand::Import(args) => {
            let text = if args.file == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(&args.file)
            }
            .map_err(|source| CliError::Read {
                path: args.file.clone(),
                source,
            })?;
            let manifest = import(&text, args).map_err(|message| CliError::Manifest {
                path: args.file.clone(),
                message,
            })?;
            print_stdout(&manifest)
        }
    }
}

/// The manifest for the iCalendar `text`, or why it cannot be made (naming the line).
pub fn import(text: &str, args: &ImportArgs) -> Result<String, String> {
    check_content_lines(text)?;
    let unfolded = icalendar::parser::unfold(text);
    let calendar = icalendar::parser::read_calendar(&unfolded)
        .map_err(|e| syntax_error(&e, &unfolded, unfolded.len() != text.len()))?;
    let lines = Lines::of(text);
    let zone = match (&args.time_zone, find(&calendar.properties, "X-WR-TIMEZONE")) {
        (Some(zone), _) => zone.clone(),
        (None, Some(zone)) => zone.val.as_str().to_owned(),
        (None, None) => {
            return Err(
                "the file names no time zone (X-WR-TIMEZONE): give --time-zone, \
                        e.g. --time-zone Europe/London"
                    .into(),
            );
        }
    };
    Zone::named(&zone).map_err(|e| format!("--time-zone: {e}"))?;
    let mut days = Vec::new();
    let events = calendar
        .components
        .iter()
        .filter(|c| c.name.as_str().eq_ignore_ascii_case("VEVENT"));
    for (index, event) in events.enumerate() {
        let at = |property: &str| lines.of_property(index, property);
        days.extend(event_days(event, &at)?);
    }
    if days.len() > MAX_CALENDAR_DAYS {
        return Err(format!(
            "{} days; a calendar holds at most {MAX_CALENDAR_DAYS}: split the file",
            days.len()
        ));
    }
    let spec = TidalCalendarSpec {
        time_zone: zone,
        days,
    };
    let metadata = ObjectMeta {
        name: Some(args.name.clone()),
        namespace: args.namespace.clone(),
        annotations: Some(BTreeMap::from([(
            IMPORTED_FROM.to_owned(),
            file_name(&args.file),
        )])),
        ..ObjectMeta::default()
    };
    let yaml = if args.cluster {
        serde_saphyr::to_string(&ClusterTidalCalendar {
            metadata,
            spec: ClusterTidalCalendarSpec { calendar: spec },
        })
    } else {
        serde_saphyr::to_string(&TidalCalendar { metadata, spec })
    };
    // Plain data with string keys always serializes.
    Ok(yaml.expect("a calendar serializes to YAML"))
}

type Property<'a> = icalendar::parser::Property<'a>;

fn find<'a, 'b>(properties: &'b [Property<'a>], name: &str) -> Option<&'b Property<'a>> {
    properties
        .iter()
        .find(|p| p.name.as_str().eq_ignore_ascii_case(name))
}

/// The days of one VEVENT; `at` gives the line of a property for errors.
fn event_days(
    event: &icalendar::parser::Component<'_>,
    at: &dyn Fn(&str) -> String,
) -> Result<Vec<CalendarDay>, String> {
    let properties = &event.properties;
    if let Some(bare) = properties
        .iter()
        .find(|p| p.val.as_str().is_empty() && p.params.is_empty())
    {
        return Err(format!(
            "{}: `{}` is not a property (NAME:VALUE)",
            at(bare.name.as_str()),
            bare.name.as_str()
        ));
    }
    if find(properties, "STATUS").is_some_and(|s| s.val.as_str().eq_ignore_ascii_case("CANCELLED"))
    {
        return Ok(Vec::new());
    }
    let name =
        find(properties, "SUMMARY").map(|s| s.val.clone().unescape_text().as_str().to_owned());
    let start = find(properties, "DTSTART")
        .ok_or_else(|| format!("{}: an event without DTSTART", at("BEGIN")))?;
    let first = all_day(start.val.as_str())
        .ok_or_else(|| not_all_day(&at("DTSTART"), "DTSTART", start.val.as_str()))?;
    let last = match (find(properties, "DTEND"), find(properties, "DURATION")) {
        (Some(end), _) => {
            let end_date = all_day(end.val.as_str())
                .ok_or_else(|| not_all_day(&at("DTEND"), "DTEND", end.val.as_str()))?;
            if end_date <= first {
                return Err(format!(
                    "{}: DTEND {} is not after DTSTART {}",
                    at("DTEND"),
                    end.val.as_str(),
                    start.val.as_str()
                ));
            }
            // DTEND is exclusive (RFC 5545 §3.6.1).
            end_date.yesterday().map_err(|e| e.to_string())?
        }
        (None, Some(duration)) => {
            let days = whole_days(duration.val.as_str()).ok_or_else(|| {
                format!(
                    "{}: DURATION {} is not a whole number of days (P<n>D or P<n>W)",
                    at("DURATION"),
                    duration.val.as_str()
                )
            })?;
            first
                .checked_add((days - 1).days())
                .map_err(|e| e.to_string())?
        }
        (None, None) => first,
    };
    let day =
        |date: Option<String>, from: Option<String>, to: Option<String>, yearly| CalendarDay {
            date,
            from,
            to,
            yearly,
            name: name.clone(),
        };
    let dates = |first: Date, last: Date| {
        if first == last {
            day(Some(first.to_string()), None, None, None)
        } else {
            day(None, Some(first.to_string()), Some(last.to_string()), None)
        }
    };
    if find(properties, "RDATE").is_some() || find(properties, "EXDATE").is_some() {
        let which = if find(properties, "RDATE").is_some() {
            "RDATE"
        } else {
            "EXDATE"
        };
        return Err(format!(
            "{}: {which} is not supported: list the dates as events of their own",
            at(which)
        ));
    }
    let Some(rule) = find(properties, "RRULE") else {
        return Ok(vec![dates(first, last)]);
    };
    let rule = Yearly::parse(rule.val.as_str(), first)
        .map_err(|why| format!("{}: RRULE {}: {why}", at("RRULE"), rule.val.as_str()))?;
    let length = first.until(last).map_err(|e| e.to_string())?.get_days();
    match rule.years {
        // For ever: one yearly day per day of the event.
        None => (0..=i64::from(length))
            .map(|offset| {
                let date = first
                    .checked_add(offset.days())
                    .map_err(|e| e.to_string())?;
                Ok(day(
                    None,
                    None,
                    None,
                    Some(format!("{:02}-{:02}", date.month(), date.day())),
                ))
            })
            .collect(),
        Some(years) => (0..years)
            .filter_map(|year| {
                let start = first.checked_add(i64::from(year).years()).ok()?;
                // A 29 February start recurs only in leap years.
                (start.day() == first.day()).then_some(start)
            })
            .map(|start| {
                let end = start
                    .checked_add(i64::from(length).days())
                    .map_err(|e| e.to_string())?;
                Ok(dates(start, end))
            })
            .collect(),
    }
}

/// Checks, before the parser (whose errors point at the enclosing component), that the
/// file begins a calendar and that every content line is `NAME[;PARAM=…]:VALUE`, naming
/// the first line that is not (a folded line by the line it starts on).
fn check_content_lines(text: &str) -> Result<(), String> {
    let mut logical: Vec<(usize, String)> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        match (line.strip_prefix([' ', '\t']), logical.last_mut()) {
            (Some(rest), Some((_, previous))) => previous.push_str(rest),
            _ => logical.push((index + 1, line.trim_end_matches('\r').to_owned())),
        }
    }
    let mut lines = logical.iter().filter(|(_, line)| !line.trim().is_empty());
    match lines.next() {
        Some((_, first))
            if first
                .trim_start_matches('\u{feff}')
                .eq_ignore_ascii_case("BEGIN:VCALENDAR") => {}
        Some((number, first)) => {
            return Err(format!(
                "line {number}: not valid iCalendar: a calendar begins with BEGIN:VCALENDAR, \
                 not `{first}`"
            ));
        }
        None => return Err("not an iCalendar file: it is empty".into()),
    }
    for (number, line) in lines {
        if let Some(problem) = content_line_problem(line) {
            return Err(format!(
                "line {number}: `{line}` is not a property (NAME:VALUE): {problem}"
            ));
        }
    }
    Ok(())
}

/// What is wrong with one unfolded content line (RFC 5545 §3.1), if anything.
fn content_line_problem(line: &str) -> Option<&'static str> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(line.len());
    if name_end == 0 {
        return Some("it does not start with a name (letters, digits and '-')");
    }
    let mut quoted = false;
    for c in line[name_end..].chars() {
        match c {
            '"' => quoted = !quoted,
            ':' if !quoted => return None,
            _ => {}
        }
    }
    Some(match line[name_end..].chars().next() {
        None => "the name is not followed by ':' and a value",
        Some(';') => "its parameters are not followed by ':' and a value",
        Some(_) => "a name (letters, digits and '-') must be followed by ';' or ':'",
    })
}

/// The parser's error (a trace of nom contexts, innermost first) as one line: where, what
/// is there, and what the parser was reading.
fn syntax_error(trace: &str, unfolded: &str, was_folded: bool) -> String {
    let mut line = None;
    let mut reading = Vec::new();
    for entry in trace
        .lines()
        .filter_map(|l| l.split_once(": at line ").map(|(_, rest)| rest))
    {
        let Some((number, context)) = entry.split_once(", in ") else {
            continue;
        };
        line = line.or_else(|| number.parse::<usize>().ok());
        reading.push(context.trim_end_matches(':').to_owned());
    }
    let Some(line) = line else {
        return format!(
            "not an iCalendar file: {}",
            trace.trim_start_matches("error: ")
        );
    };
    let content = unfolded
        .lines()
        .nth(line.saturating_sub(1))
        .unwrap_or("")
        .trim_end();
    format!(
        "line {line}{}: not valid iCalendar at `{content}` ({})",
        if was_folded {
            " (of the unfolded text)"
        } else {
            ""
        },
        reading.join(", within ")
    )
}

/// A `VALUE=DATE` value, `YYYYMMDD`; `None` for a date-time or anything else.
fn all_day(value: &str) -> Option<Date> {
    if value.len() != 8 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Date::new(
        value[0..4].parse().ok()?,
        value[4..6].parse().ok()?,
        value[6..8].parse().ok()?,
    )
    .ok()
}

fn not_all_day(line: &str, property: &str, value: &str) -> String {
    format!(
        "{line}: {property} {value} is not an all-day date (YYYYMMDD): only all-day events \
         can be imported"
    )
}

/// `P<n>D` or `P<n>W` as days.
fn whole_days(duration: &str) -> Option<i32> {
    let body = duration.strip_prefix('P')?;
    let (number, unit) = body.split_at(body.len().checked_sub(1)?);
    let n: i32 = number.parse().ok().filter(|n| *n > 0)?;
    match unit {
        "D" => Some(n),
        "W" => n.checked_mul(7),
        _ => None,
    }
}

/// A yearly RRULE on the start's month and day: for ever, or for a number of years.
struct Yearly {
    years: Option<i16>,
}

impl Yearly {
    fn parse(rule: &str, start: Date) -> Result<Yearly, String> {
        let mut parts = BTreeMap::new();
        for part in rule.split(';').filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not KEY=VALUE"))?;
            parts.insert(key.to_ascii_uppercase(), value.to_owned());
        }
        if parts.get("FREQ").map(String::as_str) != Some("YEARLY") {
            return Err("only FREQ=YEARLY rules can be imported".into());
        }
        if parts.get("INTERVAL").is_some_and(|i| i != "1") {
            return Err("only INTERVAL=1 (every year) can be imported".into());
        }
        for moving in [
            "BYDAY",
            "BYWEEKNO",
            "BYYEARDAY",
            "BYSETPOS",
            "BYHOUR",
            "BYMINUTE",
        ] {
            if parts.contains_key(moving) {
                return Err(format!(
                    "{moving}: a date that moves every year cannot be a yearly day; list \
                     its dates as events of their own"
                ));
            }
        }
        if parts
            .get("BYMONTH")
            .is_some_and(|m| m.parse() != Ok(start.month()))
            || parts
                .get("BYMONTHDAY")
                .is_some_and(|d| d.parse() != Ok(start.day()))
        {
            return Err("BYMONTH/BYMONTHDAY must be DTSTART's month and day".into());
        }
        let years = match (parts.get("COUNT"), parts.get("UNTIL")) {
            (Some(_), Some(_)) => return Err("COUNT and UNTIL together".into()),
            (Some(count), None) => Some(
                count
                    .parse::<i16>()
                    .ok()
                    .filter(|c| (1..=MAX_YEARS).contains(c))
                    .ok_or_else(|| format!("COUNT {count} is not 1-{MAX_YEARS}"))?,
            ),
            (None, Some(until)) => {
                let last = until
                    .get(..8)
                    .and_then(all_day)
                    .ok_or_else(|| format!("UNTIL {until} is not a date"))?;
                let years = last.year() - start.year() + 1
                    - i16::from((last.month(), last.day()) < (start.month(), start.day()));
                Some(years.clamp(0, MAX_YEARS))
            }
            (None, None) => None,
        };
        Ok(Yearly { years })
    }
}

/// Line numbers of the original file, to name where an event's property is.
struct Lines<'a> {
    lines: Vec<&'a str>,
}

impl<'a> Lines<'a> {
    fn of(text: &'a str) -> Lines<'a> {
        Lines {
            lines: text.lines().collect(),
        }
    }

    /// "line N" of `property` in the `event`-th VEVENT (its BEGIN line if not found).
    fn of_property(&self, event: usize, property: &str) -> String {
        let begin = self
            .lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.trim_end().eq_ignore_ascii_case("BEGIN:VEVENT"))
            .nth(event)
            .map_or(0, |(n, _)| n);
        let line = self.lines[begin..]
            .iter()
            .take_while(|l| !l.trim_end().eq_ignore_ascii_case("END:VEVENT"))
            .position(|l| {
                l.to_ascii_uppercase()
                    .strip_prefix(&property.to_ascii_uppercase())
                    .is_some_and(|rest| rest.trim_end().is_empty() || rest.starts_with([':', ';']))
            })
            .map_or(begin, |offset| begin + offset);
        format!("line {}", line + 1)
    }
}

fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests;
