use super::*;
use crate::api::{NoCalendars, TidalScheduler};

fn args(name: &str) -> ImportArgs {
    ImportArgs {
        file: "holidays.ics".into(),
        name: name.into(),
        namespace: Some("support".into()),
        cluster: false,
        time_zone: None,
    }
}

fn calendar(events: &str) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nX-WR-TIMEZONE:Europe/London\r\n{events}END:VCALENDAR\r\n"
    )
}

fn imported(text: &str) -> TidalCalendar {
    serde_saphyr::from_str(&import(text, &args("holidays")).expect("imported")).unwrap()
}

/// `(date, from, to, yearly)` of an entry.
type Entry<'a> = (
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
);

fn days(calendar: &TidalCalendar) -> Vec<Entry<'_>> {
    calendar
        .spec
        .days
        .iter()
        .map(|d| {
            (
                d.date.as_deref(),
                d.from.as_deref(),
                d.to.as_deref(),
                d.yearly.as_deref(),
            )
        })
        .collect()
}

#[test]
fn govuk_bank_holidays_become_dated_days() {
    let text = include_str!("../../../deploy/examples/calendars/england-and-wales.ics");
    let mut args = args("uk-bank-holidays");
    args.time_zone = Some("Europe/London".into());
    let manifest = import(text, &args).expect("the GOV.UK file imports");
    let calendar: TidalCalendar = serde_saphyr::from_str(&manifest).unwrap();
    assert_eq!(calendar.spec.time_zone, "Europe/London");
    assert_eq!(calendar.spec.days.len(), 65);
    let first = &calendar.spec.days[0];
    assert_eq!(first.date.as_deref(), Some("2012-01-02"));
    assert_eq!(first.name.as_deref(), Some("New Year’s Day"));
    let last = calendar.spec.days.last().unwrap();
    assert_eq!(
        (last.date.as_deref(), last.name.as_deref()),
        (Some("2019-12-26"), Some("Boxing Day"))
    );
    // What the controller would make of it: a valid calendar.
    calendar.spec.to_calendar("uk").expect("valid");
    assert_eq!(
        calendar.metadata.annotations.unwrap()[IMPORTED_FROM],
        "holidays.ics"
    );
}

#[test]
fn a_multi_day_event_is_a_range_with_an_exclusive_end() {
    let calendar = imported(&calendar(
        "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261224\r\nDTEND;VALUE=DATE:20270102\r\nSUMMARY:Closed\\, winter\r\nEND:VEVENT\r\n\
         BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20260601\r\nDURATION:P1W\r\nSUMMARY:Week\r\nEND:VEVENT\r\n",
    ));
    assert_eq!(
        days(&calendar),
        [
            (None, Some("2026-12-24"), Some("2027-01-01"), None),
            (None, Some("2026-06-01"), Some("2026-06-07"), None),
        ]
    );
    assert_eq!(
        calendar.spec.days[0].name.as_deref(),
        Some("Closed, winter")
    );
    assert_eq!(
        calendar.spec.time_zone, "Europe/London",
        "from X-WR-TIMEZONE"
    );
    assert_eq!(calendar.metadata.namespace.as_deref(), Some("support"));
}

#[test]
fn yearly_rules_become_yearly_days_or_their_dates() {
    let calendar = imported(&calendar(
        "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20201225\r\nDTEND;VALUE=DATE:20201227\r\nRRULE:FREQ=YEARLY\r\nSUMMARY:Christmas\r\nEND:VEVENT\r\n\
         BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20260501\r\nRRULE:FREQ=YEARLY;BYMONTH=5;BYMONTHDAY=1;COUNT=2\r\nSUMMARY:May Day\r\nEND:VEVENT\r\n\
         BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20280229\r\nRRULE:FREQ=YEARLY;UNTIL=20330101T000000Z\r\nSUMMARY:Leap\r\nEND:VEVENT\r\n\
         BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20260101\r\nSTATUS:CANCELLED\r\nEND:VEVENT\r\n",
    ));
    assert_eq!(
        days(&calendar),
        [
            (None, None, None, Some("12-25")),
            (None, None, None, Some("12-26")),
            (Some("2026-05-01"), None, None, None),
            (Some("2027-05-01"), None, None, None),
            (Some("2028-02-29"), None, None, None),
            (Some("2032-02-29"), None, None, None),
        ]
    );
}

#[test]
fn a_cluster_calendar_has_no_namespace() {
    let mut args = args("org-holidays");
    args.namespace = None;
    args.cluster = true;
    let manifest = import(
        &calendar("BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\nEND:VEVENT\r\n"),
        &args,
    )
    .unwrap();
    let calendar: ClusterTidalCalendar = serde_saphyr::from_str(&manifest).unwrap();
    assert_eq!(calendar.metadata.namespace, None);
    assert!(
        manifest.contains("kind: ClusterTidalCalendar"),
        "{manifest}"
    );
    assert_eq!(calendar.spec.calendar.days.len(), 1);
}

