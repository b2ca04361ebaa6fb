//! `tidal-scheduler plan`: validates TidalScheduler manifests exactly as the controller does
//! and prints each one's tide over a window — every level change and conflict, then a step
//! chart — so an operator sees the week before applying it.

use std::fmt::Write;

use clap::Args;
use jiff::{SignedDuration, Timestamp, tz::TimeZone};

use super::chart;
use super::error::CliError;
use super::process::{parse_instant, print_stdout};
use crate::api::{TidalScheduler, ValidSpec, validate};
use crate::schedule::{Tide, Trigger};

/// Level-change rows printed per object before the rest is summarised.
const MAX_ROWS: usize = 200;
/// Triggers walked per object (a rule firing every second makes 604,800 a week).
const MAX_TRIGGERS: usize = 2_000_000;

/// Arguments of `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Manifest files with one or more TidalScheduler documents ('-' reads stdin).
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<String>,
    /// Window start, RFC 3339 (default: now).
    #[arg(long)]
    pub from: Option<String>,
    /// Window length in days.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=366))]
    pub days: u32,
    /// Width of the chart in columns.
    #[arg(long, default_value_t = 84, value_parser = clap::value_parser!(u32).range(10..=1000))]
    pub width: u32,
}

/// Validates every object, prints the plan of the valid ones, reports the invalid ones.
pub fn run(args: &PlanArgs, now: Timestamp) -> Result<(), CliError> {
    let from = match &args.from {
        Some(text) => parse_instant("--from", text)?,
        None => now,
    };
    let until = from + SignedDuration::from_hours(24 * i64::from(args.days));
    let mut out = String::new();
    let mut invalid = 0;
    let mut planned = 0;
    for path in &args.files {
        for object in read_objects(path)? {
            let id = format!(
                "{}/{}",
                object.metadata.namespace.as_deref().unwrap_or("default"),
                object.metadata.name.as_deref().unwrap_or("<unnamed>")
            );
            match validate(&object, from) {
                Ok(valid) => {
                    planned += 1;
                    render_plan(
                        &mut out,
                        &id,
                        &object,
                        &valid,
                        from,
                        until,
                        args.width as usize,
                    );
                }
                Err(problems) => {
                    invalid += 1;
                    for problem in problems {
                        eprintln!("{path}: TidalScheduler {id}: {problem}");
                    }
                }
            }
        }
    }
    print_stdout(&out)?;
    if invalid > 0 {
        return Err(CliError::InvalidObjects(invalid));
    }
    if planned == 0 {
        return Err(CliError::Argument(
            "no TidalScheduler found in the given files".into(),
        ));
    }
    Ok(())
}

/// Reads the TidalScheduler documents of a file; other kinds are skipped with a note.
fn read_objects(path: &str) -> Result<Vec<TidalScheduler>, CliError> {
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|source| CliError::Read {
        path: path.to_owned(),
        source,
    })?;
    let manifest = |message: String| CliError::Manifest {
        path: path.to_owned(),
        message,
    };
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| manifest(format!("not valid YAML: {e}")))?;
    let mut objects = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        if document.is_null() {
            continue;
        }
        let kind = document.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        let api_version = document
            .get("apiVersion")
            .and_then(|k| k.as_str())
            .unwrap_or("");
        if kind != "TidalScheduler" || api_version != "scheduling.tidal.io/v1alpha1" {
            eprintln!(
                "note: {path}: document {}: skipping {api_version} {kind}",
                index + 1
            );
            continue;
        }
        let object = serde_json::from_value(document)
            .map_err(|e| manifest(format!("document {}: {e}", index + 1)))?;
        objects.push(object);
    }
    Ok(objects)
}

fn render_plan(
    out: &mut String,
    id: &str,
    object: &TidalScheduler,
    valid: &ValidSpec,
    from: Timestamp,
    until: Timestamp,
    width: usize,
) {
    write_header(out, id, object, valid, from, until);
    let tide = &valid.tide;
    let (columns, counts) = write_changes(out, tide, from, until, width);
    let _ = writeln!(
        out,
        "\n{} triggers, {} level changes, {} conflicts\n",
        counts.triggers, counts.changes, counts.conflicts
    );
    let zone = tide
        .rules()
        .first()
        .map_or(TimeZone::UTC, |r| r.cron.zone().time_zone().clone());
    let zone_name = tide.rules().first().map_or("UTC", |r| r.cron.zone().name());
    let _ = writeln!(out, "desiredReplicas ({zone_name} days)");
    out.push_str(&chart::render(&columns, from, until, &zone));
    out.push('\n');
}

