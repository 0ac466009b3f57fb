//! The agent's own HTTP endpoints on `agent.listen`: the status page `/`, `/api/v1/status`,
//! `/api/v1/incidents`, `/api/v1/history`, the Atom feeds `/feed.atom` and `/feed/<target>.atom`,
//! `/badge/<target>.svg`, `/metrics` (the registry, to scrape beside or instead of pushing),
//! `/healthz` (liveness and the last push's status), `/probe` (one pair now), each to GET and
//! HEAD, and the mutating `POST /-/reload` and `POST /-/maintenance` behind the admin guard;
//! served by hyper behind the shared [`Door`] (cap, accept backoff, idle timeout) with its header
//! read timeout.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::mpsc;

use super::admin::ReloadReply;
use super::firing::Runs;
use crate::listener::Door;

mod handlers;

/// Per connection, the request head and any read-ahead live in this much buffer at most: our
/// requests are a line and a few headers (hyper's floor is 8 KiB).
const MAX_BUF: usize = 16 * 1024;

/// Serves the endpoints on `door`: reads from the shared state, `/probe` through `runs`, and
/// `POST /-/reload` through `reload` to the daemon, which owns the reloading.
pub(super) async fn serve(door: Door, runs: Arc<Runs>, reload: mpsc::Sender<ReloadReply>) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(door.limits().header_timeout)
        .max_buf_size(MAX_BUF);
    loop {
        let (sock, slot) = door.accept().await;
        let (runs, reload) = (runs.clone(), reload.clone());
        let service = service_fn(move |req| {
            let (runs, reload) = (runs.clone(), reload.clone());
            async move { Ok::<_, Infallible>(route(req, &runs, &reload).await) }
        });
        let conn = http.serve_connection(TokioIo::new(sock), service);
        tokio::spawn(async move {
            let peer = slot.peer();
            // A header timeout or a malformed request ends the connection: normal on an open port.
            if let Some(Err(e)) = slot.run(conn).await {
                tracing::debug!(%peer, error = %e, "endpoint connection ended with an error");
            }
        });
    }
}

/// The routing table: which handler answers a method and path; HEAD is answered as GET. A
/// POST passes the admin guard first.
async fn route(
    req: Request<Incoming>,
    runs: &Arc<Runs>,
    reload: &mpsc::Sender<ReloadReply>,
) -> Response<Full<Bytes>> {
    let shared = runs.shared();
    let path = req.uri().path().to_string();
    if req.method() == Method::POST {
        if let Some(refusal) = handlers::refusal(shared, &path, req.headers()) {
            return refusal;
        }
    }
    let query = req.uri().query();
    // HEAD is GET without the body (hyper drops it and keeps the length): what load balancers
    // and uptime checkers ask of /healthz.
    let method = match req.method() {
        &Method::HEAD => &Method::GET,
        m => m,
    };
    match (method, path.as_str()) {
        (&Method::GET, "/") => handlers::status_page(shared),
        (&Method::GET, "/api/v1/status") => handlers::status(shared),
        (&Method::GET, "/api/v1/incidents") => handlers::incidents(shared),
        (&Method::GET, "/api/v1/history") => handlers::history(shared, query),
        (&Method::GET, "/feed.atom") => handlers::feed(shared, None),
        (&Method::GET, p) if p.starts_with("/feed/") && p.ends_with(".atom") => {
            handlers::target_feed(shared, &p["/feed/".len()..p.len() - ".atom".len()])
        }
        (&Method::GET, p) if p.starts_with("/badge/") && p.ends_with(".svg") => {
            handlers::badge(shared, &p["/badge/".len()..p.len() - ".svg".len()])
        }
        (&Method::GET, "/probe") => handlers::probe(runs, query).await,
        (&Method::GET, "/metrics") => handlers::metrics(shared).await,
        (&Method::GET, "/healthz") => handlers::healthz(shared),
        (&Method::POST, "/-/reload") => handlers::reload(reload).await,
        (&Method::POST, "/-/maintenance") => handlers::maintenance(shared, req.into_body()).await,
        _ => handlers::not_found(),
    }
}