#[test]
fn bad_input_is_refused_naming_the_line() {
    let event = |body: &str| calendar(&format!("BEGIN:VEVENT\r\n{body}END:VEVENT\r\n"));
    let cases = [
        (
            event("DTSTART:20261225T090000Z\r\n"),
            "line 6: DTSTART 20261225T090000Z is not an all-day date",
        ),
        (
            event("DTSTART;VALUE=DATE:20261225\r\nDTEND;VALUE=DATE:20261225\r\n"),
            "line 7: DTEND 20261225 is not after DTSTART 20261225",
        ),
        (
            event("DTSTART;VALUE=DATE:20261126\r\nRRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH\r\n"),
            "line 7: RRULE FREQ=YEARLY;BYMONTH=11;BYDAY=4TH: BYDAY",
        ),
        (
            event("DTSTART;VALUE=DATE:20261126\r\nRRULE:FREQ=MONTHLY\r\n"),
            "line 7: RRULE FREQ=MONTHLY: only FREQ=YEARLY",
        ),
        (
            event("DTSTART;VALUE=DATE:20261126\r\nEXDATE;VALUE=DATE:20271126\r\n"),
            "line 7: EXDATE is not supported",
        ),
        (
            event("SUMMARY:no start\r\n"),
            "line 5: an event without DTSTART",
        ),
        (
            event("DTSTART;VALUE=DATE:20261225\r\nnonsense\r\n"),
            "line 7: `nonsense` is not a property",
        ),
        (
            event("DTSTART;VALUE=DATE:20261225\r\nthis line has no colon\r\n"),
            "line 7: `this line has no colon` is not a property (NAME:VALUE): a name \
             (letters, digits and '-') must be followed by ';' or ':'",
        ),
        (
            event("DTSTART;VALUE=DATE:20261225\r\nSUMMARY;LANGUAGE=en\r\n"),
            "line 7: `SUMMARY;LANGUAGE=en` is not a property (NAME:VALUE): its parameters",
        ),
        (
            event("DTSTART;VALUE=DATE:20261225\r\n: no name\r\n"),
            "line 7: `: no name` is not a property (NAME:VALUE): it does not start with a name",
        ),
        (
            event("DTSTART;VALUE=DATE:20261225\r\nSUMMARY;X-A=\"a:b\"\r\n"),
            "line 7: `SUMMARY;X-A=\"a:b\"` is not a property",
        ),
        (
            event("SUMMARY:fine\r\n folded\r\nDTSTART;VALUE=DATE:20261225\r\nbroken\r\n"),
            "line 9: `broken` is not a property",
        ),
        (
            calendar("BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\n"),
            "line 7: not valid iCalendar at `END:VCALENDAR`",
        ),
        ("just text".to_owned(), "line 1: not valid iCalendar"),
    ];
    for (text, expected) in cases {
        let error = import(&text, &args("x")).expect_err(expected);
        assert!(error.contains(expected), "{expected:?} not in {error:?}");
    }
}

#[test]
fn the_time_zone_comes_from_the_flag_or_the_file() {
    let text = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    let error = import(text, &args("x")).unwrap_err();
    assert!(error.contains("give --time-zone"), "{error}");
    let mut with_zone = args("x");
    with_zone.time_zone = Some("Europe/Lisbon".into());
    assert!(
        import(text, &with_zone)
            .unwrap()
            .contains("timeZone: Europe/Lisbon")
    );
    with_zone.time_zone = Some("Europe/Atlantis".into());
    let error = import(text, &with_zone).unwrap_err();
    assert!(
        error.contains("--time-zone: unknown time zone `Europe/Atlantis`"),
        "{error}"
    );
}

#[test]
fn an_imported_calendar_is_what_rules_can_skip() {
    let calendar = imported(&calendar(
        "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\nSUMMARY:Christmas Day\r\nEND:VEVENT\r\n",
    ));
    let object: TidalScheduler = serde_saphyr::from_str(
        r#"
apiVersion: scheduling.tidal.io/v1alpha1
kind: TidalScheduler
metadata: {name: desk, namespace: support}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: desk}
  triggers:
    times:
      rules:
      - name: office
        cron: "CRON_TZ=Europe/London 0 0 9 * * *"
        replicas: 5
        skipDays: [{name: holidays}]
"#,
    )
    .unwrap();
    let mut set = crate::cli::manifests::CalendarSet::default();
    set.add_namespaced(calendar);
    let valid = crate::api::validate(&object, &set, jiff::Timestamp::UNIX_EPOCH).unwrap();
    let next = valid.tide.rules()[0]
        .next_after("2026-12-24T12:00:00Z".parse().unwrap())
        .unwrap();
    assert_eq!(next.to_string(), "2026-12-26T09:00:00Z");
    assert!(crate::api::validate(&object, &NoCalendars, jiff::Timestamp::UNIX_EPOCH).is_err());
}
