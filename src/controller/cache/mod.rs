//! What the controller watches and how fresh it is: one [`Scope`] per watched namespace
//! (its TidalSchedulers and calendar caches), the watch itself ([`list_watch`]), the records
//! that let a reconcile read its own writes ([`consistency`]), and the targets'
//! resourceVersions and HPAs that spare a Scale-mode trigger its reads ([`target_versions`],
//! kept as each [`watched`] kind holds them), all read off the wire without what no cache keeps
//! ([`wire`]), and the kinds targets name as discovery found them ([`kinds`]).

pub(crate) mod calendars;
pub(crate) mod consistency;
pub(crate) mod kinds;
pub(crate) mod list_watch;
mod scope;
pub(crate) mod target_versions;
mod watched;
mod wire;

pub(crate) use scope::{Scope, slim_scheduler};
pub use wire::Slim;
