//! Full histories: what every object of a fleet carries after days of triggers, written by
//! the bench so that the replicas measured cache objects of their production size.

use futures::{StreamExt, TryStreamExt, stream};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use tidal_scheduler::api::{HistoryEntry, TidalScheduler, TriggerResult};

use common::cluster::TestEnv;
use tidal_harness as common;

use crate::Rule;

/// Objects listed per page.
const PAGE: u32 = 500;

/// Completes every object's history to `entries`: after the entries a replica wrote, the
/// instants of `rules` on the days before, applied 150 ms late, each with a trace id —
/// merge-patched into status, `concurrency` at a time. Lists every object first: a
/// continue token outlives neither the API server's compaction (5 minutes) nor the
/// writes of 100,000 patches. Returns how many objects it patched.
pub async fn fill(
    env: &TestEnv,
    rules: &[Rule],
    entries: usize,
    concurrency: usize,
) -> anyhow::Result<usize> {
    let api = env.api::<TidalScheduler>();
    let mut histories: Vec<(String, Vec<HistoryEntry>)> = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        for object in page.items {
            let name = object.metadata.name.unwrap_or_default();
            let written = object.status.unwrap_or_default().history;
            histories.push((name, completed(written, rules, entries)?));
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    let patched = histories.len();
    stream::iter(histories)
        .map(|(name, history)| {
            let api = api.clone();
            async move {
                let patch = json!({ "status": { "history": history } });
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(patched)
}

/// `written`, then one instant a day of the rules in turn, from two days back (older than
/// anything `written` holds), up to `entries`.
fn completed(
    mut written: Vec<HistoryEntry>,
    rules: &[Rule],
    entries: usize,
) -> anyhow::Result<Vec<HistoryEntry>> {
    let today = Timestamp::now().to_zoned(TimeZone::UTC).date();
    let mut added = 0_i64;
    while written.len() < entries {
        let rule = &rules[added as usize % rules.len()];
        let day = today.checked_sub((2 + added).days())?;
        let at = day
            .at(rule.hour, 0, 0, 0)
            .to_zoned(TimeZone::UTC)?
            .timestamp();
        written.push(HistoryEntry {
            rule: rule.name.clone(),
            schedule_time: Time(at),
            execution_time: MicroTime(at.checked_add(150.milliseconds())?),
            replicas: rule.replicas,
            result: TriggerResult::Succeeded,
            catch_up: false,
            superseded: 0,
            message: String::new(),
            trace_id: Some(format!("{:032x}", at.as_millisecond() as u128 * 7919)),
        });
        added += 1;
    }
    Ok(written)
}
