//! The reasons of the Events this controller emits, and their severities.

/// Reasons of the Events this controller emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A trigger was applied on time.
    Triggered,
    /// A trigger was applied late: missed while nobody was acting, or before creation.
    CaughtUp,
    /// The level changed without a new trigger (a spec edit).
    LevelChanged,
    /// Several rules fire at the same instant.
    RuleConflict,
    /// The spec cannot be acted on.
    InvalidSpec,
    /// A non-fatal finding (missing labels, an HPA fighting over the target).
    SpecWarning,
    /// The target does not exist.
    TargetNotFound,
    /// The target has no `/scale`.
    TargetNotScalable,
    /// Applying the level failed.
    ApplyFailed,
    /// The level was applied after failures.
    Recovered,
    /// This replica's clock is too far from the API server's: it does not lead (an Event
    /// about the Lease).
    ClockSkew,
    /// The stored status has a value this controller cannot have written (a watermark in
    /// the future): it was corrected.
    ImpossibleStatus,
}

impl Reason {
    /// The Event's `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Triggered => "Triggered",
            Reason::CaughtUp => "CaughtUp",
            Reason::LevelChanged => "LevelChanged",
            Reason::RuleConflict => "RuleConflict",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::SpecWarning => "SpecWarning",
            Reason::TargetNotFound => "TargetNotFound",
            Reason::TargetNotScalable => "TargetNotScalable",
            Reason::ApplyFailed => "ApplyFailed",
            Reason::Recovered => "Recovered",
            Reason::ClockSkew => "ClockSkew",
            Reason::ImpossibleStatus => "ImpossibleStatus",
        }
    }

    /// The Event's `type`.
    pub fn severity(self) -> &'static str {
        match self {
            Reason::Triggered | Reason::CaughtUp | Reason::LevelChanged | Reason::Recovered => {
                "Normal"
            }
            _ => "Warning",
        }
    }

    /// The Event's `action`.
    pub fn action(self) -> &'static str {
        match self {
            Reason::InvalidSpec | Reason::SpecWarning | Reason::RuleConflict => "Validate",
            Reason::TargetNotFound | Reason::TargetNotScalable => "ResolveTarget",
            Reason::ImpossibleStatus => "ReadStatus",
            _ => "Apply",
        }
    }
}
