//! Why a cron expression (or its time zone) is not accepted.

use super::field::Field;

/// Why a cron expression (or its time zone) is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// The expression is the empty string.
    #[error("cron expression is empty")]
    Empty,
    /// A `TZ=`/`CRON_TZ=` prefix is not followed by a space (robfig panics on this).
    #[error("time zone prefix `{prefix}` must be followed by a space and the schedule")]
    PrefixWithoutSpace {
        /// The whole expression.
        prefix: String,
    },
    /// The zone is not an exact IANA name of the bundled database (or is `Local`/empty).
    #[error("unknown time zone `{zone}` (expected an IANA name such as Asia/Shanghai)")]
    UnknownZone {
        /// The name given.
        zone: String,
    },
    /// Neither a prefix nor a `timeZone` names the zone; it is never taken from the process.
    #[error("no time zone: add a `CRON_TZ=<zone> ` prefix or set timeZone")]
    MissingZone,
    /// Both a prefix and a `timeZone` name a zone.
    #[error(
        "time zone given twice: in the cron prefix ({prefix}) and in timeZone ({field}); keep one"
    )]
    ZoneGivenTwice {
        /// Zone of the prefix.
        prefix: String,
        /// Zone of the `timeZone` field.
        field: String,
    },
    /// Not exactly six whitespace-separated fields.
    #[error("expected 6 fields (second minute hour day-of-month month day-of-week), found {found}")]
    FieldCount {
        /// How many fields there are.
        found: usize,
    },
    /// A field item is not a number or a name.
    #[error("{field}: `{token}` in `{item}` is not a number or a name")]
    Number {
        /// The field.
        field: Field,
        /// The list item.
        item: String,
        /// The part that failed.
        token: String,
    },
    /// Quartz extensions `L`, `W`, `#`.
    #[error("{field}: `{item}` uses L, W or # (not supported)")]
    Unsupported {
        /// The field.
        field: Field,
        /// The list item.
        item: String,
    },
    /// A value outside the field's range.
    #[error("{field}: {value} in `{item}` is out of range {min}-{max}")]
    OutOfRange {
        /// The field.
        field: Field,
        /// The list item.
        item: String,
        /// The offending value.
        value: u64,
        /// Smallest allowed.
        min: u32,
        /// Largest allowed.
        max: u32,
    },
    /// `a-b` with `a > b`.
    #[error("{field}: range `{item}` starts after it ends ({start} > {end})")]
    RangeReversed {
        /// The field.
        field: Field,
        /// The list item.
        item: String,
        /// Start of the range.
        start: u64,
        /// End of the range.
        end: u64,
    },
    /// A step of zero.
    #[error("{field}: step 0 in `{item}`: a step must be at least 1")]
    ZeroStep {
        /// The field.
        field: Field,
        /// The list item.
        item: String,
    },
    /// Too many `-` or `/` in one item.
    #[error("{field}: `{item}` has {problem}")]
    Syntax {
        /// The field.
        field: Field,
        /// The list item.
        item: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// A field with no value at all (e.g. `,`).
    #[error("{field}: `{text}` lists no value")]
    EmptyField {
        /// The field.
        field: Field,
        /// The field's text.
        text: String,
    },
    /// An `@` word that is not a descriptor.
    #[error(
        "unknown descriptor `{descriptor}` (expected @yearly, @annually, @monthly, @weekly, \
         @daily, @midnight, @hourly or @every <duration>)"
    )]
    UnknownDescriptor {
        /// What was written.
        descriptor: String,
    },
    /// `@every` with something that is not a Go duration.
    #[error("@every: invalid duration `{duration}`: {problem}")]
    InvalidDuration {
        /// What was written.
        duration: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// `@every` with a zero or negative duration, which robfig/cron rounds up to one second:
    /// a typo would fire every second.
    #[error("@every: duration `{duration}` is not positive (it would fire every second)")]
    NonPositiveDuration {
        /// What was written.
        duration: String,
    },
    /// The fields can never match a date (e.g. 30 February).
    #[error("`{expression}` can never fire: no month it allows has such a day")]
    NeverFires {
        /// The expression.
        expression: String,
    },
}
