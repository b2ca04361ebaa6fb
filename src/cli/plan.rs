//! `tidal-scheduler plan`: validates TidalScheduler manifests — or the objects of a live
//! cluster — exactly as the controller does, calendars included, and shows each one's tide
//! over a window: as text (every level change and conflict, then a step chart), as JSON,
//! or as an SVG step chart.

use std::fmt::Write;

use clap::{Args, ValueEnum};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::chart;
use super::error::CliError;
use super::live;
use super::manifests::Manifests;
use super::process::{parse_instant, print_stdout};
use super::svg;
use super::timeline::{SkippedBy, Step, Timeline};
use crate::api::validate;

/// Level-change rows printed per object before the rest is summarised.
const MAX_ROWS: usize = 200;

/// Arguments of `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Manifest files with TidalSchedulers and the TidalCalendars / ClusterTidalCalendars
    /// they use ('-' reads stdin).
    #[arg(short = 'f', long = "filename", required_unless_present = "live")]
    pub files: Vec<String>,
    /// Plan the objects and calendars of the cluster in the kubeconfig (KUBECONFIG or
    /// ~/.kube/config, or in-cluster) instead of files.
    #[arg(long, conflicts_with = "files")]
    pub live: bool,
    /// With --live: the namespace (default: the kubeconfig context's).
    #[arg(
        short = 'n',
        long,
        requires = "live",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,
    /// With --live: every namespace.
    #[arg(short = 'A', long, requires = "live")]
    pub all_namespaces: bool,
    /// With --live: the kubeconfig context to use (default: the current one).
    #[arg(long, requires = "live")]
    pub context: Option<String>,
    /// Window start, RFC 3339 (default: now).
    #[arg(long)]
    pub from: Option<String>,
    /// Window length in days.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=366))]
    pub days: u32,
    /// Width of the text chart in columns.
    #[arg(long, default_value_t = 84, value_parser = clap::value_parser!(u32).range(10..=1000))]
    pub width: u32,
    /// What to print.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// Output formats of `plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Level changes, conflicts and a terminal step chart per object.
    Text,
    /// The same as a JSON document (`objects`, `invalid`).
    Json,
    /// An SVG step chart per object, with triggers, conflicts and skipped days.
    Svg,
}

/// An object that failed validation.
#[derive(Debug, Serialize)]
struct Invalid {
    object: String,
    source: String,
    problems: Vec<String>,
}

/// Everything `--output json` prints.
#[derive(Debug, Serialize)]
struct Report<'a> {
    from: Timestamp,
    until: Timestamp,
    objects: &'a [Timeline],
    invalid: &'a [Invalid],
}

/// Validates every object, prints the plan of the valid ones, reports the invalid ones.
pub fn run(args: &PlanArgs, now: Timestamp) -> Result<(), CliError> {
    let from = match &args.from {
        Some(text) => parse_instant("--from", text)?,
        None => now,
    };
    let until = from + SignedDuration::from_hours(24 * i64::from(args.days));
    let manifests = if args.live {
        live::read(
            args.context.as_deref(),
            args.namespace.as_deref(),
            args.all_namespaces,
        )?
    } else {
        Manifests::read(&args.files)?
    };
    let mut timelines = Vec::new();
    let mut invalid = Vec::new();
    for (source, object) in &manifests.objects {
        let id = format!(
            "{}/{}",
            object.metadata.namespace.as_deref().unwrap_or("default"),
            object.metadata.name.as_deref().unwrap_or("<unnamed>")
        );
        match validate(object, &manifests.calendars, from) {
            Ok(valid) => timelines.push(Timeline::of(&id, object, &valid, from, until)),
            Err(problems) => invalid.push(Invalid {
                object: id,
                source: source.clone(),
                problems: problems.iter().map(ToString::to_string).collect(),
            }),
        }
    }
    for object in &invalid {
        for problem in &object.problems {
            eprintln!(
                "{}: TidalScheduler {}: {problem}",
                object.source, object.object
            );
        }
    }
    let out = match args.output {
        Output::Text => {
            let mut out = String::new();
            for timeline in &timelines {
                render_text(&mut out, timeline, args.width as usize);
            }
            out
        }
        Output::Json => {
            let report = Report {
                from,
                until,
                objects: &timelines,
                invalid: &invalid,
            };
            let mut json = serde_json::to_string_pretty(&report)
                .map_err(|e| CliError::Runtime(format!("failed to serialize the plan: {e}")))?;
            json.push('\n');
            json
        }
        Output::Svg => svg::render(&timelines),
    };
    print_stdout(&out)?;
    if !invalid.is_empty() {
        return Err(CliError::InvalidObjects(invalid.len()));
    }
    if timelines.is_empty() {
        return Err(CliError::Argument(if args.live {
            "no TidalScheduler found in the cluster (namespace or -A as given)".into()
        } else {
            "no TidalScheduler found in the given files".into()
        }));
    }
    Ok(())
}

