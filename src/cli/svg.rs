//! `plan --output svg`: a step chart of desiredReplicas over the window, one panel per
//! object, with each level change's trigger instant, conflicts and the days calendars skip
//! marked (hover titles give the details). Plain SVG 1.1, no scripts, no external fonts.

use std::fmt::Write;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::timeline::{Skipped, SkippedBy, Timeline};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const LEGEND: f64 = 34.0;
const TITLE: f64 = 46.0;
const PLOT: f64 = 170.0;
const AXIS: f64 = 40.0;
const PANEL: f64 = TITLE + PLOT + AXIS;

const LEVEL: &str = "#1f6feb";
const CONFLICT: &str = "#d1242f";
const SKIPPED: &str = "#9a6700";
const ONLY: &str = "#1a7f37";

/// The chart of `timelines`, one panel each, as an SVG document.
pub fn render(timelines: &[Timeline]) -> String {
    let height = LEGEND + PANEL * timelines.len().max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="12">"#
    );
    out.push_str(&format!(
        r##"<defs><pattern id="skipped-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff8c5"/><line x1="0" y1="0" x2="0" y2="6" stroke="{SKIPPED}" stroke-opacity="0.35" stroke-width="2"/></pattern></defs>
<rect width="100%" height="100%" fill="#ffffff"/>
"##
    ));
    legend(&mut out);
    for (index, timeline) in timelines.iter().enumerate() {
        panel(&mut out, timeline, LEGEND + PANEL * index as f64);
    }
    out.push_str("</svg>\n");
    out
}

fn legend(out: &mut String) {
    let y = 20.0;
    let _ = writeln!(
        out,
        r##"<g class="legend" fill="#24292f"><line x1="{LEFT}" y1="{y}" x2="{}" y2="{y}" stroke="{LEVEL}" stroke-width="2"/><text x="{}" y="{}">desiredReplicas</text><circle cx="{}" cy="{y}" r="4" fill="{LEVEL}"/><text x="{}" y="{}">trigger (level change)</text><path d="{}" fill="{CONFLICT}"/><text x="{}" y="{}">conflict (max wins)</text><rect x="{}" y="{}" width="18" height="12" fill="url(#skipped-hatch)" stroke="{SKIPPED}" stroke-opacity="0.5"/><text x="{}" y="{}">day skipped by a calendar</text><rect x="{}" y="{}" width="18" height="12" fill="#dafbe1" stroke="{ONLY}" stroke-opacity="0.5"/><text x="{}" y="{}">onlyDays day</text></g>"##,
        LEFT + 24.0,
        LEFT + 30.0,
        y + 4.0,
        LEFT + 150.0,
        LEFT + 158.0,
        y + 4.0,
        diamond(LEFT + 310.0, y, 5.0),
        LEFT + 320.0,
        y + 4.0,
        LEFT + 450.0,
        y - 6.0,
        LEFT + 474.0,
        y + 4.0,
        LEFT + 650.0,
        y - 6.0,
        LEFT + 674.0,
        y + 4.0,
    );
}

/// Where instants and levels land in one panel.
struct Scale {
    from: i64,
    span: f64,
    top: f64,
    max: f64,
}

impl Scale {
    fn x(&self, t: Timestamp) -> f64 {
        let plot = WIDTH - LEFT - RIGHT;
        LEFT + ((t.as_second() - self.from) as f64 / self.span).clamp(0.0, 1.0) * plot
    }

    fn y(&self, replicas: i32) -> f64 {
        self.top + PLOT - f64::from(replicas) / self.max * PLOT
    }
}

fn panel(out: &mut String, timeline: &Timeline, top: f64) {
    let peak = timeline
        .levels()
        .iter()
        .filter_map(|(_, level)| *level)
        .max()
        .unwrap_or(0);
    let scale = Scale {
        from: timeline.from.as_second(),
        span: (timeline.until.as_second() - timeline.from.as_second()).max(1) as f64,
        top: top + TITLE,
        max: f64::from(nice_ceiling(peak)),
    };
    let _ = writeln!(
        out,
        r#"<g class="panel" data-object="{}">"#,
        escape(&timeline.object)
    );
    title(out, timeline, top);
    only_days(out, timeline, &scale);
    skipped_days(out, timeline, &scale);
    grid(out, timeline, &scale);
    steps(out, timeline, &scale);
    out.push_str("</g>\n");
}

