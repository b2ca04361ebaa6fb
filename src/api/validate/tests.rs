use jiff::Timestamp;

use super::*;
use crate::api::{NoCalendars, TidalSchedulerSpec};

const BASE: &str = r#"
apiVersion: scheduling.tidal.io/v1alpha1
kind: TidalScheduler
metadata:
  name: frontend-tide
  namespace: production
  labels:
    elasticscaler.io/name: ecommerce-frontend
    elasticscaler.io/namespace: production
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: ecommerce-frontend
  triggers:
    times:
      rules:
      - name: morning-base
        cron: "CRON_TZ=Asia/Shanghai 0 0 8 * * *"
        replicas: 20
      - name: evening-rush
        cron: "0 0 19-21 * * *"
        timeZone: Asia/Shanghai
        replicas: 60
"#;

fn object() -> TidalScheduler {
    serde_saphyr::from_str(BASE).unwrap()
}

fn problems(edit: impl FnOnce(&mut TidalScheduler)) -> Vec<String> {
    let mut object = object();
    edit(&mut object);
    validate(&object, &NoCalendars, Timestamp::UNIX_EPOCH)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn spec(object: &mut TidalScheduler) -> &mut TidalSchedulerSpec {
    &mut object.spec
}

#[test]
fn a_valid_object_gives_its_rules_with_defaults() {
    let valid = validate(&object(), &NoCalendars, Timestamp::UNIX_EPOCH).unwrap();
    assert_eq!(valid.tide.rules().len(), 2);
    assert_eq!(valid.tide.rules()[1].cron.zone().name(), "Asia/Shanghai");
    assert!(valid.warnings.is_empty());
    assert_eq!(object().spec.history_limit, 10);
    assert_eq!(object().spec.apply, ApplyMode::Status);
}

#[test]
fn each_problem_names_its_field() {
    type Edit = Box<dyn FnOnce(&mut TidalScheduler)>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|o| spec(o).triggers.times.rules[0].cron = "0 0 8 * * *".into()),
            "spec.triggers.times.rules[0] (morning-base): no time zone: add a `CRON_TZ=<zone> ` \
             prefix or set timeZone",
        ),
        (
            Box::new(|o| spec(o).triggers.times.rules[1].time_zone = Some("Mars/Base".into())),
            "spec.triggers.times.rules[1] (evening-rush): unknown time zone `Mars/Base` (expected \
             an IANA name such as Asia/Shanghai)",
        ),
        (
            Box::new(|o| spec(o).triggers.times.rules[0].cron = "CRON_TZ=UTC 0 0 0 31 2 *".into()),
            "spec.triggers.times.rules[0] (morning-base): `CRON_TZ=UTC 0 0 0 31 2 *` can never \
             fire: no month it allows has such a day",
        ),
        (
            Box::new(|o| spec(o).target_ref.namespace = Some("payments".into())),
            "spec.targetRef.namespace: `payments` differs from the object's namespace \
             `production`: a TidalScheduler can only scale a workload in its own namespace",
        ),
        (
            Box::new(|o| spec(o).triggers.times.rules[1].name = "morning-base".into()),
            "spec.triggers.times.rules[1].name: `morning-base` is used by an earlier rule",
        ),
        (
            Box::new(|o| spec(o).triggers.times.rules[1].name = "Evening".into()),
            "spec.triggers.times.rules[1].name: `Evening` is not a DNS-1123 label (lowercase \
             letters, digits and '-', at most 63, starting and ending alphanumeric)",
        ),
        (
            Box::new(|o| spec(o).triggers.times.rules[0].replicas = -1),
            "spec.triggers.times.rules[0].replicas: -1 is negative",
        ),
        (
            Box::new(|o| spec(o).history_limit = 0),
            "spec.historyLimit: 0 is outside 1-100",
        ),
        (
            Box::new(|o| spec(o).triggers.times.rules.clear()),
            "spec.triggers.times.rules: 0 rules; between 1 and 100 are allowed",
        ),
        (
            Box::new(|o| spec(o).target_ref.kind.clear()),
            "spec.targetRef.kind: must not be empty",
        ),
    ];
    for (edit, message) in cases {
        assert_eq!(problems(edit), [message]);
    }
}

