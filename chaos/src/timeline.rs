//! A scenario's timeline as SVG: who held the Lease over time (one row per replica),
//! the faults, and every applied instant's lateness against the bound.

use std::fmt::Write;

use jiff::Timestamp;

use crate::report::Report;

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 150.0;
const ROW: f64 = 22.0;
const PLOT: f64 = 120.0;

/// The SVG of `report`'s timeline.
pub fn svg(report: &Report) -> String {
    let mut replicas: Vec<&str> = Vec::new();
    for holding in &report.holdings {
        if !holding.holder.is_empty() && !replicas.contains(&holding.holder.as_str()) {
            replicas.push(&holding.holder);
        }
    }
    let times = report
        .holdings
        .iter()
        .map(|h| h.at)
        .chain(report.faults.iter().flat_map(|f| [f.start, f.end]))
        .chain(report.triggers.iter().map(|(at, _)| *at));
    let (Some(first), Some(last)) = (times.clone().min(), times.max()) else {
        return empty(report);
    };
    let span = last.duration_since(first).as_secs_f64().max(1.0);
    let x = |at: Timestamp| {
        LEFT + at.duration_since(first).as_secs_f64() / span * (WIDTH - LEFT - 10.0)
    };
    let faults_y = 30.0 + ROW * replicas.len() as f64;
    let plot_y = faults_y + ROW + 20.0;
    let height = plot_y + PLOT + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        out,
        r#"<text x="4" y="16" font-size="13" font-weight="bold">{} — {} faults, {} instants, lost {}, duplicated {}, zombie writes {}, fenced writes {}</text>"#,
        report.name,
        report.faults.len(),
        report.verdict.instants,
        report.verdict.lost,
        report.verdict.duplicated,
        report.verdict.zombie_writes,
        report.verdict.fenced_writes
    );
    // Leadership: a bar from each change of holder to the next.
    for (row, replica) in replicas.iter().enumerate() {
        let y = 30.0 + ROW * row as f64;
        let _ = writeln!(out, r#"<text x="4" y="{}">{replica}</text>"#, y + 14.0);
        for (i, holding) in report.holdings.iter().enumerate() {
            if holding.holder != *replica {
                continue;
            }
            let end = report.holdings.get(i + 1).map_or(last, |next| next.at);
            let _ = writeln!(
                out,
                r##"<rect x="{:.1}" y="{y}" width="{:.1}" height="{}" fill="#4a90d9"/>"##,
                x(holding.at),
                (x(end) - x(holding.at)).max(1.0),
                ROW - 6.0
            );
        }
    }
    let _ = writeln!(out, r#"<text x="4" y="{}">faults</text>"#, faults_y + 14.0);
    for fault in &report.faults {
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{faults_y}" width="{:.1}" height="{}" fill="#d0021b" opacity="0.7"><title>{} {}</title></rect>"##,
            x(fault.start),
            (x(fault.end) - x(fault.start)).max(2.0),
            ROW - 6.0,
            fault.kind,
            fault.target
        );
    }
    // Lateness: each applied instant, scaled to the bound.
    let bound = report.lateness_bound_ms.max(1.0);
    let top = report
        .triggers
        .iter()
        .map(|(_, ms)| *ms)
        .fold(bound, f64::max);
    let latest = report
        .triggers
        .iter()
        .map(|(_, ms)| *ms)
        .fold(0.0, f64::max);
    let y = |ms: f64| plot_y + PLOT - ms / top * PLOT;
    let _ = writeln!(
        out,
        r#"<text x="4" y="{}">lateness (max {:.1} s)</text>"#,
        plot_y + PLOT / 2.0,
        latest / 1000.0
    );
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" x2="{WIDTH}" y1="{:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="4 3"/><text x="{}" y="{:.1}" text-anchor="end">bound {:.1} s</text>"##,
        y(bound),
        y(bound),
        WIDTH - 4.0,
        y(bound) - 3.0,
        bound / 1000.0
    );
    for (at, ms) in &report.triggers {
        let colour = if *ms > bound {
            "#d0021b"
        } else if *ms > 1000.0 {
            "#f5a623"
        } else {
            "#7ed321"
        };
        let _ = writeln!(
            out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{colour}"/>"#,
            x(*at),
            y(*ms)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{:.1}">{first}</text><text x="{}" y="{:.1}" text-anchor="end">+{span:.0} s</text>"#,
        height - 10.0,
        WIDTH - 10.0,
        height - 10.0
    );
    out.push_str("</svg>\n");
    out
}

fn empty(report: &Report) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"40\"><text x=\"4\" y=\"20\">{}: nothing observed</text></svg>\n",
        report.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Fault, Holding, Verdict};
    use crate::report::Percentiles;
    use crate::scenario::{Mode, Scenario};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("valid")
    }

    #[test]
    fn draws_a_bar_per_holding_a_box_per_fault_and_a_dot_per_trigger() {
        let holding = |seconds, holder: &str| Holding {
            at: at(seconds),
            holder: holder.to_owned(),
        };
        let report = Report {
            name: "zombie".to_owned(),
            scenario: Scenario::Zombie,
            mode: Mode::Local,
            faults: vec![Fault {
                kind: "sigstop".to_owned(),
                target: "a".to_owned(),
                leader: true,
                restarted_in_place: false,
                start: at(10),
                end: at(16),
                round_trip_ms: None,
            }],
            verdict: Verdict::default(),
            lateness: Percentiles::default(),
            failover: Percentiles::default(),
            catch_ups: Vec::new(),
            convergence_ms: Some(0.0),
            burst_ms: 20.0,
            lateness_bound_ms: 6000.0,
            convergence_bound_ms: 6000.0,
            problems: Vec::new(),
            holdings: vec![holding(0, "a"), holding(14, "b"), holding(20, "a")],
            triggers: vec![(at(2), 5.0), (at(12), 7000.0), (at(14), 300.0)],
        };
        let svg = svg(&report);
        assert_eq!(svg.matches(r##"fill="#4a90d9""##).count(), 3, "{svg}");
        assert_eq!(svg.matches("<title>sigstop a</title>").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(
            svg.matches(r##"fill="#d0021b"/>"##).count(),
            1,
            "one beyond the bound"
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }
}
