//! The agent's own HTTP endpoints on `agent.listen`: the status page `/`, `/api/v1/status`,
//! `/api/v1/incidents`, `/api/v1/history`, the Atom feeds `/feed.atom` and `/feed/<target>.atom`,
//! `/badge/<target>.svg`, `/metrics` (the registry, to scrape beside or instead of pushing),
//! `/healthz` (liveness and the last push's status), `/probe` (one pair now), each to GET and
//! HEAD, and the mutating `POST /-/reload` and `POST /-/maintenance` behind the admin guard;
//! served by hyper behind the shared [`Door`] (cap, accept backoff, idle timeout) with its header
//! read timeout, through the web config (TLS, basic auth, headers) when one is given.

use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use tokio::sync::mpsc;

use super::admin::ReloadReply;
use super::firing::Runs;
use crate::listener::Door;
use crate::web_config::Web;

mod handlers;

/// Serves the endpoints on `door` through `web` (TLS, basic auth, headers) if one is
/// configured: reads from the shared state, `/probe` through `runs`, and `POST /-/reload`
/// through `reload` to the daemon, which owns the reloading.
pub(super) async fn serve(
    door: Door,
    web: Option<Arc<Web>>,
    runs: Arc<Runs>,
    reload: mpsc::Sender<ReloadReply>,
) {
    crate::web_config::serve(door, web, move |req| {
        let (runs, reload) = (runs.clone(), reload.clone());
        async move { route(req, &runs, &reload).await }
    })
    .await;
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