#[test]
fn target_fields_that_reach_request_paths_must_be_kubernetes_names() {
    for name in [
        "a/b",
        "..",
        "web%2Fx",
        "web?watch=1",
        "Web",
        "-web",
        "web.",
        "a..b",
    ] {
        let found = problems(|o| spec(o).target_ref.name = name.to_owned());
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        assert!(
            found[0].starts_with(&format!(
                "spec.targetRef.name: `{name}` must be a DNS-1123 subdomain"
            )),
            "{found:?}"
        );
    }
    for version in [
        "apps/../v1",
        "apps/v1/x",
        "/v1",
        "Apps/v1",
        "apps/1v",
        "v1?x",
    ] {
        let found = problems(|o| spec(o).target_ref.api_version = version.to_owned());
        assert_eq!(found.len(), 1, "{version}: {found:?}");
        assert!(
            found[0].starts_with("spec.targetRef.apiVersion:"),
            "{found:?}"
        );
    }
    let found = problems(|o| {
        spec(o).target_ref.namespace = Some("prod/../kube-system".to_owned());
    });
    assert!(
        found.iter().any(|p| p.starts_with(
            "spec.targetRef.namespace: `prod/../kube-system` must be a DNS-1123 label"
        )),
        "{found:?}"
    );
    for (version, name) in [
        ("v1", "web"),
        ("apps/v1", "web-1.prod"),
        ("example.com/v1beta1", "a"),
    ] {
        let mut object = object();
        spec(&mut object).target_ref.api_version = version.to_owned();
        spec(&mut object).target_ref.name = name.to_owned();
        assert!(
            validate(&object, &NoCalendars, Timestamp::UNIX_EPOCH).is_ok(),
            "{version} {name}"
        );
    }
}

#[test]
fn every_problem_is_reported_at_once() {
    let found = problems(|o| {
        spec(o).history_limit = 101;
        spec(o).triggers.times.rules[0].replicas = -5;
        spec(o).triggers.times.rules[1].cron = "CRON_TZ=UTC 0 0 8 * *".into();
    });
    assert_eq!(found.len(), 3, "{found:?}");
}

#[test]
fn missing_framework_labels_warn_in_status_mode_only() {
    let mut o = object();
    o.metadata.labels = None;
    let valid = validate(&o, &NoCalendars, Timestamp::UNIX_EPOCH).unwrap();
    assert_eq!(
        valid.warnings,
        [
            "metadata.labels: elasticscaler.io/name and elasticscaler.io/namespace missing: with \
          apply: Status the decision framework finds this object by these labels"
        ]
    );
    o.spec.apply = ApplyMode::Scale;
    assert!(
        validate(&o, &NoCalendars, Timestamp::UNIX_EPOCH)
            .unwrap()
            .warnings
            .is_empty()
    );
}

#[test]
fn every_rules_are_anchored_at_creation() {
    let mut o = object();
    o.spec.triggers.times.rules[0].cron = "CRON_TZ=UTC @every 1h".into();
    let created: Timestamp = "2026-11-29T10:17:00Z".parse().unwrap();
    o.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        created,
    ));
    let valid = validate(&o, &NoCalendars, Timestamp::UNIX_EPOCH).unwrap();
    let next = valid.tide.rules()[0].cron.next_after(created).unwrap();
    assert_eq!(next.to_string(), "2026-11-29T11:17:00Z");
}

mod calendars {
    use super::*;
    use crate::api::{CalendarDay, CalendarKind, CalendarRef, Calendars, TidalCalendarSpec};

    /// One TidalCalendar `holidays` in `production`, in `zone`, holding `days`.
    struct Holidays {
        zone: &'static str,
        days: Vec<CalendarDay>,
    }

