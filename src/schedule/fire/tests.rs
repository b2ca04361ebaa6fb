use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

use crate::schedule::Cron;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn cron(expression: &str) -> Cron {
    Cron::parse(expression, None).unwrap()
}

fn next_n(expression: &str, after: &str, n: usize) -> Vec<String> {
    let c = cron(expression);
    let mut t = at(after);
    (0..n)
        .map(|_| {
            t = c.next_after(t).unwrap();
            t.to_string()
        })
        .collect()
}

/// (expression, after, expected next fires in UTC)
const TABLE: &[(&str, &str, &[&str])] = &[
    // No DST: Asia/Shanghai is UTC+8 all year.
    (
        "CRON_TZ=Asia/Shanghai 0 0 8 * * *",
        "2026-11-29T00:00:00Z",
        &["2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"],
    ),
    // America/New_York spring forward 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z).
    (
        "CRON_TZ=America/New_York 0 30 2 * * *",
        "2026-03-07T00:00:00Z",
        &[
            "2026-03-07T07:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-09T06:30:00Z",
        ],
    ),
    (
        "CRON_TZ=America/New_York 0 */30 * * * *",
        "2026-03-08T06:00:00Z",
        &[
            "2026-03-08T06:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:30:00Z",
        ],
    ),
    // America/New_York fall back 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z).
    (
        "CRON_TZ=America/New_York 0 30 1 * * *",
        "2026-10-31T12:00:00Z",
        &["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
    ),
    (
        "CRON_TZ=America/New_York 0 */30 * * * *",
        "2026-11-01T04:59:59Z",
        &[
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T06:30:00Z",
            "2026-11-01T07:00:00Z",
        ],
    ),
    // Europe/London: gap 01:00-02:00 on 2026-03-29, repeat 01:00-02:00 on 2026-10-25.
    (
        "CRON_TZ=Europe/London 0 30 1 * * *",
        "2026-03-28T12:00:00Z",
        &["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],
    ),
    (
        "CRON_TZ=Europe/London 0 30 1 * * *",
        "2026-10-24T12:00:00Z",
        &["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
    ),
    // Australia/Lord_Howe, 30-minute DST: gap 02:00-02:30 on 2026-10-04 (+10:30 -> +11).
    (
        "CRON_TZ=Australia/Lord_Howe 0 15 2 * * *",
        "2026-10-02T12:00:00Z",
        &[
            "2026-10-02T15:45:00Z",
            "2026-10-03T15:30:00Z",
            "2026-10-04T15:15:00Z",
        ],
    ),
    // ... and repeat 01:30-02:00 on 2026-04-05 (+11 -> +10:30 at 15:00Z).
    (
        "CRON_TZ=Australia/Lord_Howe 0 45 1 * * *",
        "2026-04-04T00:00:00Z",
        &["2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"],
    ),
    (
        "CRON_TZ=Australia/Lord_Howe 0 */15 * * * *",
        "2026-04-04T14:29:59Z",
        &[
            "2026-04-04T14:30:00Z",
            "2026-04-04T14:45:00Z",
            "2026-04-04T15:00:00Z",
            "2026-04-04T15:15:00Z",
            "2026-04-04T15:30:00Z",
        ],
    ),
    // Pacific/Chatham (+12:45/+13:45): gap 02:45-03:45 on 2026-09-27 (14:00Z on the 26th).
    (
        "CRON_TZ=Pacific/Chatham 0 0 3 * * *",
        "2026-09-25T00:00:00Z",
        &[
            "2026-09-25T14:15:00Z",
            "2026-09-26T14:00:00Z",
            "2026-09-27T13:15:00Z",
        ],
    ),
    // ... and repeat 02:45-03:45 on 2026-04-05 (14:00Z on the 4th).
    (
        "CRON_TZ=Pacific/Chatham 0 0 3 * * *",
        "2026-04-03T00:00:00Z",
        &[
            "2026-04-03T13:15:00Z",
            "2026-04-04T13:15:00Z",
            "2026-04-05T14:15:00Z",
        ],
    ),
    // 29 February and year ends.
    (
        "TZ=UTC 0 0 12 29 2 *",
        "2026-01-01T00:00:00Z",
        &["2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"],
    ),
    (
        "TZ=UTC 59 59 23 31 12 *",
        "2026-12-31T23:59:59Z",
        &["2027-12-31T23:59:59Z"],
    ),
    (
        "CRON_TZ=Asia/Shanghai @yearly",
        "2026-12-31T15:59:59Z",
        &["2026-12-31T16:00:00Z", "2027-12-31T16:00:00Z"],
    ),
    // Day-of-month OR day-of-week when both are restricted.
    (
        "TZ=UTC 0 0 0 13 * FRI",
        "2026-11-01T00:00:00Z",
        &[
            "2026-11-06T00:00:00Z",
            "2026-11-13T00:00:00Z",
            "2026-11-20T00:00:00Z",
        ],
    ),
];

#[test]
fn fire_times_follow_robfig_and_the_dst_policy() {
    for (expression, after, expected) in TABLE {
        assert_eq!(
            next_n(expression, after, expected.len()),
            *expected,
            "{expression} after {after}"
        );
    }
}

#[test]
fn latest_fire_is_the_mirror_of_next_fire() {
    for (expression, after, expected) in TABLE {
        let c = cron(expression);
        let mut previous = None;
        for fire in expected.iter().map(|f| at(f)) {
            let floor = fire - SignedDuration::from_hours(24 * 366 * 5);
            assert_eq!(
                c.latest_at_or_before(fire, floor),
                Some(fire),
                "{expression} at {fire}"
            );
            let just_before = fire - SignedDuration::from_secs(1);
            let got = c.latest_at_or_before(just_before, floor);
            if let Some(previous) = previous {
                assert_eq!(got, Some(previous), "{expression} before {fire}");
            } else {
                assert!(
                    got.is_none_or(|g| g <= at(after)),
                    "{expression} before {fire}"
                );
            }
            previous = Some(fire);
        }
    }
}

#[test]
fn a_gap_fire_happens_once_even_when_several_times_fall_in_the_gap() {
    let got = next_n(
        "CRON_TZ=America/New_York 0 0,15,30 2 * * *",
        "2026-03-08T06:00:00Z",
        2,
    );
    assert_eq!(got, ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"]);
}

#[test]
fn every_fires_on_a_lattice_through_its_anchor() {
    let c = cron("TZ=UTC @every 90s").anchored_at(at("2026-01-01T00:00:00Z").as_second());
    assert_eq!(
        c.next_after(at("2026-01-01T00:00:00Z")),
        Some(at("2026-01-01T00:01:30Z"))
    );
    assert_eq!(
        c.next_after(at("2026-01-01T00:01:29.9Z")),
        Some(at("2026-01-01T00:01:30Z"))
    );
    assert_eq!(
        c.next_after(at("2025-12-31T23:59:00Z")),
        Some(at("2026-01-01T00:00:00Z"))
    );
    let floor = at("2025-01-01T00:00:00Z");
    assert_eq!(
        c.latest_at_or_before(at("2026-01-01T00:02:59Z"), floor),
        Some(at("2026-01-01T00:01:30Z"))
    );
}

#[test]
fn lookback_floor_hides_older_fires() {
    let c = cron("TZ=UTC 0 0 0 1 1 *");
    assert_eq!(
        c.latest_at_or_before(at("2026-06-01T00:00:00Z"), at("2026-02-01T00:00:00Z")),
        None
    );
    assert_eq!(
        c.latest_at_or_before(at("2026-06-01T00:00:00Z"), at("2026-01-01T00:00:00Z")),
        Some(at("2026-01-01T00:00:00Z"))
    );
}

#[test]
fn sub_second_inputs_round_like_robfig() {
    let c = cron("TZ=UTC * * * * * *");
    assert_eq!(
        c.next_after(at("2026-01-01T00:00:00.5Z")),
        Some(at("2026-01-01T00:00:01Z"))
    );
    assert_eq!(
        c.next_after(at("2026-01-01T00:00:00Z")),
        Some(at("2026-01-01T00:00:01Z"))
    );
    assert_eq!(
        c.next_after(at("1969-12-31T23:59:59.5Z")),
        Some(at("1970-01-01T00:00:00Z"))
    );
}

#[test]
fn fires_between_is_bounded_and_ordered() {
    let c = cron("CRON_TZ=Europe/London 0 0 * * * *");
    let fires = c.fires_between(at("2026-10-24T23:30:00Z"), at("2026-10-25T03:00:00Z"), 100);
    let hours: Vec<String> = fires.iter().map(|t| t.to_string()).collect();
    assert_eq!(
        hours,
        [
            "2026-10-25T00:00:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00Z",
            "2026-10-25T03:00:00Z"
        ]
    );
    assert_eq!(
        c.fires_between(at("2026-01-01T00:00:00Z"), at("2027-01-01T00:00:00Z"), 7)
            .len(),
        7
    );
}

fn expressions() -> impl Strategy<Value = String> {
    let zone = prop::sample::select(vec![
        "UTC",
        "America/New_York",
        "Europe/London",
        "Australia/Lord_Howe",
        "Pacific/Chatham",
        "Asia/Shanghai",
        "America/St_Johns",
    ]);
    let seconds = prop::sample::select(vec!["0", "*/7", "30", "0,30", "*"]);
    let minutes = prop::sample::select(vec!["0", "*/15", "30", "5/20", "*", "0-10"]);
    let hours = prop::sample::select(vec!["0", "1", "2", "3", "*/2", "*", "1-3"]);
    let doms = prop::sample::select(vec!["*", "1", "15,31", "29", "?"]);
    let months = prop::sample::select(vec!["*", "3", "3,10,11", "FEB", "*/4"]);
    let dows = prop::sample::select(vec!["*", "SUN", "1-5", "?"]);
    (zone, seconds, minutes, hours, doms, months, dows)
        .prop_map(|(z, s, m, h, d, mo, w)| format!("CRON_TZ={z} {s} {m} {h} {d} {mo} {w}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn next_is_strictly_later_and_increasing(
        expression in expressions(),
        start in 1_700_000_000i64..1_900_000_000,
    ) {
        let Ok(c) = Cron::parse(&expression, None) else { return Ok(()) };
        let mut t = Timestamp::from_second(start).unwrap();
        for _ in 0..20 {
            let Some(next) = c.next_after(t) else { break };
            prop_assert!(next > t, "{} after {}: {}", expression, t, next);
            t = next;
        }
    }

    #[test]
    fn latest_and_next_bracket_every_instant(
        expression in expressions(),
        start in 1_700_000_000i64..1_900_000_000,
    ) {
        let Ok(c) = Cron::parse(&expression, None) else { return Ok(()) };
        let t = Timestamp::from_second(start).unwrap();
        let floor = t - SignedDuration::from_hours(24 * 366 * 6);
        if let Some(latest) = c.latest_at_or_before(t, floor) {
            prop_assert!(latest <= t);
            // No fire lies strictly between the latest one and t.
            let after_latest = c.next_after(latest).unwrap();
            prop_assert!(after_latest > t, "{} latest {} next {} t {}", expression, latest, after_latest, t);
        }
    }

    #[test]
    fn parsing_never_panics(text in "\\PC{0,40}") {
        let _ = Cron::parse(&text, None);
        let _ = Cron::parse(&text, Some("UTC"));
    }

    #[test]
    fn parsing_any_string_and_zone_never_panics(text in any::<String>(), zone in any::<String>()) {
        let _ = Cron::parse(&text, None);
        let _ = Cron::parse(&text, Some(&zone));
        let _ = Cron::parse(&format!("CRON_TZ={zone} {text}"), None);
    }

    #[test]
    fn parsing_cron_like_text_never_panics(text in "(CRON_TZ=|TZ=)?[A-Za-z_/]{0,12} ?[-0-9*?/,#LW@ a-z]{0,40}") {
        let _ = Cron::parse(&text, None);
    }
}

#[test]
fn the_ends_of_time_give_none_not_a_panic() {
    for expression in [
        "CRON_TZ=America/New_York 0 30 2 * * *",
        "TZ=UTC * * * * * *",
        "TZ=UTC @every 1h",
        "CRON_TZ=Australia/Lord_Howe 0 */15 * * * *",
    ] {
        let c = cron(expression);
        assert_eq!(c.next_after(Timestamp::MAX), None, "{expression}");
        assert!(c.next_after(Timestamp::MIN).is_some(), "{expression}");
        let first = c.latest_at_or_before(Timestamp::MIN, Timestamp::MIN);
        assert!(
            first.is_none_or(|t| t == Timestamp::MIN),
            "{expression}: {first:?}"
        );
        let late = c.latest_at_or_before(
            Timestamp::MAX,
            Timestamp::MAX - SignedDuration::from_hours(48),
        );
        assert!(late.is_some(), "{expression}");
    }
}

#[test]
fn every_descriptor_fires_like_its_expansion() {
    let cases = [
        ("@yearly", "2027-01-01T00:00:00Z"),
        ("@annually", "2027-01-01T00:00:00Z"),
        ("@monthly", "2026-12-01T00:00:00Z"),
        ("@weekly", "2026-12-06T00:00:00Z"),
        ("@daily", "2026-11-30T00:00:00Z"),
        ("@midnight", "2026-11-30T00:00:00Z"),
        ("@hourly", "2026-11-29T13:00:00Z"),
    ];
    for (descriptor, expected) in cases {
        let c = cron(&format!("TZ=UTC {descriptor}"));
        assert_eq!(
            c.next_after(at("2026-11-29T12:30:00Z")),
            Some(at(expected)),
            "{descriptor}"
        );
    }
}
