//! Schedule engine benchmarks: next fire for typical and pathological expressions, the tide
//! level of an object with 100 rules, the plan of the costliest object a tenant can write,
//! and the same `next` calls timed against robfig/cron v3's `Next` (the Go reference
//! program) in the same run.
//!
//! `cargo bench --bench schedule` — criterion's report, then a comparison table.

use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use jiff::Timestamp;
use std::sync::Arc;

use jiff::ToSpan;
use jiff::civil::date;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tidal_harness::tenant;
use tidal_scheduler::api::{
    CalendarRef, Calendars, TidalCalendar, TidalCalendarSpec, TidalScheduler, TidalSchedulerStatus,
};
use tidal_scheduler::controller::plan::plan_object;
use tidal_scheduler::schedule::{Calendar, Cron, Day, Days, Rule, Tide, Zone};

/// Start instant of every measurement.
const START: &str = "2026-11-29T12:00:00Z";

/// (label, expression): typical rules first, then pathological ones.
const EXPRESSIONS: &[(&str, &str)] = &[
    ("daily 08:00 Shanghai", "CRON_TZ=Asia/Shanghai 0 0 8 * * *"),
    ("hourly range", "CRON_TZ=Asia/Shanghai 0 0 14-17 * * *"),
    (
        "weekdays New York",
        "CRON_TZ=America/New_York 0 30 9 * * MON-FRI",
    ),
    (
        "every 15 min London",
        "CRON_TZ=Europe/London 0 */15 * * * *",
    ),
    ("every second", "CRON_TZ=UTC * * * * * *"),
    ("every 90s", "CRON_TZ=UTC @every 90s"),
    ("29 February", "CRON_TZ=UTC 0 0 12 29 2 *"),
    ("last second of year", "CRON_TZ=UTC 59 59 23 31 12 *"),
    ("Friday 13th", "CRON_TZ=UTC 0 0 0 13 * FRI"),
    (
        "spring-forward gap",
        "CRON_TZ=America/New_York 0 30 2 8 3 *",
    ),
    (
        "Lord_Howe 30-min DST",
        "CRON_TZ=Australia/Lord_Howe 0 15 2 * 10 SUN",
    ),
];

fn start() -> Timestamp {
    START.parse().expect("START is RFC 3339")
}

fn parsed(expression: &str) -> Cron {
    let start = start();
    Cron::parse(expression, None)
        .expect("bench expressions are valid")
        .anchored_at(start.as_second())
}

fn hundred_rules() -> Tide {
    let zones = ["Asia/Shanghai", "America/New_York", "Europe/London", "UTC"];
    Tide::new(
        (0..100)
            .map(|i| Rule {
                name: format!("rule-{i}"),
                cron: Cron::parse(
                    &format!(
                        "CRON_TZ={} 0 {} {} * * {}",
                        zones[i % 4],
                        i % 60,
                        i % 24,
                        ["*", "MON-FRI", "SAT,SUN"][i % 3]
                    ),
                    None,
                )
                .expect("generated rules are valid"),
                replicas: i as i32,
                suspended: false,
                days: Default::default(),
            })
            .collect(),
    )
}

fn bench_next(c: &mut Criterion) {
    let mut group = c.benchmark_group("next_after");
    for (label, expression) in EXPRESSIONS {
        let cron = parsed(expression);
        let start = start();
        group.bench_function(*label, |b| {
            b.iter(|| black_box(&cron).next_after(black_box(start)))
        });
    }
    group.finish();
}

fn bench_parse(c: &mut Criterion) {
    c.bench_function("parse weekdays New York", |b| {
        b.iter(|| {
            Cron::parse(
                black_box("CRON_TZ=America/New_York 0 30 9 * * MON-FRI"),
                None,
            )
        })
    });
}

fn bench_tide(c: &mut Criterion) {
    let tide = hundred_rules();
    let start = start();
    c.bench_function("tide level_at, 100 rules", |b| {
        b.iter(|| black_box(&tide).level_at(black_box(start)))
    });
    c.bench_function("tide next_after, 100 rules", |b| {
        b.iter(|| black_box(&tide).next_after(black_box(start)))
    });
}

/// A weekday rule skipping a full calendar (1,000 dates: every third day from 2026 on),
/// and a daily rule limited to three yearly days: the worst cases of jumping over days.
fn bench_calendars(c: &mut Criterion) {
    let zone = |name| Zone::named(name).expect("bench zones exist");
    let crowded = Calendar::new(
        "1,000 dates",
        zone("Europe/London"),
        (0..1000)
            .map(|i| Day::Date(date(2026, 1, 1).checked_add((3 * i).days()).unwrap()))
            .collect(),
    );
    let sparse = Calendar::new(
        "3 yearly days",
        zone("Asia/Shanghai"),
        vec![
            Day::Yearly { month: 6, day: 18 },
            Day::Yearly { month: 11, day: 11 },
            Day::Yearly { month: 12, day: 12 },
        ],
    );
    let rule = |cron: &str, days: Days| Rule {
        name: "r".into(),
        cron: parsed(cron),
        replicas: 1,
        suspended: false,
        days,
    };
    let skipping = rule(
        "CRON_TZ=Europe/London 0 0 9 * * MON-FRI",
        Days::new(vec![Arc::new(crowded)], Vec::new()),
    );
    let only = rule(
        "CRON_TZ=Asia/Shanghai 0 0 20 * * *",
        Days::new(Vec::new(), vec![Arc::new(sparse)]),
    );
    let at = start();
    c.bench_function("next_after, skipDays of 1,000 dates", |b| {
        b.iter(|| black_box(&skipping).next_after(black_box(at)))
    });
    c.bench_function("next_after, onlyDays of 3 yearly days", |b| {
        b.iter(|| black_box(&only).next_after(black_box(at)))
    });
    c.bench_function("latest_at_or_before, onlyDays of 3 yearly days", |b| {
        let floor = at - jiff::SignedDuration::from_hours(24 * 366);
        b.iter(|| black_box(&only).latest_at_or_before(black_box(at), floor))
    });
}

