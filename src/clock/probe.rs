//! A layer of the Kubernetes client that times every request and reads the `Date` of
//! its response into the [`ClockOffset`]: the controller's own traffic (Lease attempts
//! every retry period, watches, writes) measures the clock, with no extra request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::header::DATE;
use http::{Request, Response};
use jiff::Timestamp;
use tower::{Layer, Service};

use super::offset::ClockOffset;

/// The layer; see the module documentation.
#[derive(Debug, Clone)]
pub struct OffsetProbe {
    offset: ClockOffset,
}

impl OffsetProbe {
    /// A probe feeding `offset`.
    pub fn new(offset: ClockOffset) -> OffsetProbe {
        OffsetProbe { offset }
    }
}

impl<S> Layer<S> for OffsetProbe {
    type Service = Probed<S>;

    fn layer(&self, inner: S) -> Probed<S> {
        Probed {
            inner,
            offset: self.offset.clone(),
        }
    }
}

/// A service whose responses are timed.
#[derive(Debug, Clone)]
pub struct Probed<S> {
    inner: S,
    offset: ClockOffset,
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

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let offset = self.offset.clone();
        let sent = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            let received = Instant::now();
            if let Some(date) = date_of(&response) {
                offset.record(sent, received, date);
            }
            Ok(response)
        })
    }
}

/// The `Date` header (RFC 9110's IMF-fixdate, e.g. `Tue, 01 Dec 2026 09:08:00 GMT`).
fn date_of<R>(response: &Response<R>) -> Option<Timestamp> {
    let text = response.headers().get(DATE)?.to_str().ok()?;
    jiff::fmt::rfc2822::parse(text)
        .ok()
        .map(|zoned| zoned.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_date_header_is_read_as_an_instant() {
        let response = Response::builder()
            .header(DATE, "Tue, 01 Dec 2026 09:08:00 GMT")
            .body(())
            .unwrap();
        assert_eq!(
            date_of(&response),
            Some("2026-12-01T09:08:00Z".parse().unwrap())
        );
        let garbled = Response::builder()
            .header(DATE, "yesterday")
            .body(())
            .unwrap();
        assert_eq!(date_of(&garbled), None);
    }
}
