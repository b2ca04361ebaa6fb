//! The status write as a JSON patch (RFC 6902): only the fields that changed, and of the
//! history only its edits — so the cache may hold the newest history entries alone.
//!
//! A merge patch replaces the atomic `history` list whole and so needs every entry; at
//! 100,000 objects of ten entries that is about 180 MiB held for writes. The patch below
//! inserts the new entries at the front and removes those past `spec.historyLimit` by
//! index, which the stored length (`history_omitted`) gives. It is exact because it is
//! conditional: it sets `metadata.resourceVersion` to the version read, so the API server
//! applies it only to that version (else 409, as with the merge patch before it).

use serde_json::{Map, Value, json};

use crate::api::{HistoryEntry, TidalSchedulerStatus};

/// The JSON patch that moves the object's status from `stored` (`None`: it has none) to
/// `new`, keeping at most `history_limit` history entries, conditional on
/// `resource_version` (the object's as read). Fields this release does not know, in the
/// status or in entries it keeps, are left as stored.
pub fn status_patch(
    stored: Option<&TidalSchedulerStatus>,
    new: &TidalSchedulerStatus,
    history_limit: usize,
    resource_version: Option<&str>,
) -> Result<json_patch::Patch, serde_json::Error> {
    let mut ops = Vec::new();
    if let Some(version) = resource_version {
        ops.push(op("replace", "/metadata/resourceVersion", version));
    }
    match stored {
        None => ops.push(op("add", "/status", serde_json::to_value(new)?)),
        Some(stored) => {
            ops.extend(field_ops(&fields(stored)?, &fields(new)?));
            ops.extend(history_ops(stored, &new.history, history_limit)?);
        }
    }
    serde_json::from_value(Value::Array(ops))
}

/// The status's fields but the history, as written.
fn fields(status: &TidalSchedulerStatus) -> Result<Map<String, Value>, serde_json::Error> {
    let mut fields = match serde_json::to_value(status)? {
        Value::Object(fields) => fields,
        _ => Map::new(),
    };
    fields.remove("history");
    Ok(fields)
}

/// Sets each field that changed (`add` replaces a present member) and removes each gone.
fn field_ops(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<Value> {
    let changed = new
        .iter()
        .filter(|(name, value)| old.get(*name) != Some(value))
        .map(|(name, value)| op("add", &format!("/status/{name}"), value.clone()));
    let gone = old
        .keys()
        .filter(|name| !new.contains_key(*name))
        .map(|name| json!({ "op": "remove", "path": format!("/status/{name}") }));
    changed.chain(gone).collect()
}

/// The edits from the stored history — `stored.history`, then `history_omitted` older
/// entries not held — to `new` followed by those older entries, cut to `limit`.
fn history_ops(
    stored: &TidalSchedulerStatus,
    new: &[HistoryEntry],
    limit: usize,
) -> Result<Vec<Value>, serde_json::Error> {
    let held = &stored.history;
    let stored_len = held.len() + stored.history_omitted;
    if stored_len == 0 {
        if new.is_empty() {
            return Ok(Vec::new());
        }
        return Ok(vec![op(
            "add",
            "/status/history",
            serde_json::to_value(new)?,
        )]);
    }
    if new.is_empty() && stored.history_omitted == 0 {
        return Ok(vec![json!({ "op": "remove", "path": "/status/history" })]);
    }
    let mut ops = Vec::new();
    // Commonly the new entries in front of what is held; else what is held is replaced.
    let added = match new.strip_suffix(held.as_slice()) {
        Some(added) => added,
        None => {
            let remove = json!({ "op": "remove", "path": "/status/history/0" });
            ops.extend(std::iter::repeat_n(remove, held.len()));
            new
        }
    };
    for (index, entry) in added.iter().enumerate() {
        let path = format!("/status/history/{index}");
        ops.push(op("add", &path, serde_json::to_value(entry)?));
    }
    let len = stored_len - held.len() + new.len();
    for index in (limit.max(1)..len).rev() {
        ops.push(json!({ "op": "remove", "path": format!("/status/history/{index}") }));
    }
    Ok(ops)
}

fn op(kind: &str, path: &str, value: impl Into<Value>) -> Value {
    json!({ "op": kind, "path": path, "value": value.into() })
}

#[cfg(test)]
mod tests;