/// The costliest object a tenant can write (`tidal_harness::tenant`): every-second rules
/// skipping 10 calendars of 1,000 interleaved dates that cover every day, so that no
/// rule ever fires — planned the way a reconcile plans it (calendars converted, rules
/// validated, the plan computed), with 1, 10 and 100 rules.
fn bench_costly_plan(c: &mut Criterion) {
    let now = start();
    let first = now.to_zoned(jiff::tz::TimeZone::UTC).date() - 400.days();
    let calendars = CostlyCalendars(
        (0..tenant::CALENDARS)
            .map(|k| {
                let calendar: TidalCalendar =
                    serde_json::from_value(tenant::calendar(k, first)).expect("a TidalCalendar");
                (tenant::calendar_name(k), calendar.spec)
            })
            .collect(),
    );
    let mut group =
        c.benchmark_group("plan, every-second rules skipping 10 calendars × 1,000 dates");
    group.sample_size(10);
    for rules in [1, 10, 100] {
        let mut object: TidalScheduler =
            serde_json::from_value(tenant::scheduler("costly", rules, "web"))
                .expect("a TidalScheduler");
        object.metadata.namespace = Some("tenant".into());
        object.metadata.creation_timestamp =
            Some(Time(now - jiff::SignedDuration::from_hours(24 * 30)));
        let status = TidalSchedulerStatus::default();
        let (_, plan) = plan_object(&object, &calendars, &status, None, now).expect("valid");
        assert!(
            plan.level.is_none() && plan.next.is_none(),
            "it never fires"
        );
        group.bench_function(format!("{rules} rules"), |b| {
            b.iter(|| plan_object(black_box(&object), &calendars, &status, None, now))
        });
    }
    group.finish();
}

/// Calendars by name (the namespace is not looked at).
struct CostlyCalendars(Vec<(String, TidalCalendarSpec)>);

impl Calendars for CostlyCalendars {
    fn find(&self, reference: &CalendarRef, _namespace: &str) -> Option<TidalCalendarSpec> {
        self.0
            .iter()
            .find(|(name, _)| *name == reference.name)
            .map(|(_, spec)| spec.clone())
    }
}

criterion_group!(
    benches,
    bench_next,
    bench_parse,
    bench_tide,
    bench_calendars,
    bench_costly_plan
);

/// ns per `next_after(START)`, timed the way the Go reference times `Next`: the results'
/// Unix seconds are summed, so each call is used and none is optimised away.
fn ns_per_next(cron: &Cron) -> f64 {
    let start = start();
    let mut rounds = 1000u32;
    loop {
        let begin = Instant::now();
        let mut sum = 0i64;
        for _ in 0..rounds {
            let next = black_box(cron).next_after(black_box(start));
            sum = sum.wrapping_add(next.map_or(0, |t| t.as_second()));
        }
        black_box(sum);
        let elapsed = begin.elapsed();
        if elapsed > Duration::from_millis(300) {
            return elapsed.as_nanos() as f64 / f64::from(rounds);
        }
        rounds *= 4;
    }
}

/// robfig's ns per `Next`, from the Go reference in `-bench` mode; `None` without Go.
fn robfig_ns_per_next() -> Option<Vec<f64>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let binary = root.join("target/robfig-reference");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(root.join("tests/robfig-reference"))
        .env("GOWORK", "off")
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        return None;
    }
    let mut child = Command::new(&binary)
        .arg("-bench")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    let nanos = start().as_nanosecond();
    let input: String = EXPRESSIONS
        .iter()
        .map(|(_, e)| format!("{e}\t{nanos}\n"))
        .collect();
    child.stdin.take()?.write_all(input.as_bytes()).ok()?;
    let output = child.wait_with_output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    text.lines()
        .map(|line| line.rsplit('\t').next()?.parse().ok())
        .collect()
}

fn compare_with_robfig() {
    println!("\nnext fire after {START}: ns per call, same timing loop in both languages");
    let robfig = robfig_ns_per_next();
    if robfig.is_none() {
        println!("(robfig comparison skipped: Go or the module proxy is not available)");
    }
    println!("| expression | tidal-scheduler | robfig/cron v3 | ratio |");
    println!("|---|---:|---:|---:|");
    for (index, (label, expression)) in EXPRESSIONS.iter().enumerate() {
        let ours = ns_per_next(&parsed(expression));
        match robfig.as_ref().and_then(|r| r.get(index)) {
            Some(theirs) => println!(
                "| {label} | {ours:.0} | {theirs:.0} | {:.2}x |",
                theirs / ours
            ),
            None => println!("| {label} | {ours:.0} | - | - |"),
        }
    }
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    compare_with_robfig();
}
