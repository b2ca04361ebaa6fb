use std::sync::Arc;

use jiff::Timestamp;
use jiff::civil::{Date, date};
use proptest::prelude::*;

use super::*;
use crate::schedule::{Cron, Rule, Tide};

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn calendar(zone: &str, days: Vec<Day>) -> Arc<Calendar> {
    Arc::new(Calendar::new("test", Zone::named(zone).unwrap(), days))
}

fn rule(cron: &str, skip: Vec<Arc<Calendar>>, only: Vec<Arc<Calendar>>) -> Rule {
    Rule {
        name: "r".into(),
        cron: Cron::parse(cron, None).unwrap(),
        replicas: 1,
        suspended: false,
        days: Days::new(skip, only),
    }
}

fn next(rule: &Rule, after: &str) -> Option<String> {
    rule.next_after(at(after)).map(|t| t.to_string())
}

fn latest(rule: &Rule, at_or_before: &str) -> Option<String> {
    let end = at(at_or_before);
    rule.latest_at_or_before(end, end - SignedDuration::from_hours(24 * 366))
        .map(|t| t.to_string())
}

#[test]
fn yearly_days_skip_across_the_year_end() {
    let holidays = calendar(
        "Europe/London",
        vec![
            Day::Yearly { month: 12, day: 31 },
            Day::Yearly { month: 1, day: 1 },
        ],
    );
    let office = rule("CRON_TZ=Europe/London 0 0 9 * * *", vec![holidays], vec![]);
    assert_eq!(
        next(&office, "2026-12-30T12:00:00Z").as_deref(),
        Some("2027-01-02T09:00:00Z")
    );
    assert_eq!(
        latest(&office, "2027-01-01T23:00:00Z").as_deref(),
        Some("2026-12-30T09:00:00Z")
    );
    // A year later, the same dates again.
    assert_eq!(
        next(&office, "2027-12-30T12:00:00Z").as_deref(),
        Some("2028-01-02T09:00:00Z")
    );
}

#[test]
fn a_range_is_skipped_whole_with_both_ends() {
    let closed = calendar(
        "Europe/Berlin",
        vec![Day::Range {
            first: date(2026, 12, 24),
            last: date(2027, 1, 6),
        }],
    );
    let office = rule("CRON_TZ=Europe/Berlin 0 0 8 * * *", vec![closed], vec![]);
    assert_eq!(
        next(&office, "2026-12-23T08:00:00Z").as_deref(),
        Some("2027-01-07T07:00:00Z")
    );
    assert_eq!(
        latest(&office, "2027-01-06T20:00:00Z").as_deref(),
        Some("2026-12-23T07:00:00Z")
    );
}

#[test]
fn the_day_is_the_calendars_not_the_rules() {
    // 17:00 UTC is 01:00 the next day in Shanghai: 1 October there is 30 September's
    // 17:00 UTC.
    let golden_week = calendar("Asia/Shanghai", vec![Day::Date(date(2026, 10, 1))]);
    let evening = rule("CRON_TZ=UTC 0 0 17 * * *", vec![golden_week], vec![]);
    assert_eq!(
        next(&evening, "2026-09-30T00:00:00Z").as_deref(),
        Some("2026-10-01T17:00:00Z")
    );
}

