//! A TLS-terminating proxy in front of the test API server that can hold requests, as a
//! network partition holds TCP segments: while it holds, requests wait in the proxy —
//! in both directions nothing gets through — and when it heals they are delivered, late,
//! even if their sender has given up on them meanwhile (bytes already sent cannot be
//! called back). One proxy per controller replica partitions that replica alone.
//!
//! [`HoldingProxy::hold_from`] starts holding at the first request that matches, so a
//! test can cut a replica off exactly between the read and the write of a target.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::wait::eventually_every;
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, BodyStream, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use kube::Client;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Which requests pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Everything passes.
    Open,
    /// Everything passes until a request with this method whose path ends with this
    /// suffix arrives; from that one on, everything is held.
    HoldFrom(&'static str, &'static str),
    /// Everything is held.
    Held,
}

/// The proxy; cheap to clone.
#[derive(Clone)]
pub struct HoldingProxy {
    address: SocketAddr,
    mode: Arc<watch::Sender<Mode>>,
    /// Held requests the API server has not answered yet.
    undelivered: Arc<AtomicUsize>,
}

impl HoldingProxy {
    /// Starts a proxy on a free loopback port, serving with the API server's own
    /// certificate (from the control plane's `pki/`) and forwarding through `client`.
    pub async fn start(pki: &Path, client: Client) -> HoldingProxy {
        let acceptor = acceptor(pki);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let proxy = HoldingProxy {
            address: listener.local_addr().expect("proxy address"),
            mode: Arc::new(watch::channel(Mode::Open).0),
            undelivered: Arc::default(),
        };
        let serving = proxy.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, client, proxy) = (acceptor.clone(), client.clone(), serving.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service =
                        service_fn(move |request| forward(proxy.clone(), client.clone(), request));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        proxy
    }

    /// `https://127.0.0.1:PORT`, for a kubeconfig.
    pub fn url(&self) -> String {
        format!("https://{}", self.address)
    }

    /// Holds every request from now on.
    pub fn hold(&self) {
        self.mode.send_replace(Mode::Held);
    }

    /// Holds from the first `method` request whose path ends with `suffix` (that one
    /// included) on.
    pub fn hold_from(&self, method: &'static str, suffix: &'static str) {
        self.mode.send_replace(Mode::HoldFrom(method, suffix));
    }

    /// Whether it holds now.
    pub fn holding(&self) -> bool {
        *self.mode.borrow() == Mode::Held
    }

    /// Delivers what it held and lets everything pass again.
    pub fn heal(&self) {
        self.mode.send_replace(Mode::Open);
    }

    /// Waits until the API server has answered every request held so far (after
    /// [`HoldingProxy::heal`]); panics after `limit`.
    pub async fn wait_delivered(&self, limit: Duration) {
        let pace = Duration::from_millis(10);
        eventually_every(pace, limit, "delivery of the held requests", || async {
            match self.undelivered.load(Ordering::SeqCst) {
                0 => Ok(()),
                waiting => Err(format!("{waiting} undelivered")),
            }
        })
        .await;
    }
}

/// Forwards `request`, after the hold if there is one. The forwarding runs on a task of
/// its own: a request the sender abandons is delivered all the same.
async fn forward(
    proxy: HoldingProxy,
    client: Client,
    request: Request<Incoming>,
) -> Result<Response<UnsyncBoxBody<Bytes, BoxError>>, BoxError> {
    {
        let held = proxy.admit(request.method(), request.uri().path());
        let (parts, body) = request.into_parts();
        let bytes = body.collect().await.map_err(boxed)?.to_bytes();
        let mut mode = proxy.mode.subscribe();
        let (respond, response) = tokio::sync::oneshot::channel();
        let undelivered = proxy.undelivered.clone();
        tokio::spawn(async move {
            if held {
                until_open(&mut mode).await;
            }
            let mut upstream = Request::from_parts(parts, kube::client::Body::from(bytes.to_vec()));
            upstream.headers_mut().remove(hyper::header::HOST);
            let answered = client.send(upstream).await;
            if held {
                undelivered.fetch_sub(1, Ordering::SeqCst);
            }
            let _ = respond.send(answered);
        });
        let (parts, body) = response.await.map_err(boxed)?.map_err(boxed)?.into_parts();
        // A response still streaming (a watch) pauses while the proxy holds.
        let mode = proxy.mode.subscribe();
        let frames = futures::stream::unfold(
            (BodyStream::new(body), mode),
            |(mut frames, mut mode)| async move {
                let frame = frames.next().await?;
                until_open(&mut mode).await;
                Some((frame.map_err(boxed_kube), (frames, mode)))
            },
        );
        Ok(Response::from_parts(
            parts,
            BodyExt::boxed_unsync(StreamBody::new(frames)),
        ))
    }
}

impl HoldingProxy {
    /// Decides whether a request arriving now is held.
    fn admit(&self, method: &Method, path: &str) -> bool {
        let mut held = false;
        self.mode.send_if_modified(|mode| match *mode {
            Mode::Open => false,
            Mode::Held => {
                held = true;
                false
            }
            Mode::HoldFrom(wanted, suffix) => {
                held = method.as_str() == wanted && path.ends_with(suffix);
                if held {
                    *mode = Mode::Held;
                }
                held
            }
        });
        if held {
            self.undelivered.fetch_add(1, Ordering::SeqCst);
        }
        held
    }
}

fn boxed(error: impl std::error::Error + Send + Sync + 'static) -> BoxError {
    Box::new(error)
}

fn boxed_kube(error: kube::Error) -> BoxError {
    Box::new(error)
}

/// Waits until the proxy no longer holds (or is gone).
async fn until_open(mode: &mut watch::Receiver<Mode>) {
    while *mode.borrow_and_update() == Mode::Held {
        if mode.changed().await.is_err() {
            return;
        }
    }
}

/// A TLS acceptor with the API server's certificate and key (from the control plane's
/// `pki/`), for proxies in front of it.
pub fn acceptor(pki: &Path) -> TlsAcceptor {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(pki.join("server.crt"))
        .expect("server.crt")
        .collect::<Result<_, _>>()
        .expect("certificates");
    let key = PrivateKeyDer::from_pem_file(pki.join("server.key")).expect("server.key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("TLS config");
    TlsAcceptor::from(Arc::new(config))
}
