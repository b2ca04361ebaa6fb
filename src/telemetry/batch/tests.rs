use std::sync::mpsc;

use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
use opentelemetry_sdk::trace::SdkTracerProvider;

use super::*;

/// An exporter that says when an export starts, blocks it until the test lets it
/// through (`release`), then hands the batch over.
#[derive(Debug)]
struct Handing {
    started: mpsc::Sender<usize>,
    release: Mutex<mpsc::Receiver<()>>,
    batches: mpsc::Sender<Vec<SpanData>>,
}

impl SpanExporter for Handing {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let _ = self.started.send(batch.len());
        if crate::sync::lock(&self.release).recv().is_err() {
            return Err(OTelSdkError::InternalFailure("collector gone".to_owned()));
        }
        let _ = self.batches.send(batch);
        Ok(())
    }
}

/// Fields drop in order: the exporter is released before the provider shuts down.
struct Setup {
    release: mpsc::Sender<()>,
    provider: SdkTracerProvider,
    started: mpsc::Receiver<usize>,
    batches: mpsc::Receiver<Vec<SpanData>>,
    metrics: SpanMetrics,
}

fn setup(settings: BatchSettings) -> Setup {
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let (batches_tx, batches) = mpsc::channel();
    let exporter = Handing {
        started: started_tx,
        release: Mutex::new(release_rx),
        batches: batches_tx,
    };
    let metrics = SpanMetrics::default();
    let processor = BoundedBatch::spawn(move || Ok(exporter), settings, metrics.clone()).unwrap();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .build();
    Setup {
        provider,
        started,
        release,
        batches,
        metrics,
    }
}

fn end_spans(provider: &SdkTracerProvider, count: usize) {
    let tracer = provider.tracer("test");
    for _ in 0..count {
        tracer.start("s").end();
    }
}

const WAIT: Duration = Duration::from_secs(10);
const LONG: Duration = Duration::from_secs(3600);

#[test]
fn a_full_batch_is_exported_without_waiting_for_the_delay() {
    let setup = setup(BatchSettings {
        max_queue: 10,
        max_batch: 3,
        delay: LONG,
    });
    end_spans(&setup.provider, 3);
    assert_eq!(setup.started.recv_timeout(WAIT).unwrap(), 3);
    setup.release.send(()).unwrap();
    assert_eq!(setup.batches.recv_timeout(WAIT).unwrap().len(), 3);
}

#[test]
fn a_partial_batch_goes_out_after_the_delay() {
    let setup = setup(BatchSettings {
        max_queue: 10,
        max_batch: 5,
        delay: Duration::from_millis(20),
    });
    end_spans(&setup.provider, 2);
    assert_eq!(setup.started.recv_timeout(WAIT).unwrap(), 2);
}

#[test]
fn a_blocked_collector_fills_the_queue_and_further_spans_are_counted_as_dropped() {
    let setup = setup(BatchSettings {
        max_queue: 4,
        max_batch: 1,
        delay: LONG,
    });
    end_spans(&setup.provider, 1);
    // The thread took the first span and is stuck exporting it.
    assert_eq!(setup.started.recv_timeout(WAIT).unwrap(), 1);
    end_spans(&setup.provider, 10);
    assert_eq!(setup.metrics.dropped("queue_full"), 6);
    assert_eq!(setup.metrics.queued.get(), 4);
    for _ in 0..5 {
        setup.release.send(()).unwrap();
    }
    let exported: usize = (0..5)
        .map(|_| setup.batches.recv_timeout(WAIT).unwrap().len())
        .sum();
    assert_eq!(exported, 5);
}

#[test]
fn a_failed_export_counts_its_spans_as_dropped() {
    let setup = setup(BatchSettings {
        max_queue: 10,
        max_batch: 2,
        delay: LONG,
    });
    drop(setup.release);
    end_spans(&setup.provider, 2);
    assert_eq!(setup.started.recv_timeout(WAIT).unwrap(), 2);
    let deadline = Instant::now() + WAIT;
    while setup.metrics.dropped("export_failed") < 2 {
        assert!(Instant::now() < deadline, "the failure was not counted");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn shutdown_exports_what_is_queued() {
    let setup = setup(BatchSettings {
        max_queue: 10,
        max_batch: 10,
        delay: LONG,
    });
    end_spans(&setup.provider, 3);
    setup.release.send(()).unwrap();
    setup.provider.shutdown_with_timeout(WAIT).unwrap();
    assert_eq!(setup.started.try_recv().unwrap(), 3);
    assert_eq!(setup.batches.try_recv().unwrap().len(), 3);
}

#[test]
fn shutdown_gives_up_on_a_black_holed_collector_within_its_timeout() {
    let setup = setup(BatchSettings {
        max_queue: 10,
        max_batch: 10,
        delay: LONG,
    });
    end_spans(&setup.provider, 1);
    let started = Instant::now();
    let result = setup
        .provider
        .shutdown_with_timeout(Duration::from_millis(200));
    assert!(result.is_err(), "{result:?}");
    assert!(started.elapsed() < WAIT);
    // Late spans are not queued behind the stuck export.
    drop(setup.release);
}

#[test]
fn force_flush_waits_for_the_export() {
    let setup = setup(BatchSettings {
        max_queue: 10,
        max_batch: 10,
        delay: LONG,
    });
    end_spans(&setup.provider, 2);
    setup.release.send(()).unwrap();
    setup.provider.force_flush().unwrap();
    assert_eq!(setup.batches.try_recv().unwrap().len(), 2);
}
