//! Serving a [`Door`]'s connections over HTTP/1 through the web config: the TLS handshake (if
//! any) inside the connection's slot and under the header timeout, then every request past the
//! basic-auth guard and every response with the configured headers.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio_util::either::Either;

use super::file::WebConfig;
use super::live::Web;
use crate::listener::{Door, MaybeTls, Tracked};

/// Per connection, the request head and any read-ahead live in this much buffer at most: our
/// requests are a line and a few headers (hyper's floor is 8 KiB).
const MAX_BUF: usize = 16 * 1024;

/// What a plain-HTTP client on the TLS port reads before the connection closes, as Go's
/// servers answer it: it says what went wrong where a failed handshake would say nothing.
const PLAIN_ON_TLS: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// Serves `door` forever: each connection on its own task, each request answered by `handler`
/// once `web` (if any) lets it through.
pub(crate) async fn serve<H, F>(door: Door, web: Option<Arc<Web>>, handler: H)
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let header_timeout = door.limits().header_timeout;
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(MAX_BUF);
    loop {
        let (sock, slot) = door.accept().await;
        let (web, handler, http) = (web.clone(), handler.clone(), http.clone());
        tokio::spawn(async move {
            let peer = slot.peer();
            let served = slot.run(async move {
                let config = web.as_ref().map(|w| w.current());
                let io = match open(sock, config.as_deref(), header_timeout).await {
                    Ok(io) => io,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "connection refused before its first request");
                        return Ok(());
                    }
                };
                let service = service_fn(move |req| {
                    let (web, config, handler) = (web.clone(), config.clone(), handler.clone());
                    async move {
                        Ok::<_, Infallible>(guarded(req, web.as_deref(), config.as_deref(), handler).await)
                    }
                });
                http.serve_connection(TokioIo::new(io), service).await
            });
            // A header timeout or a malformed request ends the connection: normal on an open port.
            if let Some(Err(e)) = served.await {
                tracing::debug!(%peer, error = %e, "endpoint connection ended with an error");
            }
        });
    }
}

/// One request: the guard, then the handler; the configured headers on either answer.
async fn guarded<H, F>(
    req: Request<Incoming>,
    web: Option<&Web>,
    config: Option<&WebConfig>,
    handler: H,
) -> Response<Full<Bytes>>
where
    H: Fn(Request<Incoming>) -> F,
    F: Future<Output = Response<Full<Bytes>>>,
{
    let (Some(web), Some(config)) = (web, config) else {
        return handler(req).await;
    };
    let limited = config
        .limiter
        .as_ref()
        .is_some_and(|l| !l.allow(std::time::Instant::now()));
    let mut r = if limited {
        tracing::debug!(path = %req.uri().path(), "request refused: over rate_limit");
        too_many()
    } else {
        match web.refusal(config, req.headers()).await {
            Some(refusal) => {
                tracing::debug!(path = %req.uri().path(), "request refused: no valid basic-auth credentials");
                refusal
            }
            None => handler(req).await,
        }
    };
    for (k, v) in &config.headers {
        r.headers_mut().insert(k, v.clone());
    }
    r
}

/// 429, as the toolkit answers past its rate limit.
fn too_many() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(b"Too Many Requests\n")));
    *r.status_mut() = hyper::StatusCode::TOO_MANY_REQUESTS;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Why a connection ended before HTTP began.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("plain HTTP on the TLS port: answered 400")]
    PlainHttp,
    #[error("no TLS handshake within {0:?}")]
    Slow(Duration),
    #[error("TLS handshake failed: {0}")]
    Handshake(io::Error),
}

/// The connection as HTTP reads it: the socket, or TLS over it once the handshake is done
/// within `timeout`.
async fn open(
    mut sock: Tracked,
    config: Option<&WebConfig>,
    timeout: Duration,
) -> Result<MaybeTls, Refused> {
    let Some(tls) = config.and_then(|c| c.tls.clone()) else {
        return Ok(Either::Left(sock));
    };
    let handshake = async {
        // A TLS record starts with 0x16 (handshake); a letter is an HTTP method.
        let mut first = [0u8; 1];
        if matches!(sock.get_ref().peek(&mut first).await, Ok(1) if first[0].is_ascii_alphabetic())
        {
            let _ = sock.write_all(PLAIN_ON_TLS).await;
            let _ = sock.shutdown().await;
            return Err(Refused::PlainHttp);
        }
        tokio_rustls::TlsAcceptor::from(tls)
            .accept(sock)
            .await
            .map_err(Refused::Handshake)
    };
    match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(tls)) => Ok(Either::Right(Box::new(tls))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Refused::Slow(timeout)),
    }
}
