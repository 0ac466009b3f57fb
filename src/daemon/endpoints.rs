//! The agent's own HTTP endpoints on `agent.listen`: the status page `/`, `/api/v1/status`,
//! `/api/v1/incidents`, `/api/v1/history`, the Atom feeds `/feed.atom` and `/feed/<target>.atom`,
//! `/badge/<target>.svg`, `/metrics` (the registry, to scrape beside or instead of pushing),
//! `/healthz` (liveness and the last push's status), `/probe` (one pair now), and the mutating
//! `POST /-/reload` and `POST /-/maintenance` behind the admin guard; served by hyper behind the
//! shared [`Door`] (cap, accept backoff, idle timeout) with its header read timeout.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::admin::{self, ReloadError, ReloadReply};
use super::firing::Runs;
use super::state::{Maintenance, Shared};
use super::{feed, history, on_demand, status, status_page};
use crate::config::Config;
use crate::listener::Door;

/// `POST /-/maintenance`'s body at most: a target name, a duration and a short reason.
const MAX_BODY: usize = 4096;

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
const ATOM: &str = "application/atom+xml; charset=utf-8";

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

async fn route(
    req: Request<Incoming>,
    runs: &Arc<Runs>,
    reload: &mpsc::Sender<ReloadReply>,
) -> Response<Full<Bytes>> {
    let shared = runs.shared();
    let path = req.uri().path().to_string();
    if req.method() == Method::POST {
        let cfg = shared.cfg();
        let token = cfg.agent.admin_token.as_ref();
        if let Err(refused) = admin::authorize(shared.loopback_only(), token, req.headers()) {
            tracing::warn!(%path, reason = %refused, "admin request refused");
            let mut r = reply(StatusCode::UNAUTHORIZED, TEXT, format!("{refused}\n"));
            r.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    match (req.method(), path.as_str()) {
        (&Method::GET, "/") => {
            let now = jiff::Timestamp::now();
            let head = status::head(shared, now);
            let incidents = shared.incidents(None);
            let page = status_page::render(&head, status::targets(shared, now), &incidents);
            let mut r = reply(StatusCode::OK, "text/html; charset=utf-8", page);
            r.headers_mut()
                .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        (&Method::GET, "/api/v1/status") => {
            let now = jiff::Timestamp::now();
            let head = status::head(shared, now);
            reply(
                StatusCode::OK,
                JSON,
                status::json(&head, status::targets(shared, now)),
            )
        }
        (&Method::GET, "/api/v1/incidents") => {
            let incidents = shared.incidents(None);
            let body = json!({
                "agent": shared.cfg().agent.name,
                "generated_at": jiff::Timestamp::now(),
                "incidents": incidents,
            });
            reply(StatusCode::OK, JSON, body.to_string())
        }
        (&Method::GET, "/api/v1/history") => {
            match history::json(shared, req.uri().query(), jiff::Timestamp::now()) {
                Ok(body) => reply(StatusCode::OK, JSON, body),
                Err(history::Refused(code, why)) => reply(
                    StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
                    TEXT,
                    format!("{why}\n"),
                ),
            }
        }
        (&Method::GET, "/feed.atom") => atom(shared, None),
        (&Method::GET, p) if p.starts_with("/feed/") && p.ends_with(".atom") => {
            let name = &p["/feed/".len()..p.len() - ".atom".len()];
            if shared.cfg().target(name).is_none() {
                return reply(StatusCode::NOT_FOUND, TEXT, "no such target\n");
            }
            atom(shared, Some(name))
        }
        (&Method::GET, p) if p.starts_with("/badge/") && p.ends_with(".svg") => {
            let name = &p["/badge/".len()..p.len() - ".svg".len()];
            match status::target(shared, name, jiff::Timestamp::now()) {
                Some(t) => {
                    let mut r = reply(StatusCode::OK, "image/svg+xml", status_page::badge(&t));
                    r.headers_mut()
                        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                    r
                }
                None => reply(StatusCode::NOT_FOUND, TEXT, "no such target\n"),
            }
        }
        (&Method::GET, "/probe") => match on_demand::probe(runs, req.uri().query()).await {
            Ok(body) => reply(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", body),
            Err(e) => reply(StatusCode::BAD_REQUEST, TEXT, format!("{e}\n")),
        },
        // A scrape of a large registry gives way between collectors, as a push does: on the
        // daemon's one thread it must not hold back the arrival stamps of runs in flight.
        (&Method::GET, "/metrics") => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            shared.metrics().encode_yielding().await,
        ),
        (&Method::GET, "/healthz") => {
            let status = shared.push().status();
            let body = json!({
                "status": "ok",
                "agent": shared.cfg().agent.name,
                "runs_in_flight": shared.in_flight(),
                "push": if shared.cfg().push.is_some() { serde_json::to_value(&status).unwrap_or_default() } else { json!(null) },
            });
            reply(StatusCode::OK, JSON, body.to_string())
        }
        (&Method::POST, "/-/reload") => {
            let (tx, rx) = oneshot::channel();
            let outcome = match reload.send(tx).await {
                Ok(()) => rx.await.unwrap_or(Err(ReloadError::ShuttingDown)),
                Err(_) => Err(ReloadError::ShuttingDown),
            };
            match outcome {
                Ok(()) => reply(StatusCode::OK, TEXT, "config reloaded\n"),
                Err(e) => reply(
                    StatusCode::BAD_REQUEST,
                    TEXT,
                    format!("config reload refused: {e}\n"),
                ),
            }
        }
        (&Method::POST, "/-/maintenance") => {
            let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => {
                    return reply(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        TEXT,
                        format!("the body is limited to {MAX_BODY} bytes\n"),
                    )
                }
            };
            announce(&shared.cfg(), shared.maintenance(), &body)
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            TEXT,
            "not found: try /, /api/v1/status, /api/v1/incidents, /api/v1/history?target=T&window=90d&metric=uptime, /feed.atom, /feed/<target>.atom, /badge/<target>.svg, /metrics, /healthz, /probe?target=T&probe=P, POST /-/reload, POST /-/maintenance\n",
        ),
    }
}

/// An Atom feed of the incidents, every target's or one's.
fn atom(shared: &Shared, target: Option<&str>) -> Response<Full<Bytes>> {
    let incidents = shared.incidents(target);
    let body = feed::atom(
        &shared.cfg().agent.name,
        target,
        &incidents,
        jiff::Timestamp::now(),
    );
    let mut r = reply(StatusCode::OK, ATOM, body);
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// Opens (or ends) a target's announced maintenance window.
fn announce(cfg: &Config, maintenance: &Maintenance, body: &[u8]) -> Response<Full<Bytes>> {
    let known: Vec<&str> = cfg.targets.iter().map(|t| t.name.as_str()).collect();
    let a = match admin::announcement(body, &known) {
        Ok(a) => a,
        Err(e) => return reply(StatusCode::BAD_REQUEST, TEXT, format!("{e}\n")),
    };
    let window = maintenance.announce(
        &a.target,
        a.duration,
        a.reason.clone(),
        jiff::Timestamp::now(),
    );
    tracing::info!(target_name = %a.target, duration = %crate::util::human_duration(a.duration), reason = a.reason.as_deref().unwrap_or(""), "maintenance window announced");
    let body = json!({"target": a.target, "maintenance": window});
    reply(StatusCode::OK, JSON, body.to_string())
}

fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
