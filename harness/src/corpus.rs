//! A deterministic corpus of cron expressions and start instants for the robfig differential
//! test: valid and invalid grammar, descriptors, `@every`, a dozen zones, starts near DST
//! transitions.

use jiff::{SignedDuration, Timestamp, tz::TimeZone};

/// One (expression, start) pair.
#[derive(Debug, Clone)]
pub struct Case {
    /// The expression, prefix included.
    pub expression: String,
    /// Start instant, Unix nanoseconds.
    pub start_nanos: i64,
    /// Zone named by the prefix, if any.
    pub zone: Option<String>,
    /// Which generator produced it (for the summary).
    pub kind: &'static str,
}

/// Zones the corpus uses: DST in both hemispheres, 30- and 45-minute offsets, no DST.
pub const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "America/Los_Angeles",
    "America/St_Johns",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Pacific/Auckland",
    "Asia/Shanghai",
    "Asia/Kolkata",
    "Asia/Kathmandu",
];

/// SplitMix64: small, deterministic, good enough to spread a corpus.
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of a slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const MONTHS: [&str; 12] = [
    "JAN", "feb", "Mar", "APR", "may", "JUN", "jul", "AUG", "sep", "OCT", "nov", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "mon", "Tue", "WED", "thu", "FRI", "sat"];

fn value(rng: &mut Rng, min: i64, max: i64, names: Option<&[&str]>) -> String {
    match names {
        Some(names) if rng.chance(30) => names[rng.below(names.len() as u64) as usize].to_owned(),
        _ => rng.between(min, max).to_string(),
    }
}

/// One valid item of a field with bounds `min..=max`.
fn valid_item(rng: &mut Rng, min: i64, max: i64, names: Option<&[&str]>) -> String {
    match rng.below(9) {
        0 => "*".to_owned(),
        1 => "?".to_owned(),
        2 | 3 => value(rng, min, max, names),
        4 => {
            let a = rng.between(min, max);
            let b = rng.between(a, max);
            format!("{a}-{b}")
        }
        5 => format!("*/{}", rng.between(1, (max - min + 1).max(2))),
        6 => {
            let a = rng.between(min, max);
            let b = rng.between(a, max);
            format!("{a}-{b}/{}", rng.between(1, 10))
        }
        7 => format!("{}/{}", rng.between(min, max), rng.between(1, 20)),
        _ => {
            let n = rng.between(2, 4);
            (0..n)
                .map(|_| value(rng, min, max, names))
                .collect::<Vec<_>>()
                .join(",")
        }
    }
}

/// One item that robfig rejects (or a quirk it accepts).
fn odd_item(rng: &mut Rng, min: i64, max: i64) -> String {
    let odd = [
        format!("{}", max + rng.between(1, 40)),
        format!("{}-{}", max, min),
        "*/0".to_owned(),
        format!("{min}/0"),
        "L".to_owned(),
        "5W".to_owned(),
        "1#3".to_owned(),
        "LW".to_owned(),
        "x".to_owned(),
        "1-2-3".to_owned(),
        "1/2/3".to_owned(),
        "-1".to_owned(),
        "*/-2".to_owned(),
        "+3".to_owned(),
        "03".to_owned(),
        ",".to_owned(),
        "1,,2".to_owned(),
        "*-3".to_owned(),
        "?/5".to_owned(),
        "99999999999999999999".to_owned(),
        format!("{}", if min > 0 { min - 1 } else { max + 1 }),
    ];
    rng.pick(&odd).clone()
}

const BOUNDS: [(i64, i64); 6] = [(0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 6)];

fn fields(rng: &mut Rng, odd_percent: u64) -> String {
    let mut count = 6;
    if rng.chance(odd_percent / 4) {
        count = *rng.pick(&[0usize, 1, 5, 7]);
    }
    (0..count)
        .map(|i| {
            let (min, max) = BOUNDS[i.min(5)];
            let names: Option<&[&str]> = match i {
                4 => Some(&MONTHS),
                5 => Some(&DAYS),
                _ => None,
            };
            if rng.chance(odd_percent) {
                odd_item(rng, min, max)
            } else if i < 3 && rng.chance(35) {
                // Fixed times of day are the common case in real schedules.
                value(rng, min, max, None)
            } else {
                valid_item(rng, min, max, names)
            }
        })
        .collect::<Vec<_>>()
        .join(if rng.chance(5) { "  " } else { " " })
}

fn descriptor(rng: &mut Rng) -> String {
    let durations = [
        "1s", "90s", "5m", "1h30m", "2h", "1.5h", "45m", "500ms", "0", "-5s", "24h", "7m13s", "1x",
        "5", "", "1h 2m", "3000h", ".5m",
    ];
    match rng.below(12) {
        0 => "@yearly".to_owned(),
        1 => "@annually".to_owned(),
        2 => "@monthly".to_owned(),
        3 => "@weekly".to_owned(),
        4 => "@daily".to_owned(),
        5 => "@midnight".to_owned(),
        6 => "@hourly".to_owned(),
        7 => (*rng.pick(&["@Daily", "@every", "@reboot", "@daily ", "@ hourly"])).to_owned(),
        _ => format!("@every {}", rng.pick(&durations)),
    }
}

