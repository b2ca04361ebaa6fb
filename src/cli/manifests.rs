//! Reads manifest files: their TidalSchedulers and the calendars they may refer to.

use std::collections::HashMap;

use serde::de::DeserializeOwned;

use super::error::CliError;
use crate::api::{
    CalendarKind, CalendarRef, Calendars, ClusterTidalCalendar, TidalCalendar, TidalCalendarSpec,
    TidalScheduler,
};

/// The API version of every kind read here.
const API_VERSION: &str = "scheduling.tidal.io/v1alpha1";

/// What a set of files (or a cluster) holds: objects, and calendars by name.
#[derive(Debug, Default)]
pub struct Manifests {
    /// TidalSchedulers, with the file each came from.
    pub objects: Vec<(String, TidalScheduler)>,
    /// TidalCalendars and ClusterTidalCalendars.
    pub calendars: CalendarSet,
}

/// Calendars by namespace and name, and cluster calendars by name.
#[derive(Debug, Default, Clone)]
pub struct CalendarSet {
    namespaced: HashMap<(String, String), TidalCalendarSpec>,
    cluster: HashMap<String, TidalCalendarSpec>,
}

impl CalendarSet {
    /// Adds a TidalCalendar (namespace `default` if it names none).
    pub fn add_namespaced(&mut self, calendar: TidalCalendar) {
        let namespace = calendar
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = calendar.metadata.name.clone().unwrap_or_default();
        self.namespaced.insert((namespace, name), calendar.spec);
    }

    /// Adds a ClusterTidalCalendar.
    pub fn add_cluster(&mut self, calendar: ClusterTidalCalendar) {
        let name = calendar.metadata.name.clone().unwrap_or_default();
        self.cluster.insert(name, calendar.spec.calendar);
    }
}

impl Calendars for CalendarSet {
    fn find(&self, reference: &CalendarRef, namespace: &str) -> Option<TidalCalendarSpec> {
        match reference.kind {
            CalendarKind::TidalCalendar => self
                .namespaced
                .get(&(namespace.to_owned(), reference.name.clone()))
                .cloned(),
            CalendarKind::ClusterTidalCalendar => self.cluster.get(&reference.name).cloned(),
        }
    }
}

impl Manifests {
    /// Reads every file ('-' is stdin); other kinds are skipped with a note on stderr.
    pub fn read(paths: &[String]) -> Result<Manifests, CliError> {
        let mut manifests = Manifests::default();
        for path in paths {
            manifests.read_file(path)?;
        }
        Ok(manifests)
    }

    fn read_file(&mut self, path: &str) -> Result<(), CliError> {
        let text = if path == "-" {
            std::io::read_to_string(std::io::stdin())
        } else {
            std::fs::read_to_string(path)
        }
        .map_err(|source| CliError::Read {
            path: path.to_owned(),
            source,
        })?;
        let manifest = |message: String| CliError::Manifest {
            path: path.to_owned(),
            message,
        };
        let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| manifest(format!("not valid YAML: {e}")))?;
        for (index, document) in documents.into_iter().enumerate() {
            if document.is_null() {
                continue;
            }
            let field = |name: &str| {
                document
                    .get(name)
                    .and_then(|k| k.as_str())
                    .unwrap_or("")
                    .to_owned()
            };
            let (kind, api_version) = (field("kind"), field("apiVersion"));
            let number = index + 1;
            if api_version != API_VERSION {
                eprintln!("note: {path}: document {number}: skipping {api_version} {kind}");
                continue;
            }
            match kind.as_str() {
                "TidalScheduler" => self
                    .objects
                    .push((path.to_owned(), decode(document, path, number)?)),
                "TidalCalendar" => self
                    .calendars
                    .add_namespaced(decode(document, path, number)?),
                "ClusterTidalCalendar" => {
                    self.calendars.add_cluster(decode(document, path, number)?)
                }
                _ => eprintln!("note: {path}: document {number}: skipping {api_version} {kind}"),
            }
        }
        Ok(())
    }
}

/// Document `number` of `path` as a `K`.
fn decode<K: DeserializeOwned>(
    document: serde_json::Value,
    path: &str,
    number: usize,
) -> Result<K, CliError> {
    serde_json::from_value(document).map_err(|e| CliError::Manifest {
        path: path.to_owned(),
        message: format!("document {number}: {e}"),
    })
}
