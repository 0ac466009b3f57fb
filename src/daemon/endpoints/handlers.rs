//! One function per endpoint, each answering its request from the part of the shared state it
//! reads; `route` only picks which.

use std::sync::Arc;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::super::admin::{self, ReloadError, ReloadReply};
use super::super::firing::Runs;
use super::super::state::{Maintenance, Shared};
use super::super::{feed, history, on_demand, status, status_page};
use crate::config::Config;

/// `POST /-/maintenance`'s body at most: a target name, a duration and a short reason.
const MAX_BODY: usize = 4096;

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
const ATOM: &str = "application/atom+xml; charset=utf-8";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

type Reply = Response<Full<Bytes>>;

/// The admin guard in front of every POST: the refusal to answer with, when it refuses.
pub(super) fn refusal(shared: &Shared, path: &str, headers: &HeaderMap) -> Option<Reply> {
    let cfg = shared.cfg();
    let token = cfg.agent.admin_token.as_ref();
    let refused = admin::authorize(shared.loopback_only(), token, headers).err()?;
    tracing::warn!(%path, reason = %refused, "admin request refused");
    let mut r = reply(StatusCode::UNAUTHORIZED, TEXT, format!("{refused}\n"));
    r.headers_mut()
        .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    Some(r)
}

/// `GET /`: the status page.
pub(super) fn status_page(shared: &Shared) -> Reply {
    let now = jiff::Timestamp::now();
    let head = status::head(shared, now);
    let incidents = shared.incidents(None);
    let page = status_page::render(&head, status::targets(shared, now), &incidents);
    let mut r = reply(StatusCode::OK, "text/html; charset=utf-8", page);
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /api/v1/status`: the status page's judging as JSON.
pub(super) fn status(shared: &Shared) -> Reply {
    let now = jiff::Timestamp::now();
    let head = status::head(shared, now);
    reply(
        StatusCode::OK,
        JSON,
        status::json(&head, status::targets(shared, now)),
    )
}

/// `GET /api/v1/incidents`: every target's incidents.
pub(super) fn incidents(shared: &Shared) -> Reply {
    let incidents = shared.incidents(None);
    let body = json!({
        "agent": shared.cfg().agent.name,
        "generated_at": jiff::Timestamp::now(),
        "incidents": incidents,
    });
    reply(StatusCode::OK, JSON, body.to_string())
}

/// `GET /api/v1/history?target=T&window=90d&metric=uptime`.
pub(super) fn history(shared: &Shared, query: Option<&str>) -> Reply {
    match history::json(shared, query, jiff::Timestamp::now()) {
        Ok(body) => reply(StatusCode::OK, JSON, body),
        Err(history::Refused(code, why)) => reply(
            StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
            TEXT,
            format!("{why}\n"),
        ),
    }
}

/// `GET /feed/<target>.atom`: one configured target's feed.
pub(super) fn target_feed(shared: &Shared, name: &str) -> Reply {
    if shared.cfg().target(name).is_none() {
        return reply(StatusCode::NOT_FOUND, TEXT, "no such target\n");
    }
    feed(shared, Some(name))
}

/// `GET /feed.atom` (every target's incidents) and `/feed/<target>.atom` (one's), as Atom.
pub(super) fn feed(shared: &Shared, target: Option<&str>) -> Reply {
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

/// `GET /badge/<target>.svg`: a target's state as a badge.
pub(super) fn badge(shared: &Shared, name: &str) -> Reply {
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

/// `GET /probe?target=T&probe=P`: runs the pair now and answers its series.
pub(super) async fn probe(runs: &Arc<Runs>, query: Option<&str>) -> Reply {
    match on_demand::probe(runs, query).await {
        Ok(body) => reply(StatusCode::OK, PROMETHEUS, body),
        Err(e) => reply(StatusCode::BAD_REQUEST, TEXT, format!("{e}\n")),
    }
}

/// `GET /metrics`: the registry. A scrape of a large registry gives way between collectors, as
/// a push does: on the daemon's one thread it must not hold back the arrival stamps of runs in
/// flight.
pub(super) async fn metrics(shared: &Shared) -> Reply {
    reply(
        StatusCode::OK,
        PROMETHEUS,
        shared.metrics().encode_yielding().await,
    )
}

/// `GET /healthz`: liveness, runs in flight and the last push's status.
pub(super) fn healthz(shared: &Shared) -> Reply {
    let status = shared.push().status();
    let body = json!({
        "status": "ok",
        "agent": shared.cfg().agent.name,
        "runs_in_flight": shared.in_flight(),
        "push": if shared.cfg().push.is_some() { serde_json::to_value(&status).unwrap_or_default() } else { json!(null) },
    });
    reply(StatusCode::OK, JSON, body.to_string())
}

/// `POST /-/reload`: asks the daemon, which owns reloading, and answers what it says.
pub(super) async fn reload(reload: &mpsc::Sender<ReloadReply>) -> Reply {
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

/// `POST /-/maintenance`: reads the announcement, at most [`MAX_BODY`] bytes, and announces it.
pub(super) async fn maintenance(shared: &Shared, body: Incoming) -> Reply {
    let body = match Limited::new(body, MAX_BODY).collect().await {
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

/// Opens (or ends) a target's announced maintenance window.
fn announce(cfg: &Config, maintenance: &Maintenance, body: &[u8]) -> Reply {
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

/// Any other method or path: what there is to ask.
pub(super) fn not_found() -> Reply {
    reply(
        StatusCode::NOT_FOUND,
        TEXT,
        "not found: try /, /api/v1/status, /api/v1/incidents, /api/v1/history?target=T&window=90d&metric=uptime, /feed.atom, /feed/<target>.atom, /badge/<target>.svg, /metrics, /healthz, /probe?target=T&probe=P, POST /-/reload, POST /-/maintenance\n",
    )
}

/// A response with its status, content type and body.
fn reply(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
