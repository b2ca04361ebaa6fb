//! Differential test against robfig/cron v3 itself: a generated corpus of expressions and
//! start instants goes through both robfig (a small Go program, `tests/robfig-reference`) and
//! our engine; results must be identical except where docs/design.md §3's DST policy deliberately
//! differs (the first differing instant within 2 h of a UTC-offset change) or where robfig
//! accepts an expression that can never fire or an `@every` that is not positive (we reject
//! both).

use tidal_harness as common;

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp, tz::TimeZone};
use tidal_scheduler::schedule::{Cron, CronError};

use common::corpus::{Case, corpus};
use common::robfig::{Answer, ask_robfig};

const FIRES_PER_CASE: usize = 5;

fn ours(case: &Case) -> Result<Vec<Option<i64>>, CronError> {
    let zone_in_prefix =
        case.expression.starts_with("TZ=") || case.expression.starts_with("CRON_TZ=");
    // robfig evaluates prefix-less expressions in time.Local, which the test pins to UTC.
    let cron = Cron::parse(&case.expression, (!zone_in_prefix).then_some("UTC"))?;
    let start = Timestamp::from_nanosecond(i128::from(case.start_nanos)).unwrap();
    let cron = cron.anchored_at(start.as_second() - i64::from(start.subsec_nanosecond() < 0));
    let mut fires = Vec::new();
    let mut t = start;
    for _ in 0..FIRES_PER_CASE {
        match cron.next_after(t) {
            Some(next) => {
                fires.push(Some(next.as_second()));
                t = next;
            }
            None => {
                fires.push(None);
                break;
            }
        }
    }
    Ok(fires)
}

/// Whether an offset change that is not a whole number of hours (Lord_Howe's 30 minutes)
/// lies in `(from, to]`. robfig steps hours in real time, so after crossing one its fires
/// land 30 minutes off (08:30:08 for `8 0 8 * * *`) or a day late (`@daily`): a robfig
/// bug, not a policy choice.
fn crossed_fractional_shift(zone: &str, from: i64, to: i64) -> bool {
    let Ok(tz) = TimeZone::get(zone) else {
        return false;
    };
    let start = Timestamp::from_second(from).unwrap();
    let end = Timestamp::from_second(to).unwrap();
    tz.following(start)
        .take_while(|t| t.timestamp() <= end)
        .any(|t| {
            let after = t.offset().seconds();
            let before = tz
                .to_offset(t.timestamp() - SignedDuration::from_secs(1))
                .seconds();
            (after - before) % 3600 != 0
        })
}

fn near_offset_change(zone: &str, seconds: i64) -> bool {
    let Ok(tz) = TimeZone::get(zone) else {
        return false;
    };
    let window = SignedDuration::from_hours(2);
    let at = Timestamp::from_second(seconds).unwrap();
    tz.preceding(at + window + SignedDuration::from_secs(1))
        .next()
        .is_some_and(|t| t.timestamp() >= at - window)
}

#[derive(Default)]
struct Tally {
    identical: usize,
    both_rejected: usize,
    dst_policy: usize,
    robfig_fractional_shift: usize,
    never_fires: usize,
    zone_deviation: usize,
    non_positive_every: usize,
    mismatches: Vec<String>,
}

