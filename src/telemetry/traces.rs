//! OpenTelemetry trace export over OTLP/HTTP, configured by the standard `OTEL_*`
//! variables. Off — no exporter, no thread, no per-trigger work — unless an endpoint is
//! set (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`).
//!
//! Honoured besides the endpoints: `OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL` (`http/protobuf`,
//! the default, or `http/json`), `_HEADERS`, `_TIMEOUT`; `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_TRACES_SAMPLER` and `_ARG`; `OTEL_BSP_MAX_QUEUE_SIZE`,
//! `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, `OTEL_BSP_SCHEDULE_DELAY`; `OTEL_SDK_DISABLED` and
//! `OTEL_TRACES_EXPORTER=none` turn export off.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::{EnvResourceDetector, TelemetryResourceDetector};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanExporter as _};

use super::TelemetryError;
use super::batch::{BatchSettings, BoundedBatch, SpanMetrics};
use super::tls::TlsFiles;

/// The default `service.name`.
pub const SERVICE_NAME: &str = "tidal-scheduler";

/// The instrumentation scope of every span.
pub const SCOPE: &str = "tidal-scheduler";

/// The `tracing` target of the spans that carry a trace context into API requests (see
/// [`carrier`](super::carrier)).
pub const SPANS: &str = "tidal_scheduler::trace";

/// Running trace export.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

/// What the environment asks of trace export.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportSettings {
    /// OTLP/HTTP with protobuf or JSON bodies.
    pub protocol: Protocol,
    /// Queue and batching.
    pub batch: BatchSettings,
    /// Whether the endpoint is `https`.
    pub https: bool,
    /// The TLS files named by the environment.
    pub tls: TlsFiles,
    /// How long one export request may take (`OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT`, ms).
    pub timeout: Duration,
}

/// The default of `OTEL_EXPORTER_OTLP_TIMEOUT` (the specification's 10 s).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl ExportSettings {
    /// Reads `var` (the process environment, in production): `None` when export is off.
    pub fn from_env(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ExportSettings>, TelemetryError> {
        let set = |name: &str| var(name).filter(|value| !value.trim().is_empty());
        let disabled = set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim() == "true")
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
        let endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"));
        if disabled || endpoint.is_none() {
            return Ok(None);
        }
        let (variable, protocol) = [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]
        .into_iter()
        .find_map(|name| set(name).map(|value| (name, value)))
        .unwrap_or(("", "http/protobuf".to_owned()));
        let protocol = match protocol.trim() {
            "http/protobuf" => Protocol::HttpBinary,
            "http/json" => Protocol::HttpJson,
            other => {
                return Err(TelemetryError::Protocol {
                    variable: variable.to_owned(),
                    value: other.to_owned(),
                });
            }
        };
        Ok(Some(ExportSettings {
            protocol,
            ..ExportSettings::for_endpoint(endpoint.as_deref().unwrap_or_default(), &var)
        }))
    }

    /// The settings for `endpoint` (protobuf), the rest from `var`.
    fn for_endpoint(endpoint: &str, var: impl Fn(&str) -> Option<String>) -> ExportSettings {
        let timeout = [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]
        .into_iter()
        .find_map(|name| var(name)?.trim().parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        ExportSettings {
            protocol: Protocol::HttpBinary,
            batch: BatchSettings::from_env(&var),
            https: endpoint
                .trim()
                .get(..8)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://")),
            tls: TlsFiles::from_env(&var),
            timeout,
        }
    }
}

