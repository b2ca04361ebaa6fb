//! The schedule engine: cron grammar, time zones, DST, fire times and the tide level.
//!
//! Pure code: no clock reads (every function takes the instant it works on), no Kubernetes
//! types. The grammar is robfig/cron v3's six-field parser with descriptors and a
//! `CRON_TZ=`/`TZ=` prefix; the DST policy is docs/design.md §3's.
//!
//! ```
//! use jiff::Timestamp;
//! use tidal_scheduler::schedule::{Cron, Rule, Tide};
//!
//! // 02:30 does not exist in New York on 2026-03-08: a fixed time fires right after the gap.
//! let cron = Cron::parse("CRON_TZ=America/New_York 0 30 2 * * *", None)?;
//! let after: Timestamp = "2026-03-07T12:00:00Z".parse()?;
//! assert_eq!(cron.next_after(after).unwrap().to_string(), "2026-03-08T07:00:00Z");
//!
//! // The latest rule to fire sets the level.
//! let rule = |name: &str, cron: &str, replicas| -> Result<Rule, Box<dyn std::error::Error>> {
//!     Ok(Rule { name: name.into(), cron: Cron::parse(cron, None)?, replicas, suspended: false, days: Default::default() })
//! };
//! let tide = Tide::new(vec![
//!     rule("day", "CRON_TZ=Asia/Shanghai 0 0 8 * * *", 20)?,
//!     rule("night", "CRON_TZ=Asia/Shanghai 0 0 23 * * *", 5)?,
//! ]);
//! let level = tide.level_at("2026-11-30T12:00:00Z".parse()?).unwrap();
//! assert_eq!((level.rule.as_str(), level.replicas), ("day", 20));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bits;
mod civil;
mod days;
mod duration;
mod error;
mod expression;
mod field;
mod fire;
mod tide;
mod zone;

pub use days::{Calendar, Day, Days, Refusal};
pub use duration::parse_go_duration;
pub use error::CronError;
pub use expression::Cron;
pub use field::Field;
pub use tide::{LOOKBACK, Moment, Rule, RuleFires, SUPERSEDED_CAP, Tide, Trigger};
pub use zone::Zone;
