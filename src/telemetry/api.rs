//! A layer of the Kubernetes client that counts and times every request
//! (`api_requests_total{verb,resource,code}`, `api_request_duration_seconds{verb,resource}`)
//! and, inside a trace, sends its W3C `traceparent` so the API server's own spans join it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use super::carrier::carried;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use opentelemetry::propagation::{Injector, TextMapPropagator as _};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tower::{Layer, Service};

/// Labels of a request count.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// kube's name of the call (`get`, `patch`, `watch`, `patch_scale`, ...) or the method.
    pub verb: String,
    /// The resource, with its subresource: `tidalschedulers/status`, `deployments/scale`.
    pub resource: String,
    /// The HTTP status code, or `error` when no response came.
    pub code: String,
}

/// Labels of a request duration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RouteLabels {
    /// As in [`RequestLabels`].
    pub verb: String,
    /// As in [`RequestLabels`].
    pub resource: String,
}

/// The client's metrics; cheap to clone.
#[derive(Debug, Clone)]
pub struct ApiMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<RouteLabels, Histogram>,
}

impl ApiMetrics {
    /// Registers the client's metrics on `registry`.
    pub fn register(registry: &mut Registry) -> ApiMetrics {
        let metrics = ApiMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| {
                // 1 ms to ~65 s; a watch counts until its response headers.
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    0.001, 2.0, 17,
                ))
            }),
        };
        registry.register(
            "api_requests",
            "Requests to the Kubernetes API by verb, resource and status code",
            metrics.requests.clone(),
        );
        registry.register(
            "api_request_duration_seconds",
            "Time from sending a request to the Kubernetes API to its response headers",
            metrics.duration.clone(),
        );
        metrics
    }
}

/// The layer; see the module documentation.
#[derive(Debug, Clone)]
pub struct ApiProbe {
    metrics: ApiMetrics,
}

impl ApiProbe {
    /// A probe counting on `metrics`.
    pub fn new(metrics: ApiMetrics) -> ApiProbe {
        ApiProbe { metrics }
    }
}

impl<S> Layer<S> for ApiProbe {
    type Service = Probed<S>;

    fn layer(&self, inner: S) -> Probed<S> {
        Probed {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// A service whose requests are counted, timed and traced.
#[derive(Debug, Clone)]
pub struct Probed<S> {
    inner: S,
    metrics: ApiMetrics,
}

impl<S, B, R> Service<Request<B>> for Probed<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let route = RouteLabels {
            verb: verb_of(&request),
            resource: resource_of(request.uri().path()),
        };
        // The trace context the request's caller carries, if any (see `carrier`).
        let context = carried();
        if let Some(context) = &context {
            inject_trace_context(context, request.headers_mut());
        }
        let metrics = self.metrics.clone();
        let sent = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await;
            let code = match &response {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "error".to_owned(),
            };
            if let (Some(context), Ok(response)) = (&context, &response) {
                context.span().set_attribute(opentelemetry::KeyValue::new(
                    "http.response.status_code",
                    i64::from(response.status().as_u16()),
                ));
            }
            metrics
                .duration
                .get_or_create(&route)
                .observe(sent.elapsed().as_secs_f64());
            let labels = RequestLabels {
                verb: route.verb,
                resource: route.resource,
                code,
            };
            metrics.requests.get_or_create(&labels).inc();
            response
        })
    }
}

/// Sets `traceparent` (and `tracestate`) from `context`, if it holds a span: nothing
/// outside a trace.
fn inject_trace_context(context: &opentelemetry::Context, headers: &mut HeaderMap) {
    if !context.span().span_context().is_valid() {
        return;
    }
    TraceContextPropagator::new().inject_context(context, &mut HeaderInjector(headers));
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// kube's name of the call (it tags each request), else the lowercased method.
fn verb_of<B>(request: &Request<B>) -> String {
    match request.extensions().get::<&'static str>() {
        Some(verb) => (*verb).to_owned(),
        None => request.method().as_str().to_ascii_lowercase(),
    }
}

/// The resource a request path names, with its subresource: `/apis/apps/v1/namespaces/
/// n/deployments/web/scale` is `deployments/scale`; paths outside `/api/v1` and
/// `/apis/GROUP/VERSION` (discovery, health) are `other`.
fn resource_of(path: &str) -> String {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return "other".to_owned(),
    };
    let rest = match rest {
        ["namespaces", _namespace, inner @ ..] if !inner.is_empty() => inner,
        _ => rest,
    };
    match rest {
        [] => "other".to_owned(),
        [resource] | [resource, _] => (*resource).to_owned(),
        [resource, _, subresource, ..] => format!("{resource}/{subresource}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_resource_and_subresource() {
        let cases = [
            (
                "/apis/apps/v1/namespaces/n/deployments/web/scale",
                "deployments/scale",
            ),
            ("/apis/apps/v1/namespaces/n/deployments/web", "deployments"),
            ("/apis/apps/v1/deployments", "deployments"),
            (
                "/apis/scheduling.tidal.io/v1alpha1/namespaces/n/tidalschedulers/t/status",
                "tidalschedulers/status",
            ),
            ("/api/v1/namespaces/n/events", "events"),
            ("/api/v1/namespaces/n", "namespaces"),
            ("/api/v1/namespaces", "namespaces"),
            (
                "/apis/coordination.k8s.io/v1/namespaces/n/leases/l",
                "leases",
            ),
            ("/apis", "other"),
            ("/version", "other"),
            ("/apis/apps/v1", "other"),
        ];
        for (path, resource) in cases {
            assert_eq!(resource_of(path), resource, "{path}");
        }
    }

    #[test]
    fn outside_a_trace_no_traceparent_is_sent() {
        let mut headers = HeaderMap::new();
        inject_trace_context(&opentelemetry::Context::new(), &mut headers);
        assert!(headers.is_empty());
    }

    #[test]
    fn inside_a_trace_its_context_is_sent() {
        use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
        let span = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        let context = opentelemetry::Context::new().with_remote_span_context(span);
        let mut headers = HeaderMap::new();
        inject_trace_context(&context, &mut headers);
        assert_eq!(
            headers["traceparent"],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
    }
}
