//! The one invariant checker of every scenario. It judges only what the API server saw:
//! the history entries of the objects' status (as a watch delivered them, each stamped
//! when the watcher first saw it), the Lease's holders over time, and the writes of the
//! audit log. Pure: the runner gathers the observations, [`check`] counts.

use std::collections::{BTreeMap, HashMap};

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use tidal_harness::audit::Write;
use tidal_scheduler::api::{HistoryEntry, TriggerResult};
use tidal_scheduler::schedule::Tide;

/// A history entry, the first time the watcher saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The TidalScheduler it belongs to.
    pub object: String,
    /// The entry as first seen.
    pub entry: HistoryEntry,
    /// When the watcher first saw it.
    pub observed: Timestamp,
}

/// The Lease's holder from `at` on ("" when released), as its watch delivered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Holding {
    /// When the watcher saw the change.
    pub at: Timestamp,
    /// The holder's identity.
    pub holder: String,
}

/// One injected fault.
#[derive(Debug, Clone, Serialize)]
pub struct Fault {
    /// What was done, e.g. `sigkill`, `black-hole`.
    pub kind: String,
    /// To whom, e.g. a replica's name or `kube-apiserver`.
    pub target: String,
    /// Whether the target led when the fault began (its failover is measured).
    pub leader: bool,
    /// Whether the target comes back under the same identity (a container kubelet
    /// restarts in its pod), so that its own renewal can end the failover.
    pub restarted_in_place: bool,
    /// When it began.
    pub start: Timestamp,
    /// When it was healed (equal to `start` for an instant fault such as a kill).
    pub end: Timestamp,
    /// For a fault that slows requests: one request's round trip while it held, ms.
    pub round_trip_ms: Option<f64>,
}

/// Everything a scenario observed.
#[derive(Debug, Default)]
pub struct Observations {
    /// Each object's tide (its rules).
    pub tides: BTreeMap<String, Tide>,
    /// Entries in the order first seen.
    pub seen: Vec<Seen>,
    /// Entries seen again with different contents, or twice in one status.
    pub rewritten: usize,
    /// Every update of the Lease (renewals included).
    pub lease_updates: Vec<Holding>,
    /// The controller replicas' writes, as audited (empty when there is no audit log).
    pub writes: Vec<Write>,
    /// Whether `writes` comes from an audit log (otherwise writes are not judged).
    pub audited: bool,
    /// The faults injected.
    pub faults: Vec<Fault>,
    /// From when instants are accounted for (every object had an on-time trigger by then).
    pub from: Timestamp,
    /// Until when: instants up to here must be applied or superseded.
    pub until: Timestamp,
}

/// The verdict on one scenario: counts, and the samples behind the percentiles.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    /// Fire instants in the window (from each object's last entry before it opens), over
    /// all objects: on time + caught up + failed + superseded + lost, when none is
    /// duplicated.
    pub instants: usize,
    /// Applied when due.
    pub on_time: usize,
    /// Applied late, as a catch-up.
    pub caught_up: usize,
    /// Replaced by a later catch-up, never applied (by design).
    pub superseded: usize,
    /// Recorded as failed (the level is still pursued).
    pub failed: usize,
    /// Neither applied nor superseded.
    pub lost: usize,
    /// The objects with lost instants, and how many each.
    pub lost_in: Vec<(String, usize)>,
    /// Applied or counted more than once.
    pub duplicated: usize,
    /// Applied before their instant.
    pub early: usize,
    /// Writes accepted from a replica whose term had ended, to an object another replica
    /// had written since it last did (a successor's write undone).
    pub zombie_writes: usize,
    /// Writes accepted from a replica whose term had ended, to an object no successor had
    /// written yet (harmless: nothing of the new term is overwritten).
    pub late_writes: usize,
    /// Writes from a replica whose term had ended that the API server refused (fencing).
    pub fenced_writes: usize,
    /// Times a replica took the Lease while its clock was skewed (a clock fault on it
    /// began more than 2 s earlier and had not ended).
    pub skewed_leads: usize,
    /// Requests of the replicas the API server throttled (HTTP 429).
    pub throttled: usize,
    /// Instant → first seen applied, ms, for every applied instant.
    pub lateness_ms: Vec<f64>,
    /// Fault → a new holder of the Lease, ms, for every fault of a leader.
    pub failover_ms: Vec<f64>,
}

/// Counts what `observed` shows.
pub fn check(observed: &Observations) -> Verdict {
    let mut verdict = Verdict {
        duplicated: observed.rewritten,
        ..Verdict::default()
    };
    for (object, tide) in &observed.tides {
        let lost = verdict.lost;
        account_instants(observed, object, tide, &mut verdict);
        if verdict.lost > lost {
            verdict.lost_in.push((object.clone(), verdict.lost - lost));
        }
    }
    if observed.audited {
        judge_writes(&observed.writes, &mut verdict);
    }
    verdict.failover_ms = failovers(&observed.faults, &observed.lease_updates);
    verdict.skewed_leads = skewed_leads(&observed.faults, &holdings(&observed.lease_updates));
    verdict
}

