//! `status-page`: one status page for a fleet of agents, read from the store they write to.
//!
//! The agents probe from their places and push or remote-write; this command probes nothing.
//! It reads PromQL through the store's HTTP API (`query`), folds the answers into targets with
//! one row per location and the N-of-M state of the shipped alerts (`model`), and renders the
//! page (`page`). It serves `GET /` (HTML), `GET /api/v1/fleet` (JSON) and `GET /healthz` (and
//! HEAD of each) behind the same hardened listener and web config (TLS, basic auth, headers)
//! as the agent's endpoints; answers are kept
//! for [`CACHE_FOR`], so a crowd of readers costs the store one set of queries every few seconds.
//! A location whose agents stopped writing is told apart by the times of their samples
//! (`silence`). While the store cannot be read, `/` is a page that says so and keeps refreshing
//! itself.

pub(crate) mod model;
mod page;
mod query;
mod silence;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::listener::{Door, Limits};
use crate::web_config::Web;
use model::{Fleet, Outage};
use query::Client;
pub(crate) use query::StoreConnection;

/// How long one reading of the store is served before the next request reads it again.
pub(crate) const CACHE_FOR: Duration = Duration::from_secs(5);
/// The paths served (docs/design.md's Fleet page).
pub(crate) const PATHS: [&str; 3] = ["/", "/api/v1/fleet", "/healthz"];
/// Open connections at most: a public page behind a proxy needs few.
const MAX_CONNECTIONS: usize = 256;

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
const HTML: &str = "text/html; charset=utf-8";

/// The last reading: the fleet, or why there is none.
type Reading = Arc<Result<Fleet, Outage>>;

struct Page {
    client: Client,
    last: Mutex<Option<(Instant, Reading)>>,
}

impl Page {
    /// The fleet as read at most [`CACHE_FOR`] ago; one request reads the store while the
    /// others wait for its answer.
    async fn fleet(&self) -> Reading {
        let mut last = self.last.lock().await;
        if let Some((at, r)) = last.as_ref() {
            if at.elapsed() < CACHE_FOR {
                return r.clone();
            }
        }
        let now = jiff::Timestamp::now();
        let since = outage_since(last.as_ref().map(|(_, r)| r.as_ref()), now);
        let r = Arc::new(model::read(&self.client, now).await.map_err(|e| Outage {
            error: format!("The fleet status is unavailable: {e}"),
            unavailable_since: since,
        }));
        if let Err(e) = r.as_ref() {
            tracing::warn!(error = %e.error, "the fleet page could not read the store");
        }
        *last = Some((Instant::now(), r.clone()));
        r
    }
}

/// Serves the page on `listen`, through the web config at `web_config` if one is given,
/// reading the store at `prometheus` (connected as `connection` says) with queries of at most
/// `query_timeout`, until `shutdown` completes.
pub(crate) async fn serve(
    prometheus: &str,
    connection: query::StoreConnection,
    listen: &str,
    query_timeout: Duration,
    web_config: Option<&Path>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let outbound = connection.outbound().map_err(anyhow::Error::msg)?;
    let client = Client::new(prometheus, query_timeout, outbound).map_err(anyhow::Error::msg)?;
    let web = web_config.map(Web::load).transpose()?.map(Arc::new);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen} (--listen): {e}"))?;
    let door = Door::new(listener, Limits::with_cap(MAX_CONNECTIONS));
    let tls = web.as_ref().is_some_and(|w| w.tls());
    tracing::info!(addr = %door.local_addr()?, tls, store = client.base(), "serving the fleet status page");
    let page = Arc::new(Page {
        client,
        last: Mutex::new(None),
    });
    tokio::select! {
        () = accept(door, web, page) => {}
        () = shutdown => tracing::info!("shutting down"),
    }
    Ok(())
}

async fn accept(door: Door, web: Option<Arc<Web>>, page: Arc<Page>) {
    crate::web_config::serve(door, web, move |req| {
        let page = page.clone();
        async move { route(&req, &page).await }
    })
    .await;
}

/// HEAD is answered as GET: hyper sends its status and headers and drops the body.
async fn route(req: &Request<Incoming>, page: &Page) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "only GET and HEAD are served\n".to_string(),
        );
    }
    match req.uri().path() {
        "/healthz" => reply(StatusCode::OK, TEXT, "ok\n".to_string()),
        path @ ("/" | "/api/v1/fleet") => fleet(path == "/", page).await,
        _ => reply(
            StatusCode::NOT_FOUND,
            TEXT,
            format!("not found: this page serves {}\n", PATHS.join(", ")),
        ),
    }
}

/// When an outage that a reading at `now` fails in began: it lasts from the first failed
/// reading until one succeeds.
fn outage_since(last: Option<&Result<Fleet, Outage>>, now: jiff::Timestamp) -> jiff::Timestamp {
    match last {
        Some(Err(o)) => o.unavailable_since,
        _ => now,
    }
}

/// The page (`html`) or its JSON; while the store cannot be read, a 503 that says why and since
/// when: a page that keeps refreshing itself, so a wallboard comes back on its own.
async fn fleet(html: bool, page: &Page) -> Response<Full<Bytes>> {
    let reading = page.fleet().await;
    let (status, body) = match reading.as_ref() {
        Ok(f) if html => return reply(StatusCode::OK, HTML, page::render(f)),
        Err(o) if html => {
            let body = page::outage(o, page.client.base(), jiff::Timestamp::now());
            return reply(StatusCode::SERVICE_UNAVAILABLE, HTML, body);
        }
        Ok(f) => (StatusCode::OK, serde_json::to_string(f)),
        Err(o) => (StatusCode::SERVICE_UNAVAILABLE, serde_json::to_string(o)),
    };
    match body {
        Ok(body) => reply(status, JSON, body),
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, TEXT, format!("{e}\n")),
    }
}

/// An outage as the contract test sees it.
#[cfg(test)]
pub(crate) fn outage_example() -> Outage {
    Outage {
        error:
            "The fleet status is unavailable: the store at http://prometheus:9090 did not answer"
                .into(),
        unavailable_since: jiff::Timestamp::UNIX_EPOCH,
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_lasts_from_the_first_failed_reading() {
        let now = jiff::Timestamp::from_second(100).unwrap();
        let failed = Err(outage_example());
        assert_eq!(
            outage_since(Some(&failed), now),
            jiff::Timestamp::UNIX_EPOCH
        );
        assert_eq!(outage_since(None, now), now);
        assert_eq!(outage_since(Some(&Ok(model::example())), now), now);
    }
}