#[test]
fn a_dst_day_is_skipped_from_its_midnight_to_the_next() {
    // New York springs forward on 2026-03-08: the day runs 05:00Z to 04:00Z (23 hours).
    let skip = calendar("America/New_York", vec![Day::Date(date(2026, 3, 8))]);
    let hourly = rule("CRON_TZ=UTC 0 0 * * * *", vec![skip.clone()], vec![]);
    assert_eq!(
        next(&hourly, "2026-03-08T04:30:00Z").as_deref(),
        Some("2026-03-09T04:00:00Z")
    );
    assert_eq!(
        latest(&hourly, "2026-03-09T03:59:59Z").as_deref(),
        Some("2026-03-08T04:00:00Z")
    );
    // Falling back on 2026-11-01: a 25-hour day, 04:00Z to 05:00Z the next day.
    let fall = calendar("America/New_York", vec![Day::Date(date(2026, 11, 1))]);
    let hourly = rule("CRON_TZ=UTC 0 0 * * * *", vec![fall], vec![]);
    assert_eq!(
        next(&hourly, "2026-11-01T03:00:00Z").as_deref(),
        Some("2026-11-02T05:00:00Z")
    );
    // The rule's own DST policy still holds on allowed days: 02:30 does not exist on
    // 8 March, so a rule skipping 7 March fires right after the gap.
    let saturday = calendar("America/New_York", vec![Day::Date(date(2026, 3, 7))]);
    let fixed = rule(
        "CRON_TZ=America/New_York 0 30 2 * * *",
        vec![saturday],
        vec![],
    );
    assert_eq!(
        next(&fixed, "2026-03-06T12:00:00Z").as_deref(),
        Some("2026-03-08T07:00:00Z")
    );
}

#[test]
fn only_days_fire_on_their_days_alone() {
    let promotions = calendar(
        "Asia/Shanghai",
        vec![
            Day::Yearly { month: 11, day: 11 },
            Day::Yearly { month: 6, day: 18 },
        ],
    );
    let promo = rule(
        "CRON_TZ=Asia/Shanghai 0 0 20 * * *",
        vec![],
        vec![promotions],
    );
    assert_eq!(
        next(&promo, "2026-11-12T00:00:00Z").as_deref(),
        Some("2027-06-18T12:00:00Z")
    );
    assert_eq!(
        latest(&promo, "2027-06-01T00:00:00Z").as_deref(),
        Some("2026-11-11T12:00:00Z")
    );
}

#[test]
fn skip_wins_where_only_days_and_skip_days_meet() {
    let promotions = calendar(
        "Asia/Shanghai",
        vec![Day::Date(date(2026, 11, 11)), Day::Date(date(2026, 12, 12))],
    );
    let freeze = calendar("Asia/Shanghai", vec![Day::Date(date(2026, 12, 12))]);
    let promo = rule(
        "CRON_TZ=Asia/Shanghai 0 0 20 * * *",
        vec![freeze],
        vec![promotions],
    );
    assert_eq!(
        next(&promo, "2026-11-01T00:00:00Z").as_deref(),
        Some("2026-11-11T12:00:00Z")
    );
    assert_eq!(next(&promo, "2026-11-11T12:00:00Z"), None);
    assert_eq!(
        promo
            .skipped_between(at("2026-11-01T00:00:00Z"), at("2026-11-13T00:00:00Z"), 100)
            .len(),
        11,
        "every day of the window but 11 November is refused"
    );
}

#[test]
fn the_29th_of_february_recurs_in_leap_years_only() {
    let leap = calendar("UTC", vec![Day::Yearly { month: 2, day: 29 }]);
    let daily = rule("CRON_TZ=UTC 0 0 12 * * *", vec![], vec![leap]);
    assert_eq!(
        next(&daily, "2026-01-01T00:00:00Z").as_deref(),
        Some("2028-02-29T12:00:00Z")
    );
}

#[test]
fn a_calendar_without_future_days_ends_the_rule() {
    let past = calendar("UTC", vec![Day::Date(date(2026, 1, 1))]);
    let daily = rule("CRON_TZ=UTC 0 0 12 * * *", vec![], vec![past]);
    assert_eq!(next(&daily, "2026-01-01T12:00:00Z"), None);
    assert_eq!(
        latest(&daily, "2026-06-01T00:00:00Z").as_deref(),
        Some("2026-01-01T12:00:00Z")
    );
    let empty = calendar("UTC", vec![]);
    let never = rule("CRON_TZ=UTC * * * * * *", vec![], vec![empty]);
    assert_eq!(next(&never, "2026-01-01T00:00:00Z"), None);
}

