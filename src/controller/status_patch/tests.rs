use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// The entry of instant `n` (seconds after 2026-01-01), newest having the largest `n`.
fn entry(n: i64) -> HistoryEntry {
    let at = Timestamp::from_second(1_767_225_600 + n).unwrap();
    HistoryEntry::applied(&format!("r{n}"), at)
}

/// Entries `newest` down to `newest - len + 1`: a history as written, newest first.
fn history(newest: i64, len: usize) -> Vec<HistoryEntry> {
    (0..len as i64).map(|age| entry(newest - age)).collect()
}

fn status(history: Vec<HistoryEntry>) -> TidalSchedulerStatus {
    TidalSchedulerStatus {
        desired_replicas: Some(3),
        active_rule: Some("even".to_owned()),
        next_trigger_rule: Some("odd".to_owned()),
        history,
        ..TidalSchedulerStatus::default()
    }
}

/// `status` as the cache holds it: its newest `kept` history entries.
fn held(status: &TidalSchedulerStatus, kept: usize) -> TidalSchedulerStatus {
    let mut held = status.clone();
    held.history_omitted = held.history.len().saturating_sub(kept);
    held.history.truncate(kept);
    held
}

/// The object the API server stores at resourceVersion 42 with `status`.
fn document(status: Option<&TidalSchedulerStatus>) -> Value {
    let mut document = json!({ "metadata": { "name": "web", "resourceVersion": "42" } });
    if let Some(status) = status {
        document["status"] = serde_json::to_value(status).unwrap();
    }
    document
}

/// `patch` applied as the API server applies it; the status it leaves.
fn applied(mut document: Value, patch: &json_patch::Patch) -> TidalSchedulerStatus {
    json_patch::patch(&mut document, patch).expect("the patch applies");
    serde_json::from_value(document["status"].clone()).unwrap()
}

#[test]
fn the_patch_carries_the_version_read_and_sets_only_what_changed() {
    let old = status(history(10, 2));
    let mut new = old.clone();
    new.next_trigger_rule = None;
    new.desired_replicas = Some(7);
    let patch = status_patch(Some(&old), &new, 10, Some("41")).unwrap();
    let ops = serde_json::to_value(&patch).unwrap();
    assert_eq!(
        ops,
        json!([
            { "op": "replace", "path": "/metadata/resourceVersion", "value": "41" },
            { "op": "add", "path": "/status/desiredReplicas", "value": 7 },
            { "op": "remove", "path": "/status/nextTriggerRule" },
        ])
    );
}

#[test]
fn a_status_field_of_a_newer_release_survives_this_releases_writes() {
    // After a downgrade the newer CRD stays, and with it fields only the newer release
    // writes — in the status and in history entries: this one's patch leaves them.
    let known = status(history(10, 2));
    let mut stored = document(Some(&known));
    stored["status"]["fieldOfANewerRelease"] = json!({ "kept": true });
    stored["status"]["history"][0]["fieldOfANewerRelease"] = json!(1);
    let old: TidalSchedulerStatus = serde_json::from_value(stored["status"].clone()).unwrap();
    assert_eq!(old, known, "an unknown status field is ignored");
    let mut new = old.clone();
    new.desired_replicas = Some(7);
    new.history.insert(0, entry(11));
    let patch = status_patch(Some(&old), &new, 10, Some("42")).unwrap();
    json_patch::patch(&mut stored, &patch).unwrap();
    assert_eq!(
        stored["status"]["fieldOfANewerRelease"],
        json!({ "kept": true })
    );
    assert_eq!(stored["status"]["history"][1]["fieldOfANewerRelease"], 1);
    assert_eq!(stored["status"]["desiredReplicas"], 7);
}

#[test]
fn an_object_without_status_gets_it_whole() {
    let new = status(history(10, 1));
    let patch = status_patch(None, &new, 10, Some("42")).unwrap();
    assert_eq!(applied(document(None), &patch), new);
}

#[test]
fn a_trigger_on_a_full_history_held_short_drops_the_oldest_entry() {
    let server = status(history(10, 10));
    let old = held(&server, 1);
    let mut new = old.clone();
    new.history.insert(0, entry(11));
    let patch = status_patch(Some(&old), &new, 10, Some("42")).unwrap();
    assert_eq!(
        applied(document(Some(&server)), &patch).history,
        history(11, 10)
    );
    let ops = serde_json::to_value(&patch).unwrap();
    assert_eq!(
        ops.as_array().unwrap().len(),
        3,
        "version, add, remove: {ops}"
    );
}

#[test]
fn a_lowered_limit_cuts_the_entries_not_held() {
    let server = status(history(10, 10));
    let old = held(&server, 1);
    let patch = status_patch(Some(&old), &old, 3, Some("42")).unwrap();
    assert_eq!(
        applied(document(Some(&server)), &patch).history,
        history(10, 3)
    );
}

#[test]
fn an_empty_history_is_removed_not_written_empty() {
    let server = status(history(10, 1));
    let mut new = server.clone();
    new.history.clear();
    let patch = status_patch(Some(&server), &new, 10, Some("42")).unwrap();
    let mut document = document(Some(&server));
    json_patch::patch(&mut document, &patch).unwrap();
    assert!(document["status"].get("history").is_none(), "{document}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Whatever the cache holds of the history, whatever a reconcile drops from it (a
    /// correction) or adds in front (triggers), and whatever the limit: the patch leaves
    /// on the server what a merge patch of the whole list would have.
    #[test]
    fn the_patch_edits_the_whole_stored_history_as_if_it_were_held(
        stored_len in 0_usize..14,
        kept in 0_usize..4,
        dropped in proptest::collection::vec(any::<bool>(), 4),
        added in 0_usize..3,
        limit in 1_usize..12,
        has_status in any::<bool>(),
    ) {
        let server = status(history(100, stored_len));
        let old = held(&server, kept);
        let mut new_history: Vec<HistoryEntry> = (1..=added as i64).rev().map(|n| entry(100 + n)).collect();
        let mut index = 0;
        new_history.extend(old.history.iter().filter(|_| {
            index += 1;
            !dropped[index - 1]
        }).cloned());
        let omitted = server.history[old.history.len()..].to_vec();
        let mut expected: Vec<HistoryEntry> = new_history.iter().chain(&omitted).cloned().collect();
        expected.truncate(limit);
        new_history.truncate(limit);
        let new = TidalSchedulerStatus { history: new_history, ..old.clone() };

        let (stored, document) = match has_status || stored_len > 0 {
            true => (Some(&old), document(Some(&server))),
            false => (None, document(None)),
        };
        let patch = status_patch(stored, &new, limit, Some("42")).unwrap();
        let written = applied(document, &patch);
        prop_assert_eq!(written.history, expected);
        prop_assert_eq!(written.desired_replicas, Some(3));
    }
}
