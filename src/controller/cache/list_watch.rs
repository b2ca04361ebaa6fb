//! The list-then-watch stream behind each cache, reporting how far the cache has come.
//!
//! kube-runtime's `watcher` requests bookmarks but consumes them silently (kube-runtime
//! 5.0, `watcher.rs`, `State::Watching`: a `WatchEvent::Bookmark` only moves its private
//! resume version). Yet a bookmark is the API server vouching "this watch has delivered
//! every change up to version v" — what the read-your-own-writes check needs to know when
//! none of the watched objects changed (docs/design.md §7). This is the same state machine
//! (initial list, watch from the list's version, resume after a watch ends, re-list on
//! 410 Gone), yielding the same [`Event`]s for the reflector and reporting those versions.
//!
//! The initial list is streamed by default ([`InitialList::Streaming`], KEP-3157: a watch
//! with `sendInitialEvents=true` that sends every object, then a bookmark annotated
//! `k8s.io/initial-events-end` at the snapshot's version — the API server serves it from
//! its watch cache without building a list response). An API server that refuses it (the
//! `WatchList` gate off answers 422) or ignores it (no end bookmark before the watch
//! ends) is listed in pages from then on.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::runtime::watcher::{Error, Event};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::Slim;

/// Objects per list page (client-go's pager default).
const PAGE_SIZE: u32 = 500;

/// How long the server keeps one watch open before ending it; the stream then resumes
/// from the last version seen (kube-runtime's default).
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(290);

/// Silence this much longer than the watch timeout means the connection is dead.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// The annotation of the bookmark that ends a streamed initial list.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// How the initial list (and every re-list after 410 Gone) is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum InitialList {
    /// A watch that streams the current objects first (`sendInitialEvents`), falling back
    /// to pages when the API server does not stream.
    #[default]
    Streaming,
    /// A LIST in pages of 500, then a watch from the list's version.
    Paged,
}

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

/// The API server, read [`Slim`]: the objects come without what no cache keeps.
impl<K> Source for Api<Slim<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    type Object = K;

    async fn list(&self, params: &ListParams) -> kube::Result<ObjectList<K>> {
        let ObjectList {
            types,
            metadata,
            items,
        } = Api::list(self, params).await?;
        let items = items.into_iter().map(|Slim(object)| object).collect();
        Ok(ObjectList {
            types,
            metadata,
            items,
        })
    }

    async fn watch(&self, params: &WatchParams, version: &str) -> kube::Result<Changes<K>> {
        let changes = Api::watch(self, params, version).await?;
        Ok(changes.map_ok(unwrapped).boxed())
    }
}

/// The event with its object out of [`Slim`].
fn unwrapped<K>(event: WatchEvent<Slim<K>>) -> WatchEvent<K> {
    match event {
        WatchEvent::Added(Slim(object)) => WatchEvent::Added(object),
        WatchEvent::Modified(Slim(object)) => WatchEvent::Modified(object),
        WatchEvent::Deleted(Slim(object)) => WatchEvent::Deleted(object),
        WatchEvent::Bookmark(bookmark) => WatchEvent::Bookmark(bookmark),
        WatchEvent::Error(status) => WatchEvent::Error(status),
    }
}