fn render_text(out: &mut String, timeline: &Timeline, width: usize) {
    write_header(out, timeline);
    write_changes(out, timeline);
    write_skipped(out, timeline);
    let _ = writeln!(out, "\n{}\n", timeline.counts());
    let zone = TimeZone::get(&timeline.zone).unwrap_or(TimeZone::UTC);
    let _ = writeln!(out, "desiredReplicas ({} days)", timeline.zone);
    out.push_str(&chart::render(
        &timeline.columns(width),
        timeline.from,
        timeline.until,
        &zone,
    ));
    out.push('\n');
}

/// The object, the window, warnings and the level at the start.
fn write_header(out: &mut String, timeline: &Timeline) {
    let _ = writeln!(
        out,
        "TidalScheduler {} -> {} (apply: {}{})",
        timeline.object,
        timeline.target,
        timeline.apply,
        if timeline.suspended {
            ", SUSPENDED: no trigger would be applied"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "window {} .. {} (end excluded)",
        timeline.from, timeline.until
    );
    for warning in &timeline.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    match &timeline.start {
        Some(l) => {
            let _ = writeln!(
                out,
                "at start: {} replicas from {} (fired {})",
                l.replicas, l.rule, l.time
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

/// A row per level change (and conflict) in `[from, until)`.
fn write_changes(out: &mut String, timeline: &Timeline) {
    let _ = writeln!(
        out,
        "\n  {:<22} {:<38} {:<20} replicas",
        "instant (UTC)", "rule's local time", "rule"
    );
    for change in timeline.changes.iter().take(MAX_ROWS) {
        write_row(out, change);
    }
    if timeline.changes.len() > MAX_ROWS {
        let _ = writeln!(out, "  ... {} more rows", timeline.changes.len() - MAX_ROWS);
    }
    if timeline.truncated {
        let _ = writeln!(
            out,
            "  (stopped early: too many triggers in the window; shorten it)"
        );
    }
}

fn write_row(out: &mut String, change: &Step) {
    let replicas = match change.previous {
        Some(p) if p == change.replicas => format!("= {p}"),
        Some(p) => format!("{p} -> {}", change.replicas),
        None => format!("-> {}", change.replicas),
    };
    let _ = write!(
        out,
        "  {:<22} {:<38} {:<20} {replicas}",
        change.time.to_string(),
        change.local_time,
        change.rule
    );
    if !change.colliding.is_empty() {
        let _ = write!(
            out,
            "   CONFLICT: {} fire together; max wins",
            change.colliding.join(", ")
        );
    }
    out.push('\n');
}

/// The instants skipDays calendars skip, one row each; a count of those outside onlyDays.
fn write_skipped(out: &mut String, timeline: &Timeline) {
    let (skipped, outside): (Vec<_>, Vec<_>) = timeline
        .skipped
        .iter()
        .partition(|s| s.by == SkippedBy::SkipDays);
    if !outside.is_empty() {
        let _ = writeln!(
            out,
            "\n  {} instants fall outside their rules' onlyDays calendars (not instants)",
            outside.len()
        );
    }
    if skipped.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n  skipped by skipDays calendars (no instant, no level change):"
    );
    for skipped in skipped.iter().take(MAX_ROWS) {
        let _ = writeln!(
            out,
            "  {:<22} {:<20} {}",
            skipped.time.to_string(),
            skipped.rule,
            skipped.calendar
        );
    }
    if skipped.len() > MAX_ROWS {
        let _ = writeln!(out, "  ... {} more", skipped.len() - MAX_ROWS);
    }
}
