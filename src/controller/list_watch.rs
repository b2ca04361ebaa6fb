//! The list-then-watch stream behind each cache, reporting how far the cache has come.
//!
//! kube-runtime's `watcher` requests bookmarks but consumes them silently (kube-runtime
//! 5.0, `watcher.rs`, `State::Watching`: a `WatchEvent::Bookmark` only moves its private
//! resume version). Yet a bookmark is the API server vouching "this watch has delivered
//! every change up to version v" — what the read-your-own-writes check needs to know when
//! none of the watched objects changed (DESIGN §7). This is the same state machine
//! (paginated list, watch from the list's version, resume after a watch ends, re-list on
//! 410 Gone), yielding the same [`Event`]s for the reflector and reporting those versions.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::runtime::watcher::{Error, Event};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// Objects per list page (client-go's pager default).
const PAGE_SIZE: u32 = 500;

/// How long the server keeps one watch open before ending it; the stream then resumes
/// from the last version seen (kube-runtime's default).
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(290);

/// Silence this much longer than the watch timeout means the connection is dead.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// What a watch stream yields.
type Changes<K> = BoxStream<'static, kube::Result<WatchEvent<K>>>;

/// What one transition yields (if anything), and the state it leads to.
type Step<K> = (Option<Result<Event<K>, Error>>, State<K>);

/// Where objects come from: an [`Api`], or a script in tests.
pub trait Source: Send + Sync + 'static {
    /// The watched kind.
    type Object: Resource + Clone + Send + 'static;

    /// Lists one page.
    fn list(
        &self,
        params: &ListParams,
    ) -> impl Future<Output = kube::Result<ObjectList<Self::Object>>> + Send;

    /// Watches changes after `version`.
    fn watch(
        &self,
        params: &WatchParams,
        version: &str,
    ) -> impl Future<Output = kube::Result<Changes<Self::Object>>> + Send;
}

impl<K> Source for Api<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    type Object = K;

    async fn list(&self, params: &ListParams) -> kube::Result<ObjectList<K>> {
        Api::list(self, params).await
    }

    async fn watch(&self, params: &WatchParams, version: &str) -> kube::Result<Changes<K>> {
        Api::watch(self, params, version)
            .await
            .map(StreamExt::boxed)
    }
}

/// Lists, then watches, `source` for ever; errors are yielded and the next poll recovers
/// (put a backoff after it). `progress` is called with a resourceVersion once every change
/// up to it has been yielded *and consumed* — when a watch starts from a list's (or a
/// resumed) version, and on each bookmark — never with an object's own version: the
/// caller sees those in the events.
pub fn list_watch<S: Source>(
    source: S,
    timeout: Duration,
    progress: impl Fn(&str) + Send + Sync + 'static,
) -> impl Stream<Item = Result<Event<S::Object>, Error>> + Send {
    let watcher = Watcher {
        source,
        timeout,
        progress,
    };
    futures::stream::unfold((watcher, State::Empty), |(watcher, state)| async move {
        let (item, state) = watcher.next(state).await;
        Some((item, (watcher, state)))
    })
}

/// Where the list-then-watch cycle is.
enum State<K> {
    /// Nothing listed yet, or the watch fell out of the server's history (410 Gone).
    Empty,
    /// Listing page by page: the current page's objects not yet yielded.
    Listing {
        continue_token: Option<String>,
        objects: VecDeque<K>,
        version: Option<String>,
    },
    /// Everything up to `version` yielded: a watch from there starts next.
    Listed { version: String },
    /// Watching; `version` is the last one seen.
    Watching { version: String, stream: Changes<K> },
}

/// The source, the server's watch timeout, and where versions are reported.
struct Watcher<S, F> {
    source: S,
    timeout: Duration,
    progress: F,
}

impl<S: Source, F: Fn(&str)> Watcher<S, F> {
    /// Steps until there is something to yield.
    async fn next(
        &self,
        mut state: State<S::Object>,
    ) -> (Result<Event<S::Object>, Error>, State<S::Object>) {
        loop {
            match self.step(state).await {
                (Some(item), next) => return (item, next),
                (None, next) => state = next,
            }
        }
    }