fn title(out: &mut String, timeline: &Timeline, top: f64) {
    let skipped = timeline
        .skipped
        .iter()
        .filter(|s| s.by == SkippedBy::SkipDays)
        .count();
    let outside = timeline.skipped.len() - skipped;
    let summary = format!(
        "{}{}{}{}",
        timeline.counts(),
        if skipped > 0 {
            format!(", {skipped} skipped by skipDays")
        } else {
            String::new()
        },
        if outside > 0 {
            format!(", {outside} outside onlyDays")
        } else {
            String::new()
        },
        if timeline.suspended {
            " · SUSPENDED: nothing applied"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        r##"<text class="title" x="{LEFT}" y="{}" font-size="14" font-weight="600" fill="#24292f">{} → {} (apply: {})</text><text class="summary" x="{LEFT}" y="{}" fill="#57606a">{}</text>"##,
        top + 18.0,
        escape(&timeline.object),
        escape(&timeline.target),
        escape(&timeline.apply),
        top + 34.0,
        escape(&summary),
    );
}

/// Light bands over the days of onlyDays calendars: the only days their rules fire on.
fn only_days(out: &mut String, timeline: &Timeline, scale: &Scale) {
    for day in &timeline.only_days {
        let (x0, x1) = (scale.x(day.day_start), scale.x(day.day_end));
        let _ = writeln!(
            out,
            r##"<rect class="only-day" data-calendar="{}" data-day-start="{}" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{PLOT}" fill="#dafbe1" stroke="{ONLY}" stroke-opacity="0.3"><title>a day of {}: onlyDays rules fire</title></rect>"##,
            escape(&day.calendar),
            day.day_start,
            scale.top,
            (x1 - x0).max(1.0),
            escape(&day.calendar),
        );
    }
}

/// Hatched bands over each day a calendar skipped an instant on.
fn skipped_days(out: &mut String, timeline: &Timeline, scale: &Scale) {
    let mut days: Vec<(&Skipped, Vec<&Skipped>)> = Vec::new();
    for skip in timeline
        .skipped
        .iter()
        .filter(|s| s.by == SkippedBy::SkipDays)
    {
        match days
            .iter_mut()
            .find(|(first, _)| first.day_start == skip.day_start && first.calendar == skip.calendar)
        {
            Some((_, all)) => all.push(skip),
            None => days.push((skip, vec![skip])),
        }
    }
    for (first, all) in days {
        let (x0, x1) = (scale.x(first.day_start), scale.x(first.day_end));
        let instants: Vec<String> = all
            .iter()
            .map(|s| format!("{} at {}", s.rule, s.time))
            .collect();
        let _ = writeln!(
            out,
            r#"<rect class="skipped-day" data-calendar="{}" data-day-start="{}" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{PLOT}" fill="url(#skipped-hatch)" stroke="{SKIPPED}" stroke-opacity="0.4"><title>skipped by {}: {}</title></rect>"#,
            escape(&first.calendar),
            first.day_start,
            scale.top,
            (x1 - x0).max(1.0),
            escape(&first.calendar),
            escape(&instants.join(", ")),
        );
        for skip in all {
            let x = scale.x(skip.time);
            let _ = writeln!(
                out,
                r#"<line class="skipped" data-rule="{}" data-time="{}" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{SKIPPED}" stroke-width="2"><title>{} skipped at {} by {}</title></line>"#,
                escape(&skip.rule),
                skip.time,
                scale.top + PLOT - 8.0,
                scale.top + PLOT,
                escape(&skip.rule),
                skip.time,
                escape(&skip.calendar),
            );
        }
    }
}

/// Replica gridlines and labels; a line and a label at each local midnight.
fn grid(out: &mut String, timeline: &Timeline, scale: &Scale) {
    let bottom = scale.top + PLOT;
    let max = scale.max as i32;
    for value in [0, max / 2, max] {
        let y = scale.y(value);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#d0d7de" stroke-dasharray="{}"/><text class="y-label" x="{}" y="{:.1}" text-anchor="end" fill="#57606a">{value}</text>"##,
            WIDTH - RIGHT,
            if value == 0 { "none" } else { "3 3" },
            LEFT - 6.0,
            y + 4.0,
        );
    }
    let zone = TimeZone::get(&timeline.zone).unwrap_or(TimeZone::UTC);
    let Ok(mut day) = timeline.from.to_zoned(zone).start_of_day() else {
        return;
    };
    let days = ((timeline.until.as_second() - timeline.from.as_second()) / 86_400).max(1);
    let every = (days / 14 + 1) as usize;
    let mut index = 0usize;
    loop {
        let Ok(next) = day.tomorrow().and_then(|d| d.start_of_day()) else {
            break;
        };
        day = next;
        if day.timestamp() >= timeline.until {
            break;
        }
        let x = scale.x(day.timestamp());
        let _ = writeln!(
            out,
            r##"<line class="midnight" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#eaeef2"/>"##,
            scale.top
        );
        if index.is_multiple_of(every) && x + 70.0 < WIDTH {
            let _ = writeln!(
                out,
                r##"<text class="x-label" x="{:.1}" y="{:.1}" fill="#57606a">{}</text>"##,
                x + 3.0,
                bottom + 16.0,
                day.strftime("%a %d %b")
            );
        }
        index += 1;
    }
    let _ = writeln!(
        out,
        r##"<text x="{}" y="{:.1}" text-anchor="end" fill="#8c959f">days in {}</text>"##,
        WIDTH - RIGHT,
        bottom + 34.0,
        escape(&timeline.zone)
    );
}

