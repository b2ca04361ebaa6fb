//! A failure said once: a log line for the first failure of a run of them and one for
//! the recovery, with how many failed meanwhile — not a line per failure, which floods
//! the log during an outage (a collector down, a 429 storm) and hides the rest.

/// Whether something that keeps being retried works, counting what failed since it last
/// did.
#[derive(Debug, Default)]
pub struct Outage {
    /// Failed since it last worked; `None` while it works.
    failed: Option<u64>,
}

impl Outage {
    /// Records `count` failures; true when they are the first since it last worked (say
    /// so).
    pub fn failed(&mut self, count: u64) -> bool {
        let first = self.failed.is_none();
        *self.failed.get_or_insert(0) += count;
        first
    }

    /// Records a success; what failed before it, if it was failing (say so).
    pub fn succeeded(&mut self) -> Option<u64> {
        self.failed.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_said_once_and_its_end_with_what_failed() {
        let mut outage = Outage::default();
        assert_eq!(outage.succeeded(), None, "working: nothing to say");
        assert!(outage.failed(3), "the first failure is said");
        assert!(!outage.failed(4), "further failures are not");
        assert_eq!(outage.succeeded(), Some(7), "the end, with what failed");
        assert_eq!(outage.succeeded(), None);
        assert!(outage.failed(1), "a new outage is said again");
    }
}