/// Accounts for the instants of one object in `(from, until]`: consecutive entries
/// must supersede exactly the instants between them.
fn account_instants(observed: &Observations, object: &str, tide: &Tide, verdict: &mut Verdict) {
    let mut entries: Vec<&Seen> = observed
        .seen
        .iter()
        .filter(|seen| seen.object == object)
        .collect();
    entries.sort_by_key(|seen| seen.entry.schedule_time.0);
    // The last entry at or before the window opens anchors the count.
    let anchor = entries
        .iter()
        .rposition(|seen| seen.entry.schedule_time.0 <= observed.from);
    let Some(anchor) = anchor else {
        // No entry before the window: every instant in it must still be accounted for.
        let instants = count_instants(tide, observed.from, observed.until);
        verdict.lost += instants;
        verdict.instants += instants;
        return;
    };
    let window = &entries[anchor..];
    let (first, last) = (window[0], window[window.len() - 1]);
    let mut previous = first.entry.schedule_time.0;
    verdict.instants += count_instants(
        tide,
        previous,
        observed.until.max(last.entry.schedule_time.0),
    );
    for seen in &window[1..] {
        let entry = &seen.entry;
        let at = entry.schedule_time.0;
        if at == previous {
            verdict.duplicated += 1;
            continue;
        }
        let missed = tide.superseded_between(previous, at);
        let counted = entry.superseded.max(0) as usize;
        verdict.superseded += counted.min(missed);
        verdict.lost += missed.saturating_sub(counted);
        verdict.duplicated += counted.saturating_sub(missed);
        match (entry.result, entry.catch_up) {
            (TriggerResult::Failed, _) => verdict.failed += 1,
            (TriggerResult::Succeeded, false) => verdict.on_time += 1,
            (TriggerResult::Succeeded, true) => verdict.caught_up += 1,
        }
        if entry.execution_time.0 < at {
            verdict.early += 1;
        }
        let lateness = seen.observed.duration_since(at);
        verdict.lateness_ms.push(lateness.as_secs_f64() * 1000.0);
        previous = at;
    }
    // Instants after the last entry, up to the end of the window, were never applied.
    verdict.lost += count_instants(tide, previous, observed.until);
}

/// Fire instants of `tide` in `(after, until]`.
fn count_instants(tide: &Tide, after: Timestamp, until: Timestamp) -> usize {
    if until <= after {
        return 0;
    }
    tide.superseded_between(after, until + SignedDuration::from_nanos(1))
}

/// Judges the replicas' writes in the order the API server received them: the holder
/// is whoever last wrote the Lease successfully; a write from anyone else comes from an
/// ended term.
fn judge_writes(writes: &[Write], verdict: &mut Verdict) {
    const LEASES: &str = "leases";
    let mut holder: Option<&str> = None;
    // Per object (resource/name): the replica that last wrote it successfully.
    let mut last_writer: HashMap<(String, String), &str> = HashMap::new();
    for write in writes {
        if write.code == 429 {
            verdict.throttled += 1;
        }
        if write.resource == LEASES {
            if write.code < 300 {
                holder = Some(&write.replica);
            }
            continue;
        }
        if write.resource == "events" {
            continue;
        }
        let object = (write.resource.clone(), write.name.clone());
        let current = holder == Some(write.replica.as_str());
        if !current {
            if write.code >= 300 {
                verdict.fenced_writes += 1;
            } else if last_writer
                .get(&object)
                .is_some_and(|writer| *writer != write.replica)
            {
                verdict.zombie_writes += 1;
            } else {
                verdict.late_writes += 1;
            }
        }
        if write.code < 300 {
            last_writer.insert(object, &write.replica);
        }
    }
}

/// The first update of the Lease after a fault of `victim` at `since` that shows a
/// leader acting: another holder — or, if the victim is `restarted_in_place`, the victim
/// renewing again at least a second later (a renewal in flight when the fault struck
/// lands within milliseconds; a restarted container takes longer).
pub fn took_over<'a>(
    updates: &'a [Holding],
    victim: &str,
    restarted_in_place: bool,
    since: Timestamp,
) -> Option<&'a Holding> {
    let restart = since + SignedDuration::from_secs(1);
    updates.iter().find(|update| {
        update.at >= since
            && !update.holder.is_empty()
            && (update.holder != victim || (restarted_in_place && update.at >= restart))
    })
}

/// For each fault of a leader: how long until a leader acted again ([`took_over`]).
fn failovers(faults: &[Fault], updates: &[Holding]) -> Vec<f64> {
    faults
        .iter()
        .filter(|fault| fault.leader)
        .filter_map(|fault| {
            let next = took_over(
                updates,
                &fault.target,
                fault.restarted_in_place,
                fault.start,
            )?;
            Some(next.at.duration_since(fault.start).as_secs_f64() * 1000.0)
        })
        .collect()
}

/// The Lease's holders over time: the updates that changed the holder.
pub fn holdings(updates: &[Holding]) -> Vec<Holding> {
    let mut changes: Vec<Holding> = Vec::new();
    for update in updates {
        if changes
            .last()
            .is_none_or(|last| last.holder != update.holder)
        {
            changes.push(update.clone());
        }
    }
    changes
}

/// Lease takeovers by a replica whose clock was skewed at the time (past the 2 s it
/// may take a leader to notice and step down).
fn skewed_leads(faults: &[Fault], holdings: &[Holding]) -> usize {
    let notice = SignedDuration::from_secs(2);
    faults
        .iter()
        .filter(|fault| fault.kind.starts_with("clock"))
        .map(|fault| {
            holdings
                .iter()
                .filter(|h| h.holder == fault.target)
                .filter(|h| h.at > fault.start + notice && h.at < fault.end)
                .count()
        })
        .sum()
}

#[cfg(test)]
mod tests;