fn start(rng: &mut Rng, zone: &str) -> i64 {
    let nanos = if rng.chance(30) {
        rng.between(0, 999_999_999)
    } else {
        0
    };
    if zone != "UTC" && rng.chance(55) {
        // Near a transition between 2020 and 2035: the interesting DST cases.
        let tz = TimeZone::get(zone).expect("corpus zones exist");
        let from = Timestamp::from_second(rng.between(1_577_836_800, 2_051_222_400)).unwrap();
        if let Some(transition) = tz.following(from).next() {
            let shift = SignedDuration::from_secs(rng.between(-3 * 3600, 3 * 3600));
            let at = transition.timestamp() + shift;
            return at.as_second() * 1_000_000_000 + nanos;
        }
    }
    rng.between(946_684_800, 2_208_988_800) * 1_000_000_000 + nanos
}

/// An expression aimed at the wall-clock times a DST transition skips or repeats, with a
/// start shortly before the transition.
fn dst_probe(rng: &mut Rng) -> (String, i64, String) {
    let now = Timestamp::from_second(1_764_000_000).unwrap();
    let dst_zones: Vec<&str> = ZONES
        .iter()
        .copied()
        .filter(|z| TimeZone::get(z).is_ok_and(|tz| tz.following(now).next().is_some()))
        .collect();
    let zone = (*rng.pick(&dst_zones)).to_owned();
    let tz = TimeZone::get(&zone).expect("corpus zones exist");
    let from = Timestamp::from_second(rng.between(1_577_836_800, 2_051_222_400)).unwrap();
    let transition = tz
        .following(from)
        .next()
        .expect("DST zones keep transitions");
    let at = transition.timestamp();
    let after = i64::from(transition.offset().seconds());
    let before = i64::from(tz.to_offset(at - SignedDuration::from_secs(1)).seconds());
    // Wall-clock seconds (since the epoch, as if UTC) of the skipped or repeated stretch.
    let (wall_from, wall_to) = if after > before {
        (at.as_second() + before, at.as_second() + after)
    } else {
        (at.as_second() + after, at.as_second() + before)
    };
    let wall = rng.between(wall_from, wall_to - 1);
    let (h, m, s) = (
        wall.rem_euclid(86_400) / 3600,
        wall.rem_euclid(3600) / 60,
        wall.rem_euclid(60),
    );
    let body = match rng.below(6) {
        0 | 1 => format!("{s} {m} {h} * * *"),
        2 => format!("0 {m} {h} * * *"),
        3 => format!("0 */{} * * * *", rng.pick(&[5, 15, 30])),
        4 => format!("0 {m} * * * *"),
        _ => format!("0 0 {h},{} * * *", (h + 1) % 24),
    };
    let start = at.as_second() - rng.between(1, 6 * 3600);
    (
        format!("CRON_TZ={zone} {body}"),
        start * 1_000_000_000,
        zone,
    )
}

/// The whole corpus: `count` cases from a fixed seed.
pub fn corpus_of(count: usize, seed: u64) -> Vec<Case> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|_| {
            if rng.chance(10) {
                let (expression, start_nanos, zone) = dst_probe(&mut rng);
                return Case {
                    expression,
                    start_nanos,
                    zone: Some(zone),
                    kind: "DST probe",
                };
            }
            let zone = (*rng.pick(ZONES)).to_owned();
            let (kind, body) = match rng.below(20) {
                0..=10 => ("valid fields", fields(&mut rng, 0)),
                11..=15 => ("odd fields", fields(&mut rng, 18)),
                16 | 17 => ("descriptor", descriptor(&mut rng)),
                _ => ("fields, no prefix", fields(&mut rng, 5)),
            };
            let start_nanos = start(&mut rng, &zone);
            let (expression, zone) = match (kind, rng.below(40)) {
                ("fields, no prefix", _) => (body, None),
                (_, 0) => (format!("CRON_TZ={zone}"), Some(zone)),
                (_, 1) => (format!("CRON_TZ={} {body}", zone.to_lowercase()), None),
                (_, 2) => (format!("TZ=Nowhere/Land {body}"), None),
                (_, 3) => (format!("TZ= {body}"), None),
                (_, 4) => (format!("CRON_TZ=Local {body}"), None),
                (_, n) if n < 20 => (format!("TZ={zone} {body}"), Some(zone)),
                _ => (format!("CRON_TZ={zone} {body}"), Some(zone)),
            };
            Case {
                expression,
                start_nanos,
                zone,
                kind,
            }
        })
        .collect()
}

/// The corpus the differential test runs.
pub fn corpus() -> Vec<Case> {
    corpus_of(6000, 0x71da1)
}
