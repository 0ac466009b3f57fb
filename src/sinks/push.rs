//! Pushgateway client: `PUT` the whole registry to `<url>/metrics/job/<job>/instance/<agent>`
//! (so retired series disappear), grouping values in `@base64` form where needed, with
//! exponential backoff and jitter between attempts. Async; never called from a probe.

use std::time::Duration;

use base64::Engine;

use super::outbound::{authorize, OutputClient};
use crate::config::Push;

#[derive(Debug, thiserror::Error)]
pub(crate) enum PushError {
    #[error("push to {url}: {reason}")]
    Failed { url: String, reason: String },
}

/// One path segment pair: `job/llm_canary`, or `job@base64/...` when the value holds a `/` or
/// is empty (the Pushgateway's encoding).
fn segment(label: &str, value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.~:".contains(c));
    if plain {
        format!("{label}/{value}")
    } else if value.is_empty() {
        format!("{label}@base64/=")
    } else {
        format!(
            "{label}@base64/{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value)
        )
    }
}

pub(crate) fn group_url(push: &Push, instance: &str) -> String {
    format!(
        "{}/metrics/{}/{}",
        push.url,
        segment("job", &push.job),
        segment("instance", instance)
    )
}

async fn send(req: reqwest::RequestBuilder, url: &str) -> Result<(), PushError> {
    let fail = |reason: String| PushError::Failed {
        url: url.to_string(),
        reason,
    };
    let resp = req
        .send()
        .await
        .map_err(|e| fail(crate::util::error_chain(&e)))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let body = resp.text().await.unwrap_or_default();
    let body: String = body.chars().filter(|c| !c.is_control()).take(300).collect();
    Err(fail(format!("HTTP {}: {}", status.as_u16(), body.trim())))
}

/// The push client as `push:` says (its `tls:` block and proxy).
fn client(client: &OutputClient, push: &Push, url: &str) -> Result<reqwest::Client, PushError> {
    client.get(&push.outbound).map_err(|e| PushError::Failed {
        url: url.to_string(),
        reason: e.to_string(),
    })
}

/// One PUT of the encoded registry.
pub(crate) async fn put(
    client: &OutputClient,
    push: &Push,
    instance: &str,
    body: Vec<u8>,
) -> Result<(), PushError> {
    let url = group_url(push, instance);
    let req = self::client(client, push, &url)?
        .put(&url)
        .timeout(push.timeout)
        .header(reqwest::header::CONTENT_TYPE, "text/plain; version=0.0.4")
        .body(body);
    send(authorize(req, push.auth.as_ref()), &url).await
}

/// Deletes this agent's group (on shutdown, when `delete_on_shutdown`).
pub(crate) async fn delete(
    client: &OutputClient,
    push: &Push,
    instance: &str,
) -> Result<(), PushError> {
    let url = group_url(push, instance);
    send(
        authorize(
            self::client(client, push, &url)?
                .delete(&url)
                .timeout(push.timeout),
            push.auth.as_ref(),
        ),
        &url,
    )
    .await
}

/// The wait before retry number `attempt` (0-based): 1s, 2s, 4s... up to `max`, with jitter
/// drawing it from the upper half so a fleet of agents does not retry in step.
pub(crate) fn backoff(attempt: u32, max: Duration) -> Duration {
    let full = Duration::from_secs(1)
        .saturating_mul(1 << attempt.min(16))
        .min(max);
    full / 2 + full.mul_f64(fastrand::f64() / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(job: &str) -> Push {
        Push {
            url: "http://gw:9091".into(),
            job: job.into(),
            min_interval: Duration::from_secs(5),
            delete_on_shutdown: false,
            timeout: Duration::from_secs(1),
            auth: None,
            outbound: Default::default(),
        }
    }

    #[test]
    fn grouping_path_encodes_where_needed() {
        assert_eq!(
            group_url(&push("llm_canary"), "canary-eu-1"),
            "http://gw:9091/metrics/job/llm_canary/instance/canary-eu-1"
        );
        assert_eq!(
            group_url(&push("team/llm"), "a"),
            "http://gw:9091/metrics/job@base64/dGVhbS9sbG0/instance/a"
        );
        assert_eq!(
            group_url(&push("j"), ""),
            "http://gw:9091/metrics/job/j/instance@base64/="
        );
    }

    #[test]
    fn backoff_grows_with_jitter_and_a_cap() {
        for attempt in 0..20 {
            let d = backoff(attempt, Duration::from_secs(60));
            let full = Duration::from_secs((1u64 << attempt.min(16)).min(60));
            assert!(d >= full / 2 && d <= full, "{attempt}: {d:?}");
        }
    }
}