impl Traces {
    /// Starts export as the environment asks — or to `endpoint` (an OTLP/HTTP base URL,
    /// e.g. `http://127.0.0.1:4318`) if given — for the replica `identity`; `None` when
    /// export is off. The queue is measured on `metrics`.
    pub fn start(
        identity: &str,
        endpoint: Option<&str>,
        metrics: SpanMetrics,
    ) -> Result<Option<Traces>, TelemetryError> {
        let var = |name: &str| std::env::var(name).ok();
        let settings = match endpoint {
            Some(endpoint) => Some(ExportSettings::for_endpoint(endpoint, var)),
            None => ExportSettings::from_env(var)?,
        };
        let Some(settings) = settings else {
            return Ok(None);
        };
        let tls = settings.tls.client_config(settings.https)?;
        let timeout = settings.timeout;
        let endpoint = endpoint.map(|base| format!("{}/v1/traces", base.trim_end_matches('/')));
        let resource = resource(identity);
        let exporter_resource = resource.clone();
        let protocol = settings.protocol;
        let make = move || {
            // Built here, on the export thread: a blocking client must not be built
            // inside an async runtime.
            let client = reqwest::blocking::Client::builder()
                .tls_backend_preconfigured(tls)
                .timeout(timeout)
                .build()
                .map_err(|error| format!("failed to build the OTLP HTTP client: {error}"))?;
            let mut builder = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(client)
                .with_protocol(protocol);
            if let Some(endpoint) = endpoint {
                builder = builder.with_endpoint(endpoint);
            }
            let mut exporter = builder.build().map_err(|error| error.to_string())?;
            exporter.set_resource(&exporter_resource);
            Ok(exporter)
        };
        let processor =
            BoundedBatch::spawn(make, settings.batch, metrics).map_err(TelemetryError::Export)?;
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource)
            .build();
        Ok(Some(Traces { provider }))
    }

    /// The tracer that starts every span.
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer(SCOPE)
    }

    /// Exports what is pending, waiting at most `within`; logs what could not be sent.
    pub fn shutdown(self, within: Duration) {
        if let Err(error) = self.provider.shutdown_with_timeout(within) {
            tracing::warn!(%error, "pending spans not exported before exit");
        }
    }
}

/// `service.name` (default [`SERVICE_NAME`]), `service.instance.id` (the replica's
/// identity) and `service.version`, overridden by `OTEL_RESOURCE_ATTRIBUTES`, then by
/// `OTEL_SERVICE_NAME`.
fn resource(identity: &str) -> Resource {
    let mut builder = Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", SERVICE_NAME),
            KeyValue::new("service.instance.id", identity.to_owned()),
            KeyValue::new("service.version", crate::VERSION),
        ])
        .with_detectors(&[
            Box::new(TelemetryResourceDetector),
            Box::new(EnvResourceDetector::new()),
        ]);
    if let Some(name) = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|name| !name.is_empty())
    {
        builder = builder.with_service_name(name);
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Option<ExportSettings>, TelemetryError> {
        ExportSettings::from_env(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn without_an_endpoint_export_is_off() {
        assert_eq!(settings(&[]).unwrap(), None);
        assert_eq!(
            settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]).unwrap(),
            None
        );
    }

    #[test]
    fn either_endpoint_turns_export_on_with_protobuf_by_default() {
        for name in [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ] {
            let on = settings(&[(name, "http://collector:4318")])
                .unwrap()
                .unwrap();
            assert_eq!(on.protocol, Protocol::HttpBinary);
            assert_eq!(on.batch, BatchSettings::default());
        }
    }

    #[test]
    fn an_https_endpoint_is_exported_over_tls_within_the_timeout_asked() {
        let tls = settings(&[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "HTTPS://collector:4318",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/otlp/ca.crt"),
        ])
        .unwrap()
        .unwrap();
        assert!(tls.https);
        assert_eq!(tls.timeout, Duration::from_secs(2));
        assert_eq!(tls.tls.certificate, Some("/etc/otlp/ca.crt".into()));
        let plain = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")])
            .unwrap()
            .unwrap();
        assert!(!plain.https);
        assert_eq!(plain.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn the_sdk_switches_turn_export_off() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        assert_eq!(
            settings(&[endpoint, ("OTEL_SDK_DISABLED", "true")]).unwrap(),
            None
        );
        assert_eq!(
            settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]).unwrap(),
            None
        );
    }

    #[test]
    fn the_signal_protocol_wins_and_grpc_is_refused_by_name() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        let json = settings(&[
            endpoint,
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
        ]);
        assert_eq!(json.unwrap().unwrap().protocol, Protocol::HttpJson);
        let error = settings(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{message}");
        assert!(message.contains("grpc"), "{message}");
    }

    #[test]
    fn queue_settings_come_from_the_bsp_variables() {
        let on = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512"),
            ("OTEL_BSP_SCHEDULE_DELAY", "250"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            on.batch,
            BatchSettings {
                max_queue: 100,
                max_batch: 100,
                delay: Duration::from_millis(250),
            }
        );
    }
}
