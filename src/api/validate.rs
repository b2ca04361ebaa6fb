//! Turns a `TidalScheduler` into the engine's [`Tide`], checking everything the schema
//! checks at admission (so `plan` finds the same errors offline, and the controller stays
//! safe if an older CRD is installed) plus what the schema cannot check: cron grammar, time
//! zones, never-firing rules, cross-namespace targets.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;

use super::calendar::{CalendarProblem, CalendarRef, Calendars};
use super::spec::{self, ApplyMode, TargetRef, TidalScheduler};
use crate::schedule::{Calendar, Cron, CronError, Days, Rule, Tide};

/// Labels that link the object to the decision framework (oFEP-0030).
pub const FRAMEWORK_LABELS: [&str; 2] = ["elasticscaler.io/name", "elasticscaler.io/namespace"];

/// Most rules an object may have.
const MAX_RULES: usize = 100;

/// A spec the controller can act on, with non-fatal findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidSpec {
    /// The rules, parsed and anchored.
    pub tide: Tide,
    /// Findings worth a Warning event that do not stop the object (e.g. missing labels).
    pub warnings: Vec<String>,
}

/// One problem in a spec; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecProblem {
    /// A rule's cron expression or time zone is invalid.
    #[error("spec.triggers.times.rules[{index}] ({rule}): {error}")]
    Cron {
        /// Position of the rule.
        index: usize,
        /// Name of the rule.
        rule: String,
        /// What is wrong.
        error: CronError,
    },
    /// The target is in another namespace.
    #[error(
        "spec.targetRef.namespace: `{target}` differs from the object's namespace `{own}`: \
         a TidalScheduler can only scale a workload in its own namespace"
    )]
    CrossNamespaceTarget {
        /// Namespace of the target.
        target: String,
        /// Namespace of the object.
        own: String,
    },
    /// A required `targetRef` field is empty.
    #[error("spec.targetRef.{field}: must not be empty")]
    EmptyTargetField {
        /// `apiVersion`, `kind` or `name`.
        field: &'static str,
    },
    /// A `targetRef` field that goes into request paths is not of its Kubernetes form.
    #[error("spec.targetRef.{field}: `{value}` {expected}")]
    MalformedTargetField {
        /// `apiVersion`, `name` or `namespace`.
        field: &'static str,
        /// The value given.
        value: String,
        /// What it must be, as a phrase starting with "must".
        expected: &'static str,
    },
    /// No rules, or more than 100.
    #[error("spec.triggers.times.rules: {count} rules; between 1 and 100 are allowed")]
    RuleCount {
        /// How many there are.
        count: usize,
    },
    /// Two rules share a name.
    #[error("spec.triggers.times.rules[{index}].name: `{name}` is used by an earlier rule")]
    DuplicateRuleName {
        /// Position of the second use.
        index: usize,
        /// The name.
        name: String,
    },
    /// A rule name is not a DNS-1123 label.
    #[error(
        "spec.triggers.times.rules[{index}].name: `{name}` is not a DNS-1123 label \
         (lowercase letters, digits and '-', at most 63, starting and ending alphanumeric)"
    )]
    InvalidRuleName {
        /// Position of the rule.
        index: usize,
        /// The name.
        name: String,
    },
    /// Negative replicas.
    #[error("spec.triggers.times.rules[{index}].replicas: {replicas} is negative")]
    NegativeReplicas {
        /// Position of the rule.
        index: usize,
        /// The value.
        replicas: i32,
    },
    /// `historyLimit` outside 1..=100.
    #[error("spec.historyLimit: {value} is outside 1-100")]
    HistoryLimit {
        /// The value.
        value: i32,
    },
    /// A rule refers to a calendar that does not exist.
    #[error("spec.triggers.times.rules[{index}].{field} ({rule}): {calendar} not found")]
    MissingCalendar {
        /// Position of the rule.
        index: usize,
        /// Name of the rule.
        rule: String,
        /// `skipDays[i]` or `onlyDays[i]`.
        field: String,
        /// The calendar, e.g. `TidalCalendar shop/uk-holidays`.
        calendar: String,
    },
    /// A rule refers to a calendar whose spec is invalid.
    #[error(
        "spec.triggers.times.rules[{index}].{field} ({rule}): {calendar} is invalid: {}",
        join(problems)
    )]
    InvalidCalendar {
        /// Position of the rule.
        index: usize,
        /// Name of the rule.
        rule: String,
        /// `skipDays[i]` or `onlyDays[i]`.
        field: String,
        /// The calendar.
        calendar: String,
        /// What is wrong with it.
        problems: Vec<CalendarProblem>,
    },
}

