//! What a campaign reports as it goes: metrics, logs and Events hook in here.

use crate::clock::ClockSkew;

/// What a campaign reports as it goes (metrics, logs and Events hook in here).
pub trait Observer: Send + Sync + 'static {
    /// This process became the leader or stopped being it.
    fn leading(&self, leading: bool);

    /// This process's clock went beyond its bound (it does not campaign, and stepped
    /// down if it led), or (`None`) came back within it.
    fn clock_skewed(&self, _skew: Option<ClockSkew>) {}
}

impl Observer for () {
    fn leading(&self, _: bool) {}
}
