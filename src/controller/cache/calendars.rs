//! The calendars the controller sees: watch caches of TidalCalendars and
//! ClusterTidalCalendars, one pair per watched scope, and which objects a calendar change
//! re-plans.

use std::collections::HashMap;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{
    CalendarKind, CalendarRef, Calendars, ClusterTidalCalendar, TidalCalendar, TidalCalendarSpec,
    TidalScheduler,
};

/// How long a reconcile of an object with calendars waits for their caches' first list.
pub const LISTED_WITHIN: Duration = Duration::from_secs(10);

/// The calendar caches of one scope (a namespace, or all).
#[derive(Clone)]
pub struct CalendarCaches {
    /// TidalCalendars of the scope.
    pub namespaced: Store<TidalCalendar>,
    /// ClusterTidalCalendars.
    pub cluster: Store<ClusterTidalCalendar>,
}

impl Calendars for CalendarCaches {
    fn find(&self, reference: &CalendarRef, namespace: &str) -> Option<TidalCalendarSpec> {
        match reference.kind {
            CalendarKind::TidalCalendar => self
                .namespaced
                .get(&ObjectRef::new(&reference.name).within(namespace))
                .map(|calendar| calendar.spec.clone()),
            CalendarKind::ClusterTidalCalendar => self
                .cluster
                .get(&ObjectRef::new(&reference.name))
                .map(|calendar| calendar.spec.calendar.clone()),
        }
    }
}

impl CalendarCaches {
    /// Whether both caches have listed, waiting up to [`LISTED_WITHIN`].
    pub async fn listed(&self) -> bool {
        let both = async {
            self.namespaced.wait_until_ready().await.is_ok()
                && self.cluster.wait_until_ready().await.is_ok()
        };
        tokio::time::timeout(LISTED_WITHIN, both)
            .await
            .unwrap_or(false)
    }
}

/// Calendar caches by scope (`None`: all namespaces).
#[derive(Clone, Default)]
pub struct CalendarsByScope(HashMap<Option<String>, CalendarCaches>);

impl CalendarsByScope {
    /// Adds the caches of `scope`.
    pub fn insert(&mut self, scope: Option<String>, caches: CalendarCaches) {
        self.0.insert(scope, caches);
    }

    /// The caches that hold the calendars of an object in `namespace`.
    pub fn for_namespace(&self, namespace: &str) -> Option<&CalendarCaches> {
        self.0
            .get(&Some(namespace.to_owned()))
            .or_else(|| self.0.get(&None))
    }
}

/// Whether any rule of `object` refers to calendars.
pub fn uses_calendars(object: &TidalScheduler) -> bool {
    object
        .spec
        .triggers
        .times
        .rules
        .iter()
        .any(|rule| !rule.skip_days.is_empty() || !rule.only_days.is_empty())
}

/// The cached objects whose rules refer to `calendar` (of `kind`): in its namespace for a
/// TidalCalendar, in any for a cluster calendar. What a change of it re-plans.
pub fn users_of(
    objects: &Store<TidalScheduler>,
    calendar: &impl ResourceExt,
    kind: CalendarKind,
) -> Vec<ObjectRef<TidalScheduler>> {
    let reference = CalendarRef {
        name: calendar.name_any(),
        kind,
    };
    let namespace = calendar.namespace();
    objects
        .state()
        .iter()
        .filter(|object| namespace.is_none() || object.namespace() == namespace)
        .filter(|object| {
            object.spec.triggers.times.rules.iter().any(|rule| {
                rule.skip_days
                    .iter()
                    .chain(&rule.only_days)
                    .any(|r| *r == reference)
            })
        })
        .map(|object| ObjectRef::from_obj(object.as_ref()))
        .collect()
}
