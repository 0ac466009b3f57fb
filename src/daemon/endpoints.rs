//! The agent's own HTTP endpoints on `agent.listen`: `/metrics` (the registry, to scrape beside
//! or instead of pushing), `/healthz` (liveness and the last push's status) and
//! `POST /-/reload`, served by hyper behind the shared [`Door`] (cap, accept backoff, idle
//! timeout) with its header read timeout.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::{Agent, ReloadError, ReloadReply};
use crate::listener::Door;

/// Per connection, the request head and any read-ahead live in this much buffer at most: our
/// requests are a line and a few headers (hyper's floor is 8 KiB).
const MAX_BUF: usize = 16 * 1024;

pub async fn serve(door: Door, agent: Arc<Agent>, reload: mpsc::Sender<ReloadReply>) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(door.limits().header_timeout)
        .max_buf_size(MAX_BUF);
    loop {
        let (sock, slot) = door.accept().await;
        let (agent, reload) = (agent.clone(), reload.clone());
        let service = service_fn(move |req| {
            let (agent, reload) = (agent.clone(), reload.clone());
            async move { Ok::<_, Infallible>(route(req, &agent, &reload).await) }
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
    agent: &Agent,
    reload: &mpsc::Sender<ReloadReply>,
) -> Response<Full<Bytes>> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            agent.metrics().encode(),
        ),
        (&Method::GET, "/healthz") => {
            let status = agent.push_status();
            let body = json!({
                "status": "ok",
                "agent": agent.cfg().agent.name,
                "runs_in_flight": agent.in_flight.lock().expect("in-flight lock").len(),
                "push": if agent.cfg().push.is_some() { serde_json::to_value(&status).unwrap_or_default() } else { json!(null) },
            });
            reply(StatusCode::OK, "application/json", body.to_string())
        }
        (&Method::POST, "/-/reload") => {
            let (tx, rx) = oneshot::channel();
            let outcome = match reload.send(tx).await {
                Ok(()) => rx.await.unwrap_or(Err(ReloadError::ShuttingDown)),
                Err(_) => Err(ReloadError::ShuttingDown),
            };
            match outcome {
                Ok(()) => reply(StatusCode::OK, "text/plain", "config reloaded\n"),
                Err(e) => reply(
                    StatusCode::BAD_REQUEST,
                    "text/plain",
                    format!("config reload refused: {e}\n"),
                ),
            }
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /metrics, /healthz, POST /-/reload\n",
        ),
    }
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