    impl Calendars for Holidays {
        fn find(&self, reference: &CalendarRef, namespace: &str) -> Option<TidalCalendarSpec> {
            (reference.name == "holidays"
                && reference.kind == CalendarKind::TidalCalendar
                && namespace == "production")
                .then(|| TidalCalendarSpec {
                    time_zone: self.zone.into(),
                    days: self.days.clone(),
                })
        }
    }

    fn with_skip(kind: CalendarKind) -> TidalScheduler {
        let mut o = object();
        o.spec.triggers.times.rules[1].skip_days = vec![CalendarRef {
            name: "holidays".into(),
            kind,
        }];
        o
    }

    fn day(date: &str) -> CalendarDay {
        CalendarDay {
            date: Some(date.into()),
            ..CalendarDay::default()
        }
    }

    #[test]
    fn a_found_calendar_limits_the_rules_days() {
        let calendars = Holidays {
            zone: "Asia/Shanghai",
            days: vec![day("2026-12-01")],
        };
        let valid = validate(
            &with_skip(CalendarKind::TidalCalendar),
            &calendars,
            Timestamp::UNIX_EPOCH,
        )
        .unwrap();
        let rule = &valid.tide.rules()[1];
        assert_eq!(rule.days.skip().len(), 1);
        assert_eq!(
            rule.days.skip()[0].name(),
            "TidalCalendar production/holidays"
        );
        // 19:00 Shanghai on 1 December is skipped: the next is the 2nd's.
        let next = rule.next_after("2026-12-01T00:00:00Z".parse().unwrap());
        assert_eq!(next.unwrap().to_string(), "2026-12-02T11:00:00Z");
        assert!(valid.tide.rules()[0].days.is_every_day());
    }

    #[test]
    fn a_missing_calendar_names_the_rule_and_the_calendar() {
        let calendars = Holidays {
            zone: "UTC",
            days: vec![],
        };
        let problems: Vec<String> = validate(
            &with_skip(CalendarKind::ClusterTidalCalendar),
            &calendars,
            Timestamp::UNIX_EPOCH,
        )
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            problems,
            ["spec.triggers.times.rules[1].skipDays[0] (evening-rush): \
              ClusterTidalCalendar holidays not found"]
        );
    }

    #[test]
    fn an_invalid_calendar_names_its_fields() {
        let calendars = Holidays {
            zone: "Mars/Olympus_Mons",
            days: vec![
                day("2026-02-30"),
                CalendarDay {
                    from: Some("2026-12-26".into()),
                    to: Some("2026-12-24".into()),
                    ..CalendarDay::default()
                },
                CalendarDay {
                    yearly: Some("04-31".into()),
                    ..CalendarDay::default()
                },
                CalendarDay {
                    date: Some("2026-12-25".into()),
                    yearly: Some("12-25".into()),
                    ..CalendarDay::default()
                },
            ],
        };
        let problems: Vec<String> = validate(
            &with_skip(CalendarKind::TidalCalendar),
            &calendars,
            Timestamp::UNIX_EPOCH,
        )
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(problems.len(), 1, "{problems:?}");
        let message = &problems[0];
        for part in [
            "spec.triggers.times.rules[1].skipDays[0] (evening-rush): TidalCalendar production/holidays is invalid",
            "spec.timeZone: unknown time zone `Mars/Olympus_Mons`",
            "spec.days[0].date: `2026-02-30` is not a date",
            "spec.days[1].to: 2026-12-24 is before from (2026-12-26)",
            "spec.days[2].yearly: `04-31` is not a month and day",
            "spec.days[3]: set exactly one of date, from/to (a range) or yearly",
        ] {
            assert!(message.contains(part), "{part} not in {message}");
        }
    }

    #[test]
    fn the_29th_of_february_is_a_yearly_day() {
        let calendars = Holidays {
            zone: "UTC",
            days: vec![CalendarDay {
                yearly: Some("02-29".into()),
                ..CalendarDay::default()
            }],
        };
        assert!(
            validate(
                &with_skip(CalendarKind::TidalCalendar),
                &calendars,
                Timestamp::UNIX_EPOCH
            )
            .is_ok()
        );
    }
}
