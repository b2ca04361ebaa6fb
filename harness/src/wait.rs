//! The one way tests wait: for a probe to succeed (polled), for a watched object to meet a
//! condition, for a future to finish — each with a deadline that fails the test naming
//! what did not happen and the last thing seen. Bounds are generous ([`PATIENCE`]): they
//! catch a hang, they do not measure (docs/testing.md).

use std::future::Future;
use std::time::{Duration, Instant};

use kube::Resource;
use kube::api::Api;
use kube::runtime::wait::{Condition, await_condition};
use serde::de::DeserializeOwned;

/// How long a test waits for something that should happen within seconds.
pub const PATIENCE: Duration = Duration::from_secs(40);

/// How often waits poll unless told otherwise.
pub const PACE: Duration = Duration::from_millis(200);

/// Polls `probe` every 200 ms until it gives `Ok`; fails the test after [`PATIENCE`]
/// naming `what` and the last state the probe reported (its `Err`).
pub async fn eventually<T, F>(what: &str, probe: impl FnMut() -> F) -> T
where
    F: Future<Output = Result<T, String>>,
{
    eventually_within(PATIENCE, what, probe).await
}

/// [`eventually`] with a limit of its own.
pub async fn eventually_within<T, F>(limit: Duration, what: &str, probe: impl FnMut() -> F) -> T
where
    F: Future<Output = Result<T, String>>,
{
    eventually_every(PACE, limit, what, probe).await
}

/// [`eventually_within`] polling every `pace` (short where the moment a change is seen
/// matters, e.g. a Lease's new holder).
pub async fn eventually_every<T, F>(
    pace: Duration,
    limit: Duration,
    what: &str,
    probe: impl FnMut() -> F,
) -> T
where
    F: Future<Output = Result<T, String>>,
{
    poll(pace, limit, probe)
        .await
        .unwrap_or_else(|seen| panic!("no {what} within {limit:?}: {seen}"))
}

/// [`eventually_within`] for code without a runtime: polls `probe` on this thread.
pub fn blocking_eventually<T>(
    limit: Duration,
    what: &str,
    probe: impl FnMut() -> Result<T, String>,
) -> T {
    blocking_poll(PACE, limit, probe)
        .unwrap_or_else(|seen| panic!("no {what} within {limit:?}: {seen}"))
}

/// Polls `probe` every `pace` until it gives `Ok`, or gives up after `limit` with `Err`
/// (the last state seen) instead of failing the test: for waits whose caller decides
/// what a timeout means.
pub async fn poll<T, F>(
    pace: Duration,
    limit: Duration,
    mut probe: impl FnMut() -> F,
) -> Result<T, String>
where
    F: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match probe().await {
            Ok(value) => return Ok(value),
            Err(seen) if tokio::time::Instant::now() >= deadline => return Err(seen),
            Err(_) => tokio::time::sleep(pace).await,
        }
    }
}

/// [`poll`] for code without a runtime.
pub fn blocking_poll<T>(
    pace: Duration,
    limit: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + limit;
    loop {
        match probe() {
            Ok(value) => return Ok(value),
            Err(seen) if Instant::now() >= deadline => return Err(seen),
            Err(_) => std::thread::sleep(pace),
        }
    }
}

/// Runs `body` and returns its result, failing the test after `limit`.
pub async fn within<T>(limit: Duration, what: &str, body: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, body)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
}

/// Waits (on a watch) until `name` satisfies `condition`, or panics naming `what`.
pub async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, condition: impl Condition<K>) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    match tokio::time::timeout(PATIENCE, await_condition(api.clone(), name, condition)).await {
        Ok(Ok(Some(object))) => object,
        Ok(Ok(None)) => panic!("{name}: deleted while waiting for {what}"),
        Ok(Err(e)) => panic!("{name}: watch failed while waiting for {what}: {e}"),
        Err(_) => {
            let now = api.get_opt(name).await.ok().flatten();
            panic!("{name}: no {what} within {PATIENCE:?}; last seen: {now:#?}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_never_succeeds_fails_naming_what_and_the_last_state() {
        let failed = tokio::spawn(eventually_within(
            Duration::from_secs(1),
            "tide",
            || async { Err::<(), _>("low water".to_owned()) },
        ))
        .await
        .expect_err("the wait fails the test");
        let message = failed.into_panic();
        let message = message.downcast_ref::<String>().expect("a message");
        assert!(
            message.contains("no tide within 1s: low water"),
            "{message}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn poll_returns_the_first_success_or_the_last_state() {
        let mut tries = 0;
        let found = poll(PACE, Duration::from_secs(5), || {
            tries += 1;
            let now = tries;
            async move {
                if now == 3 {
                    Ok(now)
                } else {
                    Err(format!("try {now}"))
                }
            }
        })
        .await;
        assert_eq!(found, Ok(3));
        let gave_up = poll(PACE, Duration::from_secs(1), || async {
            Err::<(), _>("never".to_owned())
        })
        .await;
        assert_eq!(gave_up, Err("never".to_owned()));
    }

    #[test]
    fn blocking_poll_gives_up_after_its_limit() {
        let started = Instant::now();
        let limit = Duration::from_millis(300);
        let gave_up = blocking_poll(PACE, limit, || Err::<(), _>("no".to_owned()));
        assert_eq!(gave_up, Err("no".to_owned()));
        assert!(started.elapsed() >= Duration::from_millis(300));
    }
}