/// The step line of the level, a dot per level change, a diamond per conflict.
fn steps(out: &mut String, timeline: &Timeline, scale: &Scale) {
    let mut path = String::new();
    let mut current: Option<i32> = None;
    for (time, level) in timeline.levels() {
        let Some(level) = level else { continue };
        let (x, y) = (scale.x(time), scale.y(level));
        if current.is_none() {
            let _ = write!(path, "M{x:.1},{y:.1}");
        } else {
            let _ = write!(path, " H{x:.1} V{y:.1}");
        }
        current = Some(level);
    }
    if current.is_some() {
        let _ = write!(path, " H{:.1}", scale.x(timeline.until));
        let _ = writeln!(
            out,
            r#"<path class="level" d="{path}" fill="none" stroke="{LEVEL}" stroke-width="2" stroke-linejoin="round"/>"#
        );
    }
    for change in &timeline.changes {
        let (x, y) = (scale.x(change.time), scale.y(change.replicas));
        let what = match change.previous {
            Some(previous) => format!("{previous} → {}", change.replicas),
            None => format!("→ {}", change.replicas),
        };
        if change.colliding.is_empty() {
            let _ = writeln!(
                out,
                r#"<circle class="trigger" data-rule="{}" data-time="{}" data-replicas="{}" cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{LEVEL}"><title>{} ({}): {} {what}</title></circle>"#,
                escape(&change.rule),
                change.time,
                change.replicas,
                change.time,
                escape(&change.local_time),
                escape(&change.rule),
            );
        } else {
            let _ = writeln!(
                out,
                r#"<path class="conflict" data-rule="{}" data-time="{}" data-replicas="{}" d="{}" fill="{CONFLICT}"><title>CONFLICT at {} ({}): {} fire together; {} wins, {what}</title></path>"#,
                escape(&change.rule),
                change.time,
                change.replicas,
                diamond(x, y, 5.5),
                change.time,
                escape(&change.local_time),
                escape(&change.colliding.join(", ")),
                escape(&change.rule),
            );
        }
    }
}

fn diamond(x: f64, y: f64, r: f64) -> String {
    format!(
        "M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z",
        y - r,
        x + r,
        y + r,
        x - r
    )
}

/// The smallest of 1, 2, 5 × 10^k at or above `peak` (at least 1).
fn nice_ceiling(peak: i32) -> i32 {
    let mut unit = 1i64;
    loop {
        for step in [1, 2, 5] {
            let candidate = step * unit;
            if candidate >= i64::from(peak.max(1)) {
                return i32::try_from(candidate).unwrap_or(i32::MAX);
            }
        }
        unit *= 10;
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_tops_out_at_a_round_number() {
        assert_eq!(nice_ceiling(0), 1);
        assert_eq!(nice_ceiling(60), 100);
        assert_eq!(nice_ceiling(20), 20);
        assert_eq!(nice_ceiling(41), 50);
        assert_eq!(nice_ceiling(i32::MAX), i32::MAX);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape(r#"a<b & "c">"#), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
