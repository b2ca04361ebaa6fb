//! A client-side limit on the rate of requests to the API server, as client-go's `QPS` and
//! `Burst` (a token bucket: `burst` requests at once, then `qps` per second). Off by
//! default: API Priority and Fairness, on the server, is what protects the cluster
//! (deploy/flowcontrol.yaml); this is for clusters that also want the client to pace itself.
//!
//! The layer waits in `poll_ready`, so requests queue in kube's buffer in front of it, in
//! the order they were made.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// Requests per second and the burst allowed above it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Sustained requests per second (> 0).
    pub qps: f64,
    /// Requests allowed at once (≥ 1).
    pub burst: u32,
}

/// The layer; see the module documentation.
#[derive(Debug, Clone)]
pub struct RateLimited {
    limit: RateLimit,
}

impl RateLimited {
    /// A layer pacing requests to `limit`.
    pub fn new(limit: RateLimit) -> RateLimited {
        RateLimited { limit }
    }
}

impl<S> Layer<S> for RateLimited {
    type Service = Paced<S>;

    fn layer(&self, inner: S) -> Paced<S> {
        Paced {
            inner,
            bucket: Bucket::new(self.limit, Instant::now()),
            permit: false,
            wait: None,
        }
    }
}

/// A service whose requests are paced by a token bucket.
pub struct Paced<S> {
    inner: S,
    bucket: Bucket,
    /// A token is held for the next call.
    permit: bool,
    wait: Option<Pin<Box<Sleep>>>,
}

impl<S, R> Service<R> for Paced<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if !self.permit {
            let wait = self.wait.get_or_insert_with(|| {
                let now = Instant::now();
                Box::pin(tokio::time::sleep_until(now + self.bucket.take(now)))
            });
            ready!(wait.as_mut().poll(cx));
            self.wait = None;
            self.permit = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.permit = false;
        self.inner.call(request)
    }
}

/// Tokens refilled at `qps` up to `burst`; a request takes one, reserving it ahead when
/// none is left (golang.org/x/time/rate's reservations, which client-go's limiter uses).
#[derive(Debug)]
struct Bucket {
    limit: RateLimit,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(limit: RateLimit, now: Instant) -> Bucket {
        Bucket {
            limit,
            tokens: f64::from(limit.burst),
            at: now,
        }
    }

    /// Takes a token at `now`; how long to wait until it is due.
    fn take(&mut self, now: Instant) -> Duration {
        let refill = now.duration_since(self.at).as_secs_f64() * self.limit.qps;
        self.tokens = (self.tokens + refill).min(f64::from(self.limit.burst)) - 1.0;
        self.at = now;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.limit.qps)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(qps: f64, burst: u32) -> (Bucket, Instant) {
        let start = Instant::now();
        (Bucket::new(RateLimit { qps, burst }, start), start)
    }

    #[test]
    fn a_burst_goes_at_once_and_the_rest_at_the_rate() {
        let (mut bucket, start) = bucket(10.0, 3);
        let waits: Vec<Duration> = (0..6).map(|_| bucket.take(start)).collect();
        let millis: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(millis, [0, 0, 0, 100, 200, 300]);
    }

    #[test]
    fn tokens_come_back_with_time_up_to_the_burst() {
        let (mut bucket, start) = bucket(10.0, 2);
        bucket.take(start);
        bucket.take(start);
        assert_eq!(bucket.take(start).as_millis(), 100);
        let later = start + Duration::from_secs(60);
        let waits: Vec<u128> = (0..3).map(|_| bucket.take(later).as_millis()).collect();
        assert_eq!(waits, [0, 0, 100], "a long pause refills only the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn the_service_waits_for_its_token() {
        let limit = RateLimit { qps: 2.0, burst: 1 };
        let mut service = RateLimited::new(limit).layer(Echo);
        let start = Instant::now();
        for n in 0..3 {
            std::future::poll_fn(|cx| service.poll_ready(cx))
                .await
                .unwrap();
            assert_eq!(service.call(n).await, Ok(n));
        }
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(1),
            "three at 2/s, burst 1"
        );
    }

    /// Answers each request with itself.
    struct Echo;

    impl Service<u32> for Echo {
        type Response = u32;
        type Error = ();
        type Future = std::future::Ready<Result<u32, ()>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, n: u32) -> Self::Future {
            std::future::ready(Ok(n))
        }
    }
}
