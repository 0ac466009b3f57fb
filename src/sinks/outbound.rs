//! One POST of an encoded batch to a receiver (remote-write, OTLP), and what a failure means:
//! try again later, or drop it. Shared by every sender that queues.

use std::time::Duration;

use prost::bytes::Bytes;

use crate::config::PushAuth;

/// Where and how a batch goes.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    /// What the logs call this sender (`remote write`, `OTLP metrics`).
    pub what: &'static str,
    pub url: String,
    /// Content type, encoding and protocol headers.
    pub headers: &'static [(&'static str, &'static str)],
    pub auth: Option<PushAuth>,
    /// One request's deadline.
    pub timeout: Duration,
    /// The longest wait between retries while the receiver fails.
    pub max_backoff: Duration,
}

/// Why a request did not land.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// The receiver is unreachable, overloaded (429) or failing (5xx): send it again later.
    #[error("{what} to {url}: {reason}")]
    Retry {
        what: &'static str,
        url: String,
        reason: String,
    },
    /// The receiver refused the data (4xx): resending the same bytes cannot succeed.
    #[error("{what} to {url} refused: {reason}")]
    Rejected {
        what: &'static str,
        url: String,
        reason: String,
    },
}

/// One POST of a batch.
pub(crate) async fn post(
    client: &reqwest::Client,
    route: &Route,
    body: Bytes,
) -> Result<(), SendError> {
    let (what, url) = (route.what, &route.url);
    let mut req = client.post(url).timeout(route.timeout).body(body);
    for (k, v) in route.headers {
        req = req.header(*k, *v);
    }
    let resp = super::push::authorize(req, route.auth.as_ref())
        .send()
        .await
        .map_err(|e| SendError::Retry {
            what,
            url: url.clone(),
            reason: crate::util::error_chain(&e),
        })?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let body = resp.text().await.unwrap_or_default();
    let body: String = body.chars().filter(|c| !c.is_control()).take(300).collect();
    let reason = format!("HTTP {}: {}", status.as_u16(), body.trim());
    let url = url.clone();
    if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        Err(SendError::Retry { what, url, reason })
    } else {
        Err(SendError::Rejected { what, url, reason })
    }
}