#[test]
fn a_skipped_instant_neither_sets_the_level_nor_is_superseded() {
    let holiday = calendar("Europe/London", vec![Day::Date(date(2026, 12, 25))]);
    let office = Rule {
        name: "office".into(),
        replicas: 10,
        ..rule("CRON_TZ=Europe/London 0 0 9 * * *", vec![holiday], vec![])
    };
    let night = Rule {
        name: "night".into(),
        replicas: 2,
        ..rule("CRON_TZ=Europe/London 0 0 18 * * *", vec![], vec![])
    };
    let tide = Tide::new(vec![office, night]);
    let level = tide.level_at(at("2026-12-25T12:00:00Z")).unwrap();
    assert_eq!((level.rule.as_str(), level.replicas), ("night", 2));
    // From the 24th 18:00 to the 26th 09:00: only the 25th's 18:00 lies in between.
    assert_eq!(
        tide.superseded_between(at("2026-12-24T18:00:00Z"), at("2026-12-26T09:00:00Z")),
        1
    );
    let next = tide.next_after(at("2026-12-24T18:00:00Z")).unwrap();
    assert_eq!(next.schedule_time, at("2026-12-25T18:00:00Z"));
}

/// Dates of 2026–2027 and yearly dates, as generated entries.
fn day_strategy() -> impl Strategy<Value = Day> {
    let date = (0i64..730).prop_map(|offset| date(2026, 1, 1).checked_add(offset.days()).unwrap());
    prop_oneof![
        date.clone().prop_map(Day::Date),
        (date, 0i64..20).prop_map(|(first, len)| Day::Range {
            first,
            last: first.checked_add(len.days()).unwrap(),
        }),
        (1i8..=12, 1i8..=28).prop_map(|(month, day)| Day::Yearly { month, day }),
        Just(Day::Yearly { month: 2, day: 29 }),
        Just(Day::Yearly { month: 12, day: 31 }),
    ]
}

fn calendar_strategy() -> impl Strategy<Value = Arc<Calendar>> {
    (
        prop::sample::select(vec![
            "UTC",
            "Asia/Shanghai",
            "America/New_York",
            "Australia/Lord_Howe",
        ]),
        prop::collection::vec(day_strategy(), 0..12),
    )
        .prop_map(|(zone, days)| calendar(zone, days))
}

/// What the rule should do, the slow way: every cron instant, one by one.
fn first_allowed_slowly(rule: &Rule, after: Timestamp, until: Timestamp) -> Option<Timestamp> {
    let mut cursor = after;
    while let Some(fire) = rule.cron.next_after(cursor).filter(|f| *f <= until) {
        if rule.days.allows(fire) {
            return Some(fire);
        }
        cursor = fire;
    }
    None
}

