//! The status write as a JSON patch (RFC 6902): only the fields that changed, and of the
//! history only its edits — so the cache may hold the newest history entries alone.
//!
//! A merge patch replaces the atomic `history` list whole and so needs every entry; at
//! 100,000 objects of ten entries that is about 180 MiB held for writes. The patch below
//! inserts the new entries at the front and removes those past `spec.historyLimit` by
//! index, which the stored length (`history_omitted`) gives. It is exact because it is
//! conditional: it sets `metadata.resourceVersion` to the version read, so the API server
//! applies it only to that version (else 409, as with the merge patch before it).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::{Map, Value};

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
        ops.push(PatchOperation::Replace(ReplaceOperation {
            path: PointerBuf::from_tokens(["metadata", "resourceVersion"]),
            value: version.into(),
        }));
    }
    match stored {
        None => ops.push(add(status_path([]), serde_json::to_value(new)?)),
        Some(stored) => {
            ops.extend(field_ops(&fields(stored)?, fields(new)?));
            ops.extend(history_ops(stored, &new.history, history_limit)?);
        }
    }
    Ok(json_patch::Patch(ops))
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
fn field_ops(old: &Map<String, Value>, new: Map<String, Value>) -> Vec<PatchOperation> {
    let gone = old
        .keys()
        .filter(|name| !new.contains_key(*name))
        .map(|name| remove(status_path([name.as_str()])));
    let gone: Vec<PatchOperation> = gone.collect();
    let changed = new
        .into_iter()
        .filter(|(name, value)| old.get(name) != Some(value))
        .map(|(name, value)| add(status_path([name.as_str()]), value));
    changed.chain(gone).collect()
}

/// The edits from the stored history — `stored.history`, then `history_omitted` older
/// entries not held — to `new` followed by those older entries, cut to `limit`.
fn history_ops(
    stored: &TidalSchedulerStatus,
    new: &[HistoryEntry],
    limit: usize,
) -> Result<Vec<PatchOperation>, serde_json::Error> {
    let held = &stored.history;
    let stored_len = held.len() + stored.history_omitted;
    if stored_len == 0 {
        if new.is_empty() {
            return Ok(Vec::new());
        }
        return Ok(vec![add(history_path(None), serde_json::to_value(new)?)]);
    }
    if new.is_empty() && stored.history_omitted == 0 {
        return Ok(vec![remove(history_path(None))]);
    }
    let mut ops = Vec::new();
    // Commonly the new entries in front of what is held; else what is held is replaced.
    let added = match new.strip_suffix(held.as_slice()) {
        Some(added) => added,
        None => {
            ops.extend((0..held.len()).map(|_| remove(history_path(Some(0)))));
            new
        }
    };
    for (index, entry) in added.iter().enumerate() {
        ops.push(add(history_path(Some(index)), serde_json::to_value(entry)?));
    }
    let len = stored_len - held.len() + new.len();
    for index in (limit.max(1)..len).rev() {
        ops.push(remove(history_path(Some(index))));
    }
    Ok(ops)
}

/// `/status`, then `tokens` (escaped as JSON pointer tokens).
fn status_path<'a>(tokens: impl IntoIterator<Item = &'a str>) -> PointerBuf {
    let mut path = PointerBuf::from_tokens(["status"]);
    for token in tokens {
        path.push_back(token);
    }
    path
}

/// `/status/history`, or its entry at `index`.
fn history_path(index: Option<usize>) -> PointerBuf {
    let mut path = status_path(["history"]);
    if let Some(index) = index {
        path.push_back(index);
    }
    path
}

fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

fn remove(path: PointerBuf) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation { path })
}

#[cfg(test)]
mod tests;
