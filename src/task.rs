//! Background tasks that must run as long as the process does (the election, the Event
//! publisher, the HTTP server, ...): spawned under a name, their handles kept, and the
//! end of any of them — a panic, or a loop that returned — is reported as fatal rather
//! than leaving the process running without it (as kubert does with its lease task).

use std::future::Future;

use futures::FutureExt;
use futures::future::select_all;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// A spawned background task (dropping it detaches the task, as for a `JoinHandle`).
#[derive(Debug)]
pub struct Task {
    name: &'static str,
    handle: JoinHandle<()>,
}

/// A background task ended while it should still be running.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {name} task ended unexpectedly{}", if *panicked { " (it panicked)" } else { "" })]
pub struct TaskEnded {
    /// The task's name.
    pub name: &'static str,
    /// Whether it panicked (otherwise it returned).
    pub panicked: bool,
}

/// Spawns `future` as the background task `name`, in a tracing span of that name.
pub fn spawn(name: &'static str, future: impl Future<Output = ()> + Send + 'static) -> Task {
    let span = tracing::info_span!("task", name);
    Task {
        name,
        handle: tokio::spawn(future.instrument(span)),
    }
}

/// Resolves when the first of `tasks` ends, saying which; never, if there are none.
pub async fn first_ended(tasks: &mut [Task]) -> TaskEnded {
    if tasks.is_empty() {
        return std::future::pending().await;
    }
    let handles = tasks
        .iter_mut()
        .map(|task| (&mut task.handle).map(|r| r.is_err()));
    let (panicked, index, _) = select_all(handles.map(Box::pin)).await;
    TaskEnded {
        name: tasks[index].name,
        panicked,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_first_task_to_end_is_named() {
        let mut tasks = vec![
            spawn("server", std::future::pending()),
            spawn("publisher", tokio::time::sleep(Duration::from_secs(5))),
            spawn("elector", tokio::time::sleep(Duration::from_secs(60))),
        ];
        let ended = first_ended(&mut tasks).await;
        assert_eq!(
            ended,
            TaskEnded {
                name: "publisher",
                panicked: false
            }
        );
        assert_eq!(ended.to_string(), "the publisher task ended unexpectedly");
    }

    #[tokio::test]
    async fn a_panic_is_reported_as_such() {
        let mut tasks = vec![
            spawn("server", std::future::pending()),
            spawn("elector", async { panic!("a bug") }),
        ];
        let ended = first_ended(&mut tasks).await;
        assert_eq!(ended.name, "elector");
        assert!(ended.panicked);
        assert!(ended.to_string().ends_with("(it panicked)"));
    }

    #[tokio::test(start_paused = true)]
    async fn no_task_never_ends() {
        let waited = tokio::time::timeout(Duration::from_secs(3600), first_ended(&mut [])).await;
        assert!(waited.is_err());
    }
}