    /// One transition; `None` when it has nothing to yield (a page fetched, a watch
    /// started, a bookmark).
    async fn step(&self, state: State<S::Object>) -> Step<S::Object> {
        match state {
            State::Empty => (
                Some(Ok(Event::Init)),
                State::Listing {
                    continue_token: None,
                    objects: VecDeque::new(),
                    version: None,
                },
            ),
            State::Listing {
                continue_token,
                mut objects,
                version,
            } => {
                if let Some(object) = objects.pop_front() {
                    let next = State::Listing {
                        continue_token,
                        objects,
                        version,
                    };
                    return (Some(Ok(Event::InitApply(object))), next);
                }
                if let (None, Some(version)) = (&continue_token, &version) {
                    let next = State::Listed {
                        version: version.clone(),
                    };
                    return (Some(Ok(Event::InitDone)), next);
                }
                self.list_page(continue_token).await
            }
            State::Listed { version } => {
                // Whatever was yielded before this poll has been consumed.
                (self.progress)(&version);
                let params = WatchParams::default()
                    .timeout(u32::try_from(self.timeout.as_secs()).unwrap_or(u32::MAX));
                match self.source.watch(&params, &version).await {
                    Ok(stream) => (None, State::Watching { version, stream }),
                    Err(kube::Error::Api(status)) if status.code == 410 => (
                        Some(Err(Error::WatchStartFailed(kube::Error::Api(status)))),
                        State::Empty,
                    ),
                    Err(error) => (
                        Some(Err(Error::WatchStartFailed(error))),
                        State::Listed { version },
                    ),
                }
            }
            State::Watching { version, stream } => self.watch_next(version, stream).await,
        }
    }

    /// Fetches the page after `continue_token` (the first when `None`).
    async fn list_page(&self, continue_token: Option<String>) -> Step<S::Object> {
        let mut params = ListParams::default().limit(PAGE_SIZE);
        params.continue_token = continue_token;
        match self.source.list(&params).await {
            Ok(page) => {
                let version = page.metadata.resource_version.filter(|v| !v.is_empty());
                let continue_token = page.metadata.continue_.filter(|t| !t.is_empty());
                if version.is_none() && continue_token.is_none() {
                    return (Some(Err(Error::NoResourceVersion)), State::Empty);
                }
                let next = State::Listing {
                    continue_token,
                    objects: page.items.into(),
                    version,
                };
                (None, next)
            }
            Err(error) => (Some(Err(Error::InitialListFailed(error))), State::Empty),
        }
    }

    /// Waits for the next change; a silent connection is given up after the server's
    /// timeout plus a margin, and resumed.
    async fn watch_next(&self, version: String, mut stream: Changes<S::Object>) -> Step<S::Object> {
        let change = match tokio::time::timeout(self.timeout + IDLE_MARGIN, stream.next()).await {
            Ok(Some(change)) => change,
            Ok(None) => return (None, State::Listed { version }),
            Err(_) => {
                tracing::warn!(%version, "watch silent past its timeout; resuming");
                return (None, State::Listed { version });
            }
        };
        match change {
            Ok(WatchEvent::Added(object) | WatchEvent::Modified(object)) => {
                yield_object(object, Event::Apply, stream)
            }
            Ok(WatchEvent::Deleted(object)) => yield_object(object, Event::Delete, stream),
            Ok(WatchEvent::Bookmark(bookmark)) => {
                let version = bookmark.metadata.resource_version;
                (self.progress)(&version);
                (None, State::Watching { version, stream })
            }
            // Out of the server's history: list again.
            Ok(WatchEvent::Error(status)) if status.code == 410 => {
                (Some(Err(Error::WatchError(status))), State::Empty)
            }
            Ok(WatchEvent::Error(status)) => (
                Some(Err(Error::WatchError(status))),
                State::Watching { version, stream },
            ),
            Err(error) => (
                Some(Err(Error::WatchFailed(error))),
                State::Watching { version, stream },
            ),
        }
    }
}

