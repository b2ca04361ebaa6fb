//! A batching span processor with a bounded queue whose drops are counted.
//!
//! The SDK's `BatchSpanProcessor` bounds its queue too, but keeps the count of dropped
//! spans to itself (it logs it at shutdown); operators need it as a metric while the
//! collector is down. Ended spans wait in a queue of at most `max_queue` spans; one
//! thread of its own exports them in batches, so a slow or black-holed collector delays
//! only that thread: a full queue drops the newest span and counts it, and a failed
//! export drops its batch and counts it.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::outage::Outage;

/// The queue's metrics: `spans_dropped_total{reason}` (`queue_full`, `export_failed`,
/// `shutdown`) and `spans_queued`; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct SpanMetrics {
    dropped: Family<Vec<(&'static str, &'static str)>, Counter>,
    queued: Gauge,
}

impl SpanMetrics {
    /// Registers the queue's metrics on `registry`.
    pub fn register(registry: &mut prometheus_client::registry::Registry) -> SpanMetrics {
        let metrics = SpanMetrics::default();
        registry.register(
            "spans_dropped",
            "Trace spans not exported, by reason (queue_full, export_failed, shutdown)",
            metrics.dropped.clone(),
        );
        registry.register(
            "spans_queued",
            "Trace spans waiting for export (at most OTEL_BSP_MAX_QUEUE_SIZE)",
            metrics.queued.clone(),
        );
        metrics
    }

    fn drop_spans(&self, reason: &'static str, count: u64) {
        self.dropped
            .get_or_create(&vec![("reason", reason)])
            .inc_by(count);
    }

    /// Spans dropped so far for `reason`.
    pub fn dropped(&self, reason: &'static str) -> u64 {
        self.dropped.get_or_create(&vec![("reason", reason)]).get()
    }
}

/// How the queue is bounded and drained (`OTEL_BSP_*` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSettings {
    /// Spans waiting at most; more are dropped.
    pub max_queue: usize,
    /// Spans per export at most.
    pub max_batch: usize,
    /// Longest wait before a partial batch is exported.
    pub delay: Duration,
}

impl Default for BatchSettings {
    /// The OpenTelemetry defaults, except a 1 s delay (a trigger's trace shows up soon).
    fn default() -> BatchSettings {
        BatchSettings {
            max_queue: 2048,
            max_batch: 512,
            delay: Duration::from_secs(1),
        }
    }
}

impl BatchSettings {
    /// The defaults, overridden by `OTEL_BSP_MAX_QUEUE_SIZE`,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` and `OTEL_BSP_SCHEDULE_DELAY` (milliseconds) where
    /// `var` has them.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> BatchSettings {
        let number = |name: &str| var(name).and_then(|value| value.trim().parse::<u64>().ok());
        let mut settings = BatchSettings::default();
        if let Some(n) = number("OTEL_BSP_MAX_QUEUE_SIZE").filter(|n| *n > 0) {
            settings.max_queue = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").filter(|n| *n > 0) {
            settings.max_batch = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(ms) = number("OTEL_BSP_SCHEDULE_DELAY") {
            settings.delay = Duration::from_millis(ms);
        }
        settings.max_batch = settings.max_batch.min(settings.max_queue);
        settings
    }
}

/// What the exporting thread is asked to do besides exporting.
#[derive(Debug, Default)]
struct Queue {
    spans: VecDeque<SpanData>,
    /// Flushes asked for; the thread has answered `flushed` of them.
    flushes: u64,
    flushed: u64,
    /// Set once: export what is queued, then stop.
    closing: bool,
    /// Set by the thread when it stopped.
    closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the thread: a full batch, a flush or the close.
    work: Condvar,
    /// Wakes callers waiting for a flush or the close.
    done: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        crate::sync::lock(&self.queue)
    }
}

