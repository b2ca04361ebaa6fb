//! Carries an OpenTelemetry context into the Kubernetes client's requests. kube's client
//! sends each request from a buffer task of its own, which the caller's task-local state
//! does not reach; only the caller's `tracing` span follows the request there (tower's
//! buffer enters it). So a request made inside [`carry`]'s span finds the context with
//! [`carried`]: the client layer sends it as `traceparent` and records the response on it.
//!
//! The trigger's spans are OpenTelemetry spans rather than `tracing` spans bridged by
//! tracing-opentelemetry because their instants are given, not observed: the root starts
//! at the scheduled instant, the status write at `executionTime`, and both end at the
//! write's acknowledgement.

use opentelemetry::Context;
use tracing_subscriber::Registry;
use tracing_subscriber::registry::LookupSpan as _;

use super::traces::SPANS;

/// The layer that keeps carrier spans (target [`SPANS`]) alive, whatever the log filter:
/// install it with a filter on that target (see `init_logs`).
#[derive(Debug, Clone, Copy)]
pub struct Carrier;

impl<S> tracing_subscriber::Layer<S> for Carrier where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>
{
}

/// The context a carrier span holds.
struct Carried(Context);

/// A span that carries `context` (a no-op span when no [`Carrier`] is installed).
pub fn carry(context: Context) -> tracing::Span {
    let span = tracing::info_span!(target: SPANS, "trace context");
    span.with_subscriber(|(id, dispatch)| {
        if let Some(span) = dispatch
            .downcast_ref::<Registry>()
            .and_then(|registry| registry.span(id))
        {
            span.extensions_mut().insert(Carried(context));
        }
    });
    span
}

/// The context carried by the current span, if any.
pub fn carried() -> Option<Context> {
    tracing::Span::current()
        .with_subscriber(|(id, dispatch)| {
            let registry = dispatch.downcast_ref::<Registry>()?;
            let span = registry.span(id)?;
            let extensions = span.extensions();
            extensions.get::<Carried>().map(|carried| carried.0.clone())
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    };
    use tracing::Instrument as _;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    fn context() -> Context {
        let span = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        Context::new().with_remote_span_context(span)
    }

    fn trace_id(context: Option<Context>) -> Option<String> {
        context.map(|c| c.span().span_context().trace_id().to_string())
    }

    #[test]
    fn a_request_inside_the_carrier_span_finds_the_context_on_another_task() {
        // A log filter that would hide the carrier span: the Carrier keeps it anyway.
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::sink)
                    .with_filter(tracing_subscriber::filter::LevelFilter::ERROR),
            )
            .with(
                Carrier.with_filter(tracing_subscriber::filter::filter_fn(|m| {
                    m.target() == SPANS
                })),
            );
        let _default = tracing::subscriber::set_default(subscriber);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let found = runtime.block_on(async {
            let span = carry(context());
            // What tower's buffer does: the worker task enters the caller's span.
            let worker = async move { trace_id(carried()) };
            tokio::spawn(worker.instrument(span)).await.unwrap()
        });
        assert_eq!(found.as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(trace_id(carried()), None, "nothing outside the span");
    }

    #[test]
    fn without_a_carrier_nothing_is_carried() {
        let span = carry(context());
        assert_eq!(trace_id(span.in_scope(carried)), None);
    }
}