fn join(problems: &[CalendarProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Validates `object` as the controller does, its calendar references looked up in
/// `calendars`. `@every` rules are anchored at the object's creation, or at
/// `anchor_if_new` for an object not created yet (e.g. in `plan`).
pub fn validate(
    object: &TidalScheduler,
    calendars: &dyn Calendars,
    anchor_if_new: Timestamp,
) -> Result<ValidSpec, Vec<SpecProblem>> {
    let spec = &object.spec;
    let mut problems = Vec::new();
    let target = &spec.target_ref;
    for (field, value) in [
        ("apiVersion", &target.api_version),
        ("kind", &target.kind),
        ("name", &target.name),
    ] {
        if value.is_empty() {
            problems.push(SpecProblem::EmptyTargetField { field });
        }
    }
    problems.extend(malformed_target_fields(target));
    if let (Some(theirs), Some(own)) = (&target.namespace, &object.metadata.namespace)
        && theirs != own
    {
        problems.push(SpecProblem::CrossNamespaceTarget {
            target: theirs.clone(),
            own: own.clone(),
        });
    }
    if !(1..=100).contains(&spec.history_limit) {
        problems.push(SpecProblem::HistoryLimit {
            value: spec.history_limit,
        });
    }
    let rules = &spec.triggers.times.rules;
    if rules.is_empty() || rules.len() > MAX_RULES {
        problems.push(SpecProblem::RuleCount { count: rules.len() });
    }
    let anchor = object
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(anchor_if_new, |t| t.0)
        .as_second();
    let mut parsed = Vec::with_capacity(rules.len());
    let mut resolver = Resolver {
        calendars,
        namespace: object.metadata.namespace.as_deref().unwrap_or("default"),
        seen: HashMap::new(),
    };
    for (index, rule) in rules.iter().enumerate() {
        if !is_dns1123_label(&rule.name) {
            problems.push(SpecProblem::InvalidRuleName {
                index,
                name: rule.name.clone(),
            });
        } else if rules[..index]
            .iter()
            .any(|earlier| earlier.name == rule.name)
        {
            problems.push(SpecProblem::DuplicateRuleName {
                index,
                name: rule.name.clone(),
            });
        }
        if rule.replicas < 0 {
            problems.push(SpecProblem::NegativeReplicas {
                index,
                replicas: rule.replicas,
            });
        }
        let days = resolver.days(index, rule, &mut problems);
        match Cron::parse(&rule.cron, rule.time_zone.as_deref()) {
            Ok(cron) => parsed.push(Rule {
                name: rule.name.clone(),
                cron: cron.anchored_at(anchor),
                replicas: rule.replicas,
                suspended: rule.suspend,
                days,
            }),
            Err(error) => problems.push(SpecProblem::Cron {
                index,
                rule: rule.name.clone(),
                error,
            }),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(ValidSpec {
        tide: Tide::new(parsed),
        warnings: warnings(object),
    })
}

/// Looks calendars up once per object, however many rules share them.
struct Resolver<'a> {
    calendars: &'a dyn Calendars,
    namespace: &'a str,
    seen: HashMap<CalendarRef, Result<Arc<Calendar>, Option<Vec<CalendarProblem>>>>,
}

impl Resolver<'_> {
    /// The days `rule` may fire on; missing or invalid calendars are added to `problems`.
    fn days(&mut self, index: usize, rule: &spec::Rule, problems: &mut Vec<SpecProblem>) -> Days {
        let mut lists = [Vec::new(), Vec::new()];
        for (list, (field, references)) in lists
            .iter_mut()
            .zip([("skipDays", &rule.skip_days), ("onlyDays", &rule.only_days)])
        {
            for (position, reference) in references.iter().enumerate() {
                let field = format!("{field}[{position}]");
                match self.calendar(reference) {
                    Ok(calendar) => list.push(calendar),
                    Err(None) => problems.push(SpecProblem::MissingCalendar {
                        index,
                        rule: rule.name.clone(),
                        field,
                        calendar: reference.describe(self.namespace),
                    }),
                    Err(Some(found)) => problems.push(SpecProblem::InvalidCalendar {
                        index,
                        rule: rule.name.clone(),
                        field,
                        calendar: reference.describe(self.namespace),
                        problems: found,
                    }),
                }
            }
        }
        let [skip, only] = lists;
        Days::new(skip, only)
    }

    fn calendar(
        &mut self,
        reference: &CalendarRef,
    ) -> Result<Arc<Calendar>, Option<Vec<CalendarProblem>>> {
        let (calendars, namespace) = (self.calendars, self.namespace);
        self.seen
            .entry(reference.clone())
            .or_insert_with(|| {
                let spec = calendars.find(reference, namespace).ok_or(None)?;
                spec.to_calendar(&reference.describe(namespace))
                    .map(Arc::new)
                    .map_err(Some)
            })
            .clone()
    }
}

fn warnings(object: &TidalScheduler) -> Vec<String> {
    let labels = object.metadata.labels.as_ref();
    let missing: Vec<&str> = FRAMEWORK_LABELS
        .into_iter()
        .filter(|label| labels.is_none_or(|l| !l.contains_key(*label)))
        .collect();
    if object.spec.apply == ApplyMode::Status && !missing.is_empty() {
        vec![format!(
            "metadata.labels: {} missing: with apply: Status the decision framework finds this \
             object by these labels",
            missing.join(" and ")
        )]
    } else {
        Vec::new()
    }
}

/// The fields of `target` that reach request paths (discovery, `/scale`) and are not of
/// their Kubernetes form; empty ones are reported apart.
fn malformed_target_fields(target: &TargetRef) -> Vec<SpecProblem> {
    let mut problems = Vec::new();
    let mut check = |field, value: &str, valid: bool, expected| {
        if !value.is_empty() && !valid {
            problems.push(SpecProblem::MalformedTargetField {
                field,
                value: value.to_owned(),
                expected,
            });
        }
    };
    check(
        "apiVersion",
        &target.api_version,
        is_api_version(&target.api_version),
        "must be GROUP/VERSION or VERSION (e.g. apps/v1, v1): a DNS-1123 subdomain, '/', \
         and a DNS-1035 label",
    );
    check(
        "name",
        &target.name,
        is_dns1123_subdomain(&target.name),
        "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and \
         ending with a letter or digit), as the name of a Kubernetes object",
    );
    if let Some(namespace) = &target.namespace {
        check(
            "namespace",
            namespace,
            is_dns1123_label(namespace),
            "must be a DNS-1123 label (lowercase letters, digits and '-', starting and ending \
             with a letter or digit), as the name of a namespace",
        );
    }
    problems
}

/// `GROUP/VERSION` or `VERSION`: a DNS-1123 subdomain and a DNS-1035 label.
fn is_api_version(text: &str) -> bool {
    let (group, version) = match text.split_once('/') {
        Some((group, version)) => (Some(group), version),
        None => (None, text),
    };
    group.is_none_or(is_dns1123_subdomain)
        && is_dns1123_label(version)
        && version.starts_with(|c: char| c.is_ascii_lowercase())
}

/// RFC 1123 subdomain as Kubernetes checks it: dot-separated
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 253 characters in all.
fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_label_shaped)
}

/// RFC 1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
fn is_dns1123_label(name: &str) -> bool {
    name.len() <= 63 && is_label_shaped(name)
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length.
fn is_label_shaped(name: &str) -> bool {
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

#[cfg(test)]
mod tests;
