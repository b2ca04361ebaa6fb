//! A TLS-terminating proxy in front of the test API server that delays the data of watch
//! responses (not the rest): a controller behind it writes at full speed but its watch
//! cache lags behind its own writes, as a slow or congested watch would.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, BodyStream, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use kube::Client;
use tokio::net::TcpListener;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Starts the proxy on a free loopback port, serving with the API server's own
/// certificate (from the control plane's `pki/`), forwarding through `client`. Returns
/// its address.
pub async fn start(pki: &Path, client: Client, watch_delay: Duration) -> SocketAddr {
    let acceptor = super::holding_proxy::acceptor(pki);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let address = listener.local_addr().expect("proxy address");
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, client) = (acceptor.clone(), client.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    service_fn(move |request| forward(client.clone(), request, watch_delay));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    address
}

/// Sends `request` on through `client`; the body of a watch response comes `delay` late,
/// chunk by chunk.
async fn forward(
    client: Client,
    request: Request<Incoming>,
    delay: Duration,
) -> Result<Response<UnsyncBoxBody<Bytes, BoxError>>, BoxError> {
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let (parts, body) = request.into_parts();
    let bytes = body.collect().await?.to_bytes();
    let mut upstream = Request::from_parts(parts, kube::client::Body::from(bytes.to_vec()));
    upstream.headers_mut().remove(hyper::header::HOST);
    let response = client.send(upstream).await?;
    let (parts, body) = response.into_parts();
    let body: UnsyncBoxBody<Bytes, BoxError> = if watch {
        // Each chunk leaves `delay` after it arrived: a constant lag, not a growing one.
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut frames = BodyStream::new(body);
            while let Some(frame) = frames.next().await {
                let due = tokio::time::Instant::now() + delay;
                if sender.send((due, frame.map_err(BoxError::from))).is_err() {
                    return;
                }
            }
        });
        let frames = tokio_stream_from(receiver).then(|(due, frame)| async move {
            tokio::time::sleep_until(due).await;
            frame
        });
        BodyExt::boxed_unsync(StreamBody::new(frames))
    } else {
        BodyExt::boxed_unsync(body.map_err(BoxError::from))
    };
    Ok(Response::from_parts(parts, body))
}

/// The messages of `receiver` as a stream.
fn tokio_stream_from<T: Send + 'static>(
    receiver: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> {
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}