/// Yields an object event; its version is the new resume point. An object without a
/// version cannot be resumed from: list again.
fn yield_object<K: Resource>(object: K, event: fn(K) -> Event<K>, stream: Changes<K>) -> Step<K> {
    match object.resource_version().filter(|v| !v.is_empty()) {
        Some(version) => (Some(Ok(event(object))), State::Watching { version, stream }),
        None => (Some(Err(Error::NoResourceVersion)), State::Empty),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{ListMeta, ObjectMeta, TypeMeta};
    use kube::core::Status;
    use kube::core::watch::{Bookmark, BookmarkMeta};

    use super::*;

    /// One scripted watch: these changes then the end of the stream, or silence.
    enum Watch {
        Changes(Vec<WatchEvent<ConfigMap>>),
        Silent,
    }

    /// A [`Source`] that plays a script and records the calls made to it.
    #[derive(Default)]
    struct Script {
        lists: Mutex<VecDeque<kube::Result<ObjectList<ConfigMap>>>>,
        watches: Mutex<VecDeque<Watch>>,
        calls: Mutex<Vec<String>>,
    }

    impl Source for Arc<Script> {
        type Object = ConfigMap;

        async fn list(&self, params: &ListParams) -> kube::Result<ObjectList<ConfigMap>> {
            let from = params.continue_token.as_deref().unwrap_or("start");
            self.calls.lock().unwrap().push(format!("list {from}"));
            self.lists
                .lock()
                .unwrap()
                .pop_front()
                .expect("a scripted list")
        }

        async fn watch(&self, _: &WatchParams, version: &str) -> kube::Result<Changes<ConfigMap>> {
            self.calls.lock().unwrap().push(format!("watch {version}"));
            match self.watches.lock().unwrap().pop_front() {
                Some(Watch::Changes(changes)) => {
                    Ok(futures::stream::iter(changes.into_iter().map(Ok)).boxed())
                }
                Some(Watch::Silent) | None => Ok(futures::stream::pending().boxed()),
            }
        }
    }

    fn object(name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                resource_version: Some(version.to_owned()).filter(|v| !v.is_empty()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn page(
        objects: Vec<ConfigMap>,
        version: &str,
        continue_token: Option<&str>,
    ) -> kube::Result<ObjectList<ConfigMap>> {
        Ok(ObjectList {
            types: TypeMeta::default(),
            metadata: ListMeta {
                resource_version: Some(version.to_owned()),
                continue_: continue_token.map(str::to_owned),
                ..ListMeta::default()
            },
            items: objects,
        })
    }

    fn bookmark(version: &str) -> WatchEvent<ConfigMap> {
        WatchEvent::Bookmark(Bookmark {
            types: TypeMeta::default(),
            metadata: BookmarkMeta {
                resource_version: version.to_owned(),
                annotations: Default::default(),
            },
        })
    }

    fn failure(code: u16) -> Box<Status> {
        Status::failure("scripted", "Scripted")
            .with_code(code)
            .boxed()
    }

    /// Runs `script`, taking `count` items; returns them (as short strings), the calls
    /// made, and the progress reported.
    async fn play(
        script: Script,
        timeout: Duration,
        count: usize,
    ) -> (Vec<String>, Vec<String>, Vec<String>) {
        let script = Arc::new(script);
        let progress = Arc::new(Mutex::new(Vec::new()));
        let reported = progress.clone();
        let items = list_watch(script.clone(), timeout, move |version| {
            reported.lock().unwrap().push(version.to_owned());
        })
        .take(count)
        .map(|item| match item {
            Ok(Event::Init) => "init".to_owned(),
            Ok(Event::InitApply(object)) => format!("init-apply {}", object.name_any()),
            Ok(Event::InitDone) => "init-done".to_owned(),
            Ok(Event::Apply(object)) => format!("apply {}", object.name_any()),
            Ok(Event::Delete(object)) => format!("delete {}", object.name_any()),
            Err(Error::WatchError(status)) => format!("watch error {}", status.code),
            Err(Error::InitialListFailed(_)) => "list error".to_owned(),
            Err(error) => format!("error: {error}"),
        })
        .collect()
        .await;
        let calls = script.calls.lock().unwrap().clone();
        let progress = progress.lock().unwrap().clone();
        (items, calls, progress)
    }

    fn script(lists: Vec<kube::Result<ObjectList<ConfigMap>>>, watches: Vec<Watch>) -> Script {
        Script {
            lists: Mutex::new(lists.into()),
            watches: Mutex::new(watches.into()),
            calls: Mutex::default(),
        }
    }

    #[tokio::test]
    async fn lists_every_page_then_watches_from_the_lists_version() {
        let script = script(
            vec![
                page(vec![object("a", "3")], "10", Some("next")),
                page(vec![object("b", "7")], "10", None),
            ],
            vec![Watch::Changes(vec![WatchEvent::Added(object("c", "11"))])],
        );
        let (items, calls, progress) = play(script, WATCH_TIMEOUT, 5).await;
        assert_eq!(
            items,
            [
                "init",
                "init-apply a",
                "init-apply b",
                "init-done",
                "apply c"
            ]
        );
        assert_eq!(calls, ["list start", "list next", "watch 10"]);
        assert_eq!(
            progress,
            ["10"],
            "the list's version, once its objects were consumed"
        );
    }

    #[tokio::test]
    async fn a_bookmark_reports_its_version_and_is_the_resume_point() {
        let script = script(
            vec![page(vec![], "10", None)],
            vec![
                Watch::Changes(vec![bookmark("20")]),
                Watch::Changes(vec![WatchEvent::Added(object("x", "21"))]),
            ],
        );
        let (items, calls, progress) = play(script, WATCH_TIMEOUT, 3).await;
        assert_eq!(items, ["init", "init-done", "apply x"]);
        assert_eq!(calls, ["list start", "watch 10", "watch 20"]);
        assert_eq!(progress, ["10", "20", "20"]);
    }

    #[tokio::test]
    async fn an_ended_watch_resumes_from_the_last_event_without_listing() {
        let script = script(
            vec![page(vec![], "10", None)],
            vec![
                Watch::Changes(vec![WatchEvent::Modified(object("a", "12"))]),
                Watch::Changes(vec![WatchEvent::Deleted(object("a", "13"))]),
            ],
        );
        let (items, calls, _) = play(script, WATCH_TIMEOUT, 4).await;
        assert_eq!(items, ["init", "init-done", "apply a", "delete a"]);
        assert_eq!(calls, ["list start", "watch 10", "watch 12"]);
    }

    #[tokio::test]
    async fn a_watch_out_of_history_lists_again() {
        let script = script(
            vec![
                page(vec![], "10", None),
                page(vec![object("y", "25")], "30", None),
            ],
            vec![Watch::Changes(vec![WatchEvent::Error(failure(410))])],
        );
        let (items, calls, _) = play(script, WATCH_TIMEOUT, 6).await;
        assert_eq!(
            items,
            [
                "init",
                "init-done",
                "watch error 410",
                "init",
                "init-apply y",
                "init-done"
            ]
        );
        assert_eq!(calls, ["list start", "watch 10", "list start"]);
    }

    #[tokio::test]
    async fn other_errors_are_yielded_and_the_watch_goes_on() {
        let script = script(
            vec![
                Err(kube::Error::Api(failure(500))),
                page(vec![], "10", None),
            ],
            vec![Watch::Changes(vec![
                WatchEvent::Error(failure(500)),
                WatchEvent::Added(object("b", "11")),
            ])],
        );
        let (items, calls, _) = play(script, WATCH_TIMEOUT, 6).await;
        assert_eq!(items[1], "list error");
        assert_eq!(
            items[2..],
            ["init", "init-done", "watch error 500", "apply b"]
        );
        assert_eq!(calls, ["list start", "list start", "watch 10"]);
    }

    #[tokio::test]
    async fn an_event_without_a_version_lists_again() {
        let script = script(
            vec![page(vec![], "10", None), page(vec![], "11", None)],
            vec![Watch::Changes(vec![WatchEvent::Added(object("a", ""))])],
        );
        let (items, _, _) = play(script, WATCH_TIMEOUT, 5).await;
        assert_eq!(items[2], format!("error: {}", Error::NoResourceVersion));
        assert_eq!(items[3..], ["init", "init-done"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_is_given_up_after_the_timeout_and_resumed() {
        let script = script(
            vec![page(vec![], "10", None)],
            vec![
                Watch::Silent,
                Watch::Changes(vec![WatchEvent::Added(object("b", "11"))]),
            ],
        );
        let start = tokio::time::Instant::now();
        let (items, calls, _) = play(script, Duration::from_secs(10), 3).await;
        assert_eq!(items, ["init", "init-done", "apply b"]);
        assert_eq!(calls, ["list start", "watch 10", "watch 10"]);
        assert_eq!(start.elapsed(), Duration::from_secs(10) + IDLE_MARGIN);
    }
}