/// The object, the window, warnings and the level at the start.
fn write_header(
    out: &mut String,
    id: &str,
    object: &TidalScheduler,
    valid: &ValidSpec,
    from: Timestamp,
    until: Timestamp,
) {
    let target = &object.spec.target_ref;
    let _ = writeln!(
        out,
        "TidalScheduler {id} -> {} {} {} (apply: {:?}{})",
        target.api_version,
        target.kind,
        target.name,
        object.spec.apply,
        if object.spec.suspend {
            ", SUSPENDED: no trigger would be applied"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "window {from} .. {until} (end excluded)");
    for warning in &valid.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    match valid.tide.level_at(from) {
        Some(l) => {
            let _ = writeln!(
                out,
                "at start: {} replicas from {} (fired {})",
                l.replicas, l.rule, l.schedule_time
            );
        }
        None => {
            let _ = writeln!(
                out,
                "at start: no rule has fired within a year (WaitingForFirstTrigger)"
            );
        }
    }
}

/// What the window held.
struct Counts {
    triggers: usize,
    changes: usize,
    conflicts: usize,
}

/// Writes a row per level change (and conflict) in `[from, until)`; returns the level of
/// each of the chart's `width` columns (the highest within it) and the counts.
fn write_changes(
    out: &mut String,
    tide: &Tide,
    from: Timestamp,
    until: Timestamp,
    width: usize,
) -> (Vec<Option<i32>>, Counts) {
    let _ = writeln!(
        out,
        "\n  {:<22} {:<38} {:<20} replicas",
        "instant (UTC)", "rule's local time", "rule"
    );
    let slice = (until.as_second() - from.as_second()) as f64 / width as f64;
    let column_of = |t: Timestamp| {
        (((t.as_second() - from.as_second()) as f64 / slice) as usize).min(width - 1)
    };
    let mut level = tide.level_at(from);
    let mut columns: Vec<Option<i32>> = vec![None; width];
    let mut filled = 0;
    let mut counts = Counts {
        triggers: 0,
        changes: 0,
        conflicts: 0,
    };
    let mut rows = 0usize;
    // The window is [from, until): the level at `from` is the starting point.
    let last_instant = until - SignedDuration::from_nanos(1);
    tide.for_each_trigger(from, last_instant, |trigger| {
        counts.triggers += 1;
        let column = column_of(trigger.schedule_time);
        let current = level.as_ref().map(|l| l.replicas);
        while filled <= column {
            columns[filled] = current;
            filled += 1;
        }
        columns[column] = columns[column].max(Some(trigger.replicas));
        let changed = level
            .as_ref()
            .is_none_or(|l| l.rule != trigger.rule || l.replicas != trigger.replicas);
        counts.conflicts += usize::from(trigger.is_conflict());
        if changed || trigger.is_conflict() {
            counts.changes += usize::from(changed);
            if rows < MAX_ROWS {
                write_row(out, tide, &trigger, current);
            }
            rows += 1;
        }
        level = Some(trigger);
        counts.triggers < MAX_TRIGGERS
    });
    let last = level.as_ref().map(|l| l.replicas);
    columns[filled.min(width)..]
        .iter_mut()
        .for_each(|c| *c = last);
    if rows > MAX_ROWS {
        let _ = writeln!(out, "  ... {} more rows", rows - MAX_ROWS);
    }
    if counts.triggers >= MAX_TRIGGERS {
        let _ = writeln!(
            out,
            "  (stopped after {MAX_TRIGGERS} triggers; shorten the window)"
        );
    }
    (columns, counts)
}

fn write_row(out: &mut String, tide: &Tide, trigger: &Trigger, previous: Option<i32>) {
    let zone = tide
        .rules()
        .iter()
        .find(|r| r.name == trigger.rule)
        .map_or(TimeZone::UTC, |r| r.cron.zone().time_zone().clone());
    let local = trigger
        .schedule_time
        .to_zoned(zone)
        .strftime("%a %Y-%m-%d %H:%M:%S %Z")
        .to_string();
    let replicas = match previous {
        Some(p) if p == trigger.replicas => format!("= {p}"),
        Some(p) => format!("{p} -> {}", trigger.replicas),
        None => format!("-> {}", trigger.replicas),
    };
    let _ = write!(
        out,
        "  {:<22} {:<38} {:<20} {replicas}",
        trigger.schedule_time.to_string(),
        local,
        trigger.rule
    );
    if trigger.is_conflict() {
        let _ = write!(
            out,
            "   CONFLICT: {} fire together; max wins",
            trigger.colliding.join(", ")
        );
    }
    out.push('\n');
}
