//! `tidal-scheduler next`: the next fire instants of one expression, for checking a rule
//! before putting it in a manifest.

use std::fmt::Write;

use clap::Args;
use jiff::Timestamp;

use super::error::CliError;
use super::process::{parse_instant, print_stdout};
use crate::schedule::Cron;

/// Arguments of `next`.
#[derive(Debug, Args)]
pub struct NextArgs {
    /// The cron expression, e.g. 'CRON_TZ=Asia/Shanghai 0 0 8 * * MON-FRI'. Without a zone
    /// prefix or --time-zone it is evaluated in UTC (the API itself requires a zone).
    pub expression: String,
    /// Start after this RFC 3339 instant (default: now).
    #[arg(long)]
    pub after: Option<String>,
    /// How many instants to print.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub count: u32,
    /// IANA time zone, as the rule's timeZone field (not together with a prefix).
    #[arg(long)]
    pub time_zone: Option<String>,
}

/// Prints the instants, one RFC 3339 UTC line each.
pub fn run(args: &NextArgs, now: Timestamp) -> Result<(), CliError> {
    let after = match &args.after {
        Some(text) => parse_instant("--after", text)?,
        None => now,
    };
    let has_prefix = args.expression.starts_with("TZ=") || args.expression.starts_with("CRON_TZ=");
    let zone = match (&args.time_zone, has_prefix) {
        (Some(zone), _) => Some(zone.as_str()),
        (None, true) => None,
        (None, false) => Some("UTC"),
    };
    // `@every` counts from the start instant, as robfig does.
    let floor = after.as_second() - i64::from(after.subsec_nanosecond() < 0);
    let cron = Cron::parse(&args.expression, zone)?.anchored_at(floor);
    let mut out = String::new();
    let mut cursor = after;
    for _ in 0..args.count {
        let Some(fire) = cron.next_after(cursor) else {
            eprintln!("note: no further fire within five years after {cursor}");
            break;
        };
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{fire}");
        cursor = fire;
    }
    print_stdout(&out)
}