fn last_allowed_slowly(rule: &Rule, end: Timestamp, floor: Timestamp) -> Option<Timestamp> {
    let mut cursor = end;
    while let Some(fire) = rule.cron.latest_at_or_before(cursor, floor) {
        if rule.days.allows(fire) {
            return Some(fire);
        }
        cursor = fire - SignedDuration::from_secs(1);
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn jumping_over_refused_days_finds_what_walking_finds(
        skip in prop::collection::vec(calendar_strategy(), 0..3),
        only in prop::collection::vec(calendar_strategy(), 0..2),
        cron in prop::sample::select(vec![
            "CRON_TZ=UTC 0 0 * * * *",
            "CRON_TZ=Asia/Shanghai 0 30 8 * * *",
            "CRON_TZ=America/New_York 0 30 2 * * *",
            "CRON_TZ=Europe/London 0 0 9 * * 1-5",
        ]),
        start in 0i64..(730 * 86_400),
    ) {
        let rule = rule(cron, skip, only);
        let after = at("2026-01-01T00:00:00Z") + SignedDuration::from_secs(start);
        // Both ways are compared within 90 days (walking further is slow); the fast way
        // must agree wherever the slow way finds an instant.
        let until = after + SignedDuration::from_hours(24 * 90);
        let slow = first_allowed_slowly(&rule, after, until);
        let fast = rule.next_after(after).filter(|t| *t <= until);
        prop_assert_eq!(fast, slow);
        let floor = after - SignedDuration::from_hours(24 * 90);
        prop_assert_eq!(
            rule.latest_at_or_before(after, floor),
            last_allowed_slowly(&rule, after, floor)
        );
    }
}

#[test]
fn overlapping_and_adjacent_entries_merge_into_one_span() {
    let c = calendar(
        "UTC",
        vec![
            Day::Range {
                first: date(2026, 1, 10),
                last: date(2026, 1, 20),
            },
            Day::Date(date(2026, 1, 21)),
            Day::Range {
                first: date(2026, 1, 5),
                last: date(2026, 1, 12),
            },
            Day::Date(date(2026, 1, 30)),
            Day::Date(date(2026, 1, 30)),
        ],
    );
    assert_eq!(
        c.spans,
        vec![
            (date(2026, 1, 5), date(2026, 1, 21)),
            (date(2026, 1, 30), date(2026, 1, 30))
        ]
    );
    assert_eq!(
        c.first_free_after(date(2026, 1, 4), date(2030, 1, 1)),
        Some(date(2026, 1, 22))
    );
    assert_eq!(
        c.last_free_before(date(2026, 1, 21), date(2020, 1, 1)),
        Some(date(2026, 1, 4))
    );
    assert_eq!(
        c.next_date_after(date(2026, 1, 21)),
        Some(date(2026, 1, 30))
    );
    assert_eq!(
        c.last_date_before(date(2026, 1, 30)),
        Some(date(2026, 1, 21))
    );
}

#[test]
fn free_days_are_searched_within_the_bounds_only() {
    let always = calendar(
        "UTC",
        vec![Day::Range {
            first: date(2020, 1, 1),
            last: date(2040, 1, 1),
        }],
    );
    assert_eq!(
        always.first_free_after(date(2026, 1, 1), date(2031, 1, 1)),
        None
    );
    assert_eq!(
        always.last_free_before(date(2026, 1, 1), date(2025, 1, 1)),
        None
    );
    // Yearly days on every day of the year leave no free day at all.
    let every_day: Vec<Day> = (0..366)
        .map(|offset| {
            let d = date(2024, 1, 1).checked_add(offset.days()).unwrap();
            Day::Yearly {
                month: d.month(),
                day: d.day(),
            }
        })
        .collect();
    let yearly = calendar("UTC", every_day);
    assert_eq!(
        yearly.first_free_after(date(2026, 1, 1), date(2031, 1, 1)),
        None
    );
    let office = rule("CRON_TZ=UTC 0 0 9 * * *", vec![yearly], vec![]);
    assert_eq!(next(&office, "2026-06-01T00:00:00Z"), None);
    assert_eq!(latest(&office, "2026-06-01T00:00:00Z"), None);
}

#[test]
fn a_date_is_read_in_the_calendars_zone() {
    let c = calendar("Pacific/Kiritimati", vec![]);
    assert_eq!(
        c.date_of(at("2026-12-31T10:00:00Z")),
        Date::new(2027, 1, 1).unwrap()
    );
}

#[test]
fn a_day_without_a_midnight_starts_at_its_first_instant() {
    // Havana springs forward at midnight: 2026-03-08 starts at 01:00 CDT (05:00Z).
    let havana = calendar("America/Havana", vec![Day::Date(date(2026, 3, 8))]);
    assert_eq!(
        havana.start_of(date(2026, 3, 8)),
        Some(at("2026-03-08T05:00:00Z"))
    );
    let hourly = rule("CRON_TZ=UTC 0 30 * * * *", vec![havana], vec![]);
    // 04:30Z is still 7 March (23:30 CST); 05:30Z is the holiday.
    assert_eq!(
        next(&hourly, "2026-03-08T04:00:00Z").as_deref(),
        Some("2026-03-08T04:30:00Z")
    );
    assert_eq!(
        next(&hourly, "2026-03-08T04:30:00Z").as_deref(),
        Some("2026-03-09T04:30:00Z")
    );
}