#[test]
fn engine_matches_robfig_except_the_documented_dst_policy() {
    let cases = corpus();
    assert!(cases.len() >= 2000, "corpus too small: {}", cases.len());
    let zones: std::collections::BTreeSet<&str> =
        cases.iter().filter_map(|c| c.zone.as_deref()).collect();
    assert!(
        zones.len() >= 10,
        "corpus covers only {} zones",
        zones.len()
    );

    let answers = ask_robfig(&cases, FIRES_PER_CASE);
    let mut tally = Tally::default();
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    for (case, answer) in cases.iter().zip(&answers) {
        *kinds.entry(case.kind).or_default() += 1;
        let ours = ours(case);
        let describe = || {
            format!(
                "{:?} from {}: robfig {answer:?}, ours {ours:?}",
                case.expression, case.start_nanos
            )
        };
        match (answer, &ours) {
            (Answer::Rejected(_), Err(_)) => tally.both_rejected += 1,
            (Answer::Rejected(message), Ok(_)) => {
                tally.mismatches.push(format!(
                    "robfig rejects ({message}), we accept: {}",
                    describe()
                ));
            }
            (
                Answer::Fires(fires),
                Err(CronError::NeverFires { .. } | CronError::EmptyField { .. }),
            ) => {
                if fires.first() == Some(&None) {
                    tally.never_fires += 1;
                } else {
                    tally
                        .mismatches
                        .push(format!("we call it never-firing: {}", describe()));
                }
            }
            (Answer::Fires(_), Err(CronError::UnknownZone { zone }))
                if zone.is_empty() || zone == "Local" =>
            {
                // Deliberate: robfig reads `TZ= ` as UTC and `TZ=Local` as the process's zone;
                // the zone must be named, never taken from the process (docs/design.md §3).
                tally.zone_deviation += 1;
            }
            (Answer::Fires(_), Err(CronError::NonPositiveDuration { .. })) => {
                // Deliberate: robfig rounds `@every 0s` and `@every -1h` up to one second.
                tally.non_positive_every += 1;
            }
            (Answer::Fires(_), Err(error)) => {
                tally
                    .mismatches
                    .push(format!("we reject ({error}): {}", describe()));
            }
            (Answer::Fires(theirs), Ok(mine)) => {
                match theirs.iter().zip(mine.iter()).position(|(a, b)| a != b) {
                    None if theirs.len() == mine.len() => tally.identical += 1,
                    None => tally
                        .mismatches
                        .push(format!("different lengths: {}", describe())),
                    Some(i) => {
                        let zone = case.zone.as_deref().unwrap_or("UTC");
                        let near = [theirs[i], mine[i]]
                            .iter()
                            .flatten()
                            .any(|s| near_offset_change(zone, *s));
                        // robfig resets to the start of the local day before stepping, so its
                        // search reaches back up to a day before where it started.
                        let searched_from = if i == 0 {
                            case.start_nanos / 1_000_000_000
                        } else {
                            mine[i - 1].unwrap_or(0)
                        } - 86_400;
                        let searched_to = [theirs[i], mine[i]]
                            .iter()
                            .flatten()
                            .copied()
                            .max()
                            .unwrap_or(searched_from);
                        if near {
                            tally.dst_policy += 1;
                        } else if crossed_fractional_shift(zone, searched_from, searched_to) {
                            tally.robfig_fractional_shift += 1;
                        } else {
                            tally
                                .mismatches
                                .push(format!("fire #{i} differs: {}", describe()));
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "robfig differential: {} cases over {} zones {:?}; identical {}, both rejected {}, \
         DST policy {}, robfig off after a 30-minute shift {}, never-firing rejected {}, \
         unnamed zone rejected {}, non-positive @every rejected {}, mismatches {}",
        cases.len(),
        zones.len(),
        kinds,
        tally.identical,
        tally.both_rejected,
        tally.dst_policy,
        tally.robfig_fractional_shift,
        tally.never_fires,
        tally.zone_deviation,
        tally.non_positive_every,
        tally.mismatches.len()
    );
    for mismatch in tally.mismatches.iter().take(40) {
        eprintln!("MISMATCH {mismatch}");
    }
    assert!(
        tally.mismatches.is_empty(),
        "{} mismatches with robfig",
        tally.mismatches.len()
    );
    // The corpus must exercise every branch, or the test proves little.
    assert!(
        tally.identical > 1000 && tally.both_rejected > 200,
        "corpus lacks variety"
    );
    assert!(
        tally.dst_policy > 20,
        "corpus reaches too few DST transitions"
    );
}
