//! A terminal step chart of desiredReplicas over a window: one column per time slice, the
//! column's height the highest level in effect during that slice.

use std::fmt::Write;

use jiff::{Timestamp, tz::TimeZone};

/// Rows of the chart.
const HEIGHT: i64 = 10;

/// Draws `columns` (the peak level per slice, `None` before any rule fired) as bars; the
/// x axis marks the midnights of `zone` between `from` and `until`.
pub fn render(
    columns: &[Option<i32>],
    from: Timestamp,
    until: Timestamp,
    zone: &TimeZone,
) -> String {
    let top = columns.iter().flatten().copied().max().unwrap_or(0).max(1);
    let mut out = String::new();
    for row in (1..=HEIGHT).rev() {
        // A column fills this row when its value exceeds the row's lower edge, so any
        // level above zero shows at least one row.
        let lower_edge = i64::from(top) * (row - 1);
        let label = if row == HEIGHT || row % 3 == 1 {
            // The row's upper edge, rounded up.
            ((i64::from(top) * row + HEIGHT - 1) / HEIGHT).to_string()
        } else {
            String::new()
        };
        let bars: String = columns
            .iter()
            .map(|value| match value {
                Some(v) if i64::from(*v) * HEIGHT > lower_edge => '█',
                _ => ' ',
            })
            .collect();
        let _ = writeln!(out, "{}", format!("{label:>6} │{bars}").trim_end());
    }
    let _ = writeln!(out, "{:>6} └{}", 0, "─".repeat(columns.len()));
    out.push_str(&day_labels(columns.len(), from, until, zone));
    out
}

/// Day names under the columns where a new local day starts.
fn day_labels(width: usize, from: Timestamp, until: Timestamp, zone: &TimeZone) -> String {
    let span = (until.as_second() - from.as_second()).max(1) as f64;
    let mut line: Vec<char> = vec![' '; width + 16];
    let Ok(mut day) = from.to_zoned(zone.clone()).start_of_day() else {
        return String::new();
    };
    let mut last_end = 0;
    loop {
        let Ok(next) = day.tomorrow().and_then(|d| d.start_of_day()) else {
            break;
        };
        day = next;
        if day.timestamp() >= until {
            break;
        }
        let column = ((day.timestamp().as_second() - from.as_second()) as f64 / span * width as f64)
            as usize;
        let label: Vec<char> = day.strftime("%a %d").to_string().chars().collect();
        let start = column + 8;
        if start >= last_end && start + label.len() <= line.len() {
            line[start - 1] = '^';
            line[start..start + label.len()].copy_from_slice(&label);
            last_end = start + label.len() + 1;
        }
    }
    let text: String = line.into_iter().collect();
    format!("{}\n", text.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_rise_to_their_level() {
        let from: Timestamp = "2026-11-30T00:00:00Z".parse().unwrap();
        let until: Timestamp = "2026-12-02T00:00:00Z".parse().unwrap();
        let chart = render(
            &[None, Some(5), Some(10), Some(1), Some(0)],
            from,
            until,
            &TimeZone::UTC,
        );
        let rows: Vec<&str> = chart.lines().collect();
        assert_eq!(rows[0], "    10 │  █");
        assert_eq!(rows[5], "       │ ██");
        assert_eq!(rows[9], "     1 │ ███");
        assert_eq!(rows[10], "     0 └─────");
        assert!(rows[11].contains("Tue 01"), "{chart}");
    }
}