/// The processor; spans of sampled traces only.
#[derive(Debug)]
pub struct BoundedBatch {
    shared: Arc<Shared>,
    settings: BatchSettings,
    metrics: SpanMetrics,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl BoundedBatch {
    /// Starts the exporting thread, which builds its exporter with `make` (on the thread:
    /// a blocking HTTP client must not be built or dropped inside the async runtime);
    /// drops are counted on `metrics`. Fails if the thread or the exporter cannot start.
    pub fn spawn<E, F>(
        make: F,
        settings: BatchSettings,
        metrics: SpanMetrics,
    ) -> Result<BoundedBatch, String>
    where
        E: SpanExporter + 'static,
        F: FnOnce() -> Result<E, String> + Send + 'static,
    {
        let shared = Arc::new(Shared::default());
        let worker = Worker {
            shared: shared.clone(),
            settings,
            metrics: metrics.clone(),
        };
        let (started, outcome) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("span-export".to_owned())
            .spawn(move || match make() {
                Ok(exporter) => {
                    let _ = started.send(Ok(()));
                    worker.run(exporter);
                }
                Err(error) => {
                    let _ = started.send(Err(error));
                }
            })
            .map_err(|error| format!("cannot start the span export thread: {error}"))?;
        match outcome.recv() {
            Ok(Ok(())) => Ok(BoundedBatch {
                shared,
                settings,
                metrics,
                thread: Mutex::new(Some(thread)),
            }),
            Ok(Err(error)) => Err(error),
            Err(_) => Err("the span export thread ended while starting".to_owned()),
        }
    }

    /// Waits until `done` holds of the queue, at most until `deadline`.
    fn wait_until(&self, deadline: Instant, done: impl Fn(&Queue) -> bool) -> OTelSdkResult {
        let mut queue = self.shared.lock();
        while !done(&queue) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(OTelSdkError::Timeout(Duration::ZERO));
            }
            queue = match self.shared.done.wait_timeout(queue, left) {
                Ok((queue, _)) => queue,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        Ok(())
    }
}

impl SpanProcessor for BoundedBatch {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let mut queue = self.shared.lock();
        if queue.closing {
            drop(queue);
            self.metrics.drop_spans("shutdown", 1);
        } else if queue.spans.len() >= self.settings.max_queue {
            drop(queue);
            self.metrics.drop_spans("queue_full", 1);
        } else {
            queue.spans.push_back(span);
            self.metrics.queued.set(queue.spans.len() as i64);
            if queue.spans.len() >= self.settings.max_batch {
                self.shared.work.notify_one();
            }
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        let asked = {
            let mut queue = self.shared.lock();
            queue.flushes += 1;
            queue.flushes
        };
        self.shared.work.notify_one();
        let deadline = Instant::now() + FLUSH_TIMEOUT;
        self.wait_until(deadline, |queue| queue.flushed >= asked || queue.closed)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.shared.lock().closing = true;
        self.shared.work.notify_one();
        let result = self.wait_until(Instant::now() + timeout, |queue| queue.closed);
        if result.is_ok()
            && let Some(thread) = crate::sync::lock(&self.thread).take()
        {
            // The thread has said it stopped; joining cannot block.
            let _ = thread.join();
        }
        // On a timeout the thread is left to finish its export or die with the process.
        result
    }
}

/// Longest wait of `force_flush`.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The exporting thread.
struct Worker {
    shared: Arc<Shared>,
    settings: BatchSettings,
    metrics: SpanMetrics,
}

impl Worker {
    fn run<E: SpanExporter>(self, exporter: E) {
        let mut due = Instant::now() + self.settings.delay;
        let mut outage = Outage::default();
        loop {
            let (batch, flush, closing) = self.next_batch(due);
            if !batch.is_empty() {
                let count = batch.len() as u64;
                match futures::executor::block_on(exporter.export(batch)) {
                    Ok(()) => {
                        if let Some(lost) = outage.succeeded() {
                            tracing::warn!(lost, "exporting spans works again");
                        }
                    }
                    Err(error) => {
                        self.metrics.drop_spans("export_failed", count);
                        if outage.failed(count) {
                            tracing::error!(
                                %error,
                                spans = count,
                                "exporting spans failed: traces are lost until the collector \
                                 takes them (counted in spans_dropped_total)"
                            );
                        }
                    }
                }
            }
            due = Instant::now() + self.settings.delay;
            let mut queue = self.shared.lock();
            let drained = queue.spans.is_empty();
            if let Some(asked) = flush.filter(|_| drained) {
                queue.flushed = queue.flushed.max(asked);
            }
            if closing && drained {
                queue.closed = true;
                drop(queue);
                let _ = exporter.shutdown();
                self.shared.done.notify_all();
                return;
            }
            drop(queue);
            self.shared.done.notify_all();
        }
    }

    /// Waits until a batch is full, a flush or the close is asked, or `due`; takes up
    /// to one batch. Returns it, the flush being answered, and whether closing.
    fn next_batch(&self, due: Instant) -> (Vec<SpanData>, Option<u64>, bool) {
        let mut queue = self.shared.lock();
        loop {
            let flush = (queue.flushes > queue.flushed).then_some(queue.flushes);
            let left = due.saturating_duration_since(Instant::now());
            if queue.spans.len() >= self.settings.max_batch
                || flush.is_some()
                || queue.closing
                || left.is_zero()
            {
                let take = queue.spans.len().min(self.settings.max_batch);
                let batch = queue.spans.drain(..take).collect();
                self.metrics.queued.set(queue.spans.len() as i64);
                return (batch, flush, queue.closing);
            }
            queue = match self.shared.work.wait_timeout(queue, left) {
                Ok((queue, _)) => queue,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

#[cfg(test)]
mod tests;
