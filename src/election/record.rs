//! The leader election record kept in a Lease's spec (client-go's `LeaderElectionRecord`).

use std::time::Duration;

use jiff::{Timestamp, Unit};
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// Who holds the Lease, since when, and for how long a silent holder is trusted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaseRecord {
    /// The holder's identity; empty when released.
    pub holder: String,
    /// How long the holder is trusted without renewing, in whole seconds.
    pub lease_duration_seconds: i32,
    /// When the holder acquired the Lease.
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed it.
    pub renew_time: Option<Timestamp>,
    /// How many times the Lease changed hands.
    pub transitions: i32,
}

impl LeaseRecord {
    /// The record of `holder` taking or renewing the Lease at `now`.
    pub fn held_by(holder: &str, lease_duration: Duration, now: Timestamp) -> LeaseRecord {
        let now = to_micros(now);
        LeaseRecord {
            holder: holder.to_owned(),
            lease_duration_seconds: i32::try_from(lease_duration.as_secs()).unwrap_or(i32::MAX),
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 0,
        }
    }

    /// The record a holder leaves when it steps down at `now` (as client-go writes it:
    /// no holder, a 1 s duration), keeping the transition count.
    pub fn released(&self, now: Timestamp) -> LeaseRecord {
        let now = to_micros(now);
        LeaseRecord {
            holder: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: self.transitions,
        }
    }

    /// How long this record's holder is trusted after the record was observed.
    pub fn lease_duration(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.lease_duration_seconds).unwrap_or(0))
    }

    /// Reads the record from a Lease's spec; missing fields read as empty.
    pub fn from_spec(spec: &LeaseSpec) -> LeaseRecord {
        LeaseRecord {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// Writes the record into a Lease's spec, leaving other fields as they are.
    pub fn write_to(&self, spec: &mut LeaseSpec) {
        spec.holder_identity = Some(self.holder.clone());
        spec.lease_duration_seconds = Some(self.lease_duration_seconds);
        spec.acquire_time = self.acquire_time.map(MicroTime);
        spec.renew_time = self.renew_time.map(MicroTime);
        spec.lease_transitions = Some(self.transitions);
    }
}

/// `time` cut to the Lease's precision (microseconds), so a record reads back as written.
fn to_micros(time: Timestamp) -> Timestamp {
    time.round(Unit::Microsecond).unwrap_or(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_the_lease_spec_unchanged() {
        let now: Timestamp = "2026-11-30T10:00:00.123456789Z".parse().unwrap();
        let mut record = LeaseRecord::held_by("a", Duration::from_secs(15), now);
        record.transitions = 3;
        let mut spec = LeaseSpec::default();
        record.write_to(&mut spec);
        assert_eq!(LeaseRecord::from_spec(&spec), record);
        assert_eq!(
            record.renew_time.unwrap().to_string(),
            "2026-11-30T10:00:00.123457Z"
        );
    }

    #[test]
    fn a_released_record_has_no_holder_and_keeps_the_transitions() {
        let now = Timestamp::UNIX_EPOCH;
        let mut held = LeaseRecord::held_by("a", Duration::from_secs(15), now);
        held.transitions = 2;
        let released = held.released(now);
        assert_eq!(released.holder, "");
        assert_eq!(released.lease_duration_seconds, 1);
        assert_eq!(released.transitions, 2);
    }
}