/// Lists, then watches, `source` for ever; errors are yielded and the next poll recovers
/// (put a backoff after it). `progress` is called with a resourceVersion once every change
/// up to it has been yielded *and consumed* — when a watch starts from a list's (or a
/// resumed) version, and on each bookmark — never with an object's own version: the
/// caller sees those in the events.
pub fn list_watch<S: Source>(
    source: S,
    initial: InitialList,
    timeout: Duration,
    progress: impl Fn(&str) + Send + Sync + 'static,
) -> impl Stream<Item = Result<Event<S::Object>, Error>> + Send {
    let watcher = Watcher {
        source,
        streaming: AtomicBool::new(initial == InitialList::Streaming),
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
    /// A streamed initial list is to be requested.
    Opening,
    /// Streaming the initial list: objects until the end bookmark.
    Streaming { stream: Changes<K> },
    /// The streamed list ended at `version` and was yielded; its watch goes on.
    Streamed { version: String, stream: Changes<K> },
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

/// The source, whether it streams initial lists, the server's watch timeout, and where
/// versions are reported.
struct Watcher<S, F> {
    source: S,
    streaming: AtomicBool,
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
            State::Empty if self.streaming.load(Ordering::Relaxed) => {
                (Some(Ok(Event::Init)), State::Opening)
            }
            State::Empty => (
                Some(Ok(Event::Init)),
                State::Listing {
                    continue_token: None,
                    objects: VecDeque::new(),
                    version: None,
                },
            ),
            State::Opening => self.open_stream().await,
            State::Streaming { stream } => self.stream_next(stream).await,
            State::Streamed { version, stream } => {
                // The end of the initial list has been consumed.
                (self.progress)(&version);
                (None, State::Watching { version, stream })
            }
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

    /// Requests a streamed initial list (a consistent snapshot: no resourceVersion).
    async fn open_stream(&self) -> Step<S::Object> {
        let params = WatchParams::default()
            .initial_events()
            .timeout(u32::try_from(self.timeout.as_secs()).unwrap_or(u32::MAX));
        match self.source.watch(&params, "").await {
            Ok(stream) => (None, State::Streaming { stream }),
            Err(kube::Error::Api(status)) if status.code == 422 || status.code == 400 => {
                self.stop_streaming(&status.message);
                (None, State::Empty)
            }
            Err(error) => (Some(Err(Error::WatchStartFailed(error))), State::Empty),
        }
    }

    /// The next object of a streamed initial list, or its end.
    async fn stream_next(&self, mut stream: Changes<S::Object>) -> Step<S::Object> {
        let change = match tokio::time::timeout(self.timeout + IDLE_MARGIN, stream.next()).await {
            Ok(Some(change)) => change,
            Ok(None) => {
                // Ended without the end bookmark: the server ignored sendInitialEvents.
                self.stop_streaming("the watch ended before its initial-events-end bookmark");
                return (None, State::Empty);
            }
            Err(_) => {
                tracing::warn!("streamed list silent past the watch timeout; starting over");
                return (None, State::Empty);
            }
        };
        match change {
            Ok(WatchEvent::Added(object) | WatchEvent::Modified(object)) => (
                Some(Ok(Event::InitApply(object))),
                State::Streaming { stream },
            ),
            // The API server sends none before the end bookmark (KEP-3157).
            Ok(WatchEvent::Deleted(_)) => (None, State::Streaming { stream }),
            Ok(WatchEvent::Bookmark(bookmark))
                if bookmark
                    .metadata
                    .annotations
                    .contains_key(INITIAL_EVENTS_END) =>
            {
                let version = bookmark.metadata.resource_version;
                (
                    Some(Ok(Event::InitDone)),
                    State::Streamed { version, stream },
                )
            }
            Ok(WatchEvent::Bookmark(_)) => (None, State::Streaming { stream }),
            Ok(WatchEvent::Error(status)) => (Some(Err(Error::WatchError(status))), State::Empty),
            Err(error) => (Some(Err(Error::WatchFailed(error))), State::Empty),
        }
    }

    /// Lists in pages from now on (said once).
    fn stop_streaming(&self, why: &str) {
        if self.streaming.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                reason = why,
                "the API server does not stream initial lists (the WatchList feature gate off?): listing in pages"
            );
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

    /// One scripted watch: these changes then the end of the stream, silence, or a
    /// refusal with this code.
    enum Watch {
        Changes(Vec<WatchEvent<ConfigMap>>),
        Silent,
        Refused(u16),
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

        async fn watch(
            &self,
            params: &WatchParams,
            version: &str,
        ) -> kube::Result<Changes<ConfigMap>> {
            let call = if params.send_initial_events {
                assert!(params.bookmarks, "streaming needs bookmarks");
                format!("stream from {version:?}")
            } else {
                format!("watch {version}")
            };
            self.calls.lock().unwrap().push(call);
            match self.watches.lock().unwrap().pop_front() {
                Some(Watch::Changes(changes)) => {
                    Ok(futures::stream::iter(changes.into_iter().map(Ok)).boxed())
                }
                Some(Watch::Refused(code)) => Err(kube::Error::Api(failure(code))),
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

    fn end_of_initial_events(version: &str) -> WatchEvent<ConfigMap> {
        WatchEvent::Bookmark(Bookmark {
            types: TypeMeta::default(),
            metadata: BookmarkMeta {
                resource_version: version.to_owned(),
                annotations: [(INITIAL_EVENTS_END.to_owned(), "true".to_owned())].into(),
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
        play_with(script, InitialList::Paged, timeout, count).await
    }

    /// [`play`] with the initial list fetched as `initial` says.
    async fn play_with(
        script: Script,
        initial: InitialList,
        timeout: Duration,
        count: usize,
    ) -> (Vec<String>, Vec<String>, Vec<String>) {
        let script = Arc::new(script);
        let progress = Arc::new(Mutex::new(Vec::new()));
        let reported = progress.clone();
        let items = list_watch(script.clone(), initial, timeout, move |version| {
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
    async fn a_streamed_list_yields_its_objects_then_watches_on_the_same_stream() {
        let script = script(
            vec![],
            vec![Watch::Changes(vec![
                WatchEvent::Added(object("a", "3")),
                bookmark("5"),
                WatchEvent::Added(object("b", "7")),
                end_of_initial_events("10"),
                WatchEvent::Modified(object("a", "11")),
            ])],
        );
        let (items, calls, progress) =
            play_with(script, InitialList::Streaming, WATCH_TIMEOUT, 5).await;
        assert_eq!(
            items,
            [
                "init",
                "init-apply a",
                "init-apply b",
                "init-done",
                "apply a"
            ]
        );
        assert_eq!(calls, [r#"stream from """#], "no LIST, one watch");
        assert_eq!(
            progress,
            ["10"],
            "the end bookmark's version once the list was consumed; not the one before it"
        );
    }

    #[tokio::test]
    async fn a_server_refusing_to_stream_is_listed_in_pages_from_then_on() {
        let script = script(
            vec![
                page(vec![object("a", "3")], "10", None),
                page(vec![], "30", None),
            ],
            vec![
                Watch::Refused(422),
                Watch::Changes(vec![WatchEvent::Error(failure(410))]),
            ],
        );
        let (items, calls, _) = play_with(script, InitialList::Streaming, WATCH_TIMEOUT, 7).await;
        assert_eq!(
            items,
            [
                "init",
                "init",
                "init-apply a",
                "init-done",
                "watch error 410",
                "init",
                "init-done"
            ]
        );
        assert_eq!(
            calls,
            [r#"stream from """#, "list start", "watch 10", "list start"],
            "after the refusal, a re-list is paged too"
        );
    }

    #[tokio::test]
    async fn a_stream_ending_before_its_end_bookmark_falls_back_to_pages() {
        let script = script(
            vec![page(vec![object("b", "8")], "10", None)],
            vec![Watch::Changes(vec![WatchEvent::Added(object("a", "3"))])],
        );
        let (items, calls, _) = play_with(script, InitialList::Streaming, WATCH_TIMEOUT, 5).await;
        assert_eq!(
            items,
            ["init", "init-apply a", "init", "init-apply b", "init-done"],
            "the reflector starts over: a stays only if the list has it"
        );
        assert_eq!(calls, [r#"stream from """#, "list start"]);
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
