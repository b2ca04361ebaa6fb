//! The costliest object a tenant can write (issue: one tenant starving the others): rules
//! that fire every second but skip every day, through the most calendars a rule may name,
//! each of the most entries a calendar may hold, their dates interleaved so that no
//! calendar has two consecutive days and the engine must look at each day in turn.

use serde_json::{Value, json};

/// Calendars a rule may skip (the schema's limit).
pub const CALENDARS: usize = 10;
/// Entries a calendar may hold (the schema's limit).
pub const ENTRIES: usize = 1000;

/// The name of costly calendar `k`.
pub fn calendar_name(k: usize) -> String {
    format!("every-tenth-day-{k}")
}

/// TidalCalendar `k` of [`CALENDARS`]: every tenth day from `first` (YYYY-MM-DD) on,
/// offset by `k` days, [`ENTRIES`] dates; together they cover 27 years from `first`.
pub fn calendar(k: usize, first: jiff::civil::Date) -> Value {
    let days: Vec<Value> = (0..ENTRIES)
        .map(|i| {
            let offset = i64::try_from(i * CALENDARS + k).expect("small");
            let day = first
                .checked_add(jiff::Span::new().days(offset))
                .expect("within the civil range");
            json!({ "date": day.to_string() })
        })
        .collect();
    json!({
        "apiVersion": "scheduling.tidal.io/v1alpha1",
        "kind": "TidalCalendar",
        "metadata": { "name": calendar_name(k) },
        "spec": { "timeZone": "UTC", "days": days },
    })
}

/// A TidalScheduler of `rules` every-second rules, each skipping all [`CALENDARS`]
/// calendars (which cover every day: it never fires), targeting Deployment `target`.
pub fn scheduler(name: &str, rules: usize, target: &str) -> Value {
    let skip: Vec<Value> = (0..CALENDARS)
        .map(|k| json!({ "name": calendar_name(k) }))
        .collect();
    let rules: Vec<Value> = (0..rules)
        .map(|r| {
            json!({
                "name": format!("every-second-{r}"),
                "cron": "CRON_TZ=UTC * * * * * *",
                "replicas": r,
                "skipDays": skip,
            })
        })
        .collect();
    json!({
        "apiVersion": "scheduling.tidal.io/v1alpha1",
        "kind": "TidalScheduler",
        "metadata": { "name": name },
        "spec": {
            "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": target },
            "triggers": { "times": { "rules": rules } },
        },
    })
}
