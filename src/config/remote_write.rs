//! `remote_write:`: where and how often the agent writes its registry to a Prometheus
//! remote-write receiver (Prometheus, Mimir, Thanos Receive, VictoriaMetrics...), and how much
//! an outage may buffer.

use std::path::Path;
use std::time::Duration;

use super::auth;
use super::source::nonzero;
use super::{positive, raw, ConfigError, FieldPath, PushAuth, Source};

#[derive(Debug, Clone)]
pub struct RemoteWriteSettings {
    /// The receiver's write endpoint, e.g. `http://mimir:9009/api/v1/push`.
    pub url: String,
    /// The `job` label on every series (the `instance` label is the agent's name).
    pub job: String,
    /// How often the registry is sampled: one timestamp for every series, like a scrape.
    pub interval: Duration,
    /// One request's deadline.
    pub timeout: Duration,
    /// Samples an outage may buffer; beyond it the oldest are dropped and counted.
    pub max_samples: usize,
    /// Samples in one request.
    pub max_samples_per_send: usize,
    /// The longest wait between retries while the receiver fails (Prometheus's default, 5s:
    /// a receiver back from an outage is written to before the queue turns over).
    pub max_backoff: Duration,
    pub auth: Option<PushAuth>,
    /// Its `tls:` block and proxy.
    pub outbound: crate::tls::client::Outbound,
}

/// A whole queue of 10 million samples is about 300 MB compressed: past any agent's budget.
const MOST_SAMPLES: i64 = 10_000_000;

pub(super) fn load(
    src: &Source,
    at: &FieldPath,
    r: raw::RawRemoteWrite,
    base: &Path,
) -> Result<RemoteWriteSettings, ConfigError> {
    let url = auth::url(src, at, &r.url, "remote_write")?;
    let keys = auth::auth_keys!(r);
    let auth = auth::load(
        src,
        at,
        keys,
        base,
        "remote_write",
        (at.key("url"), r.url.referenced),
    )?;
    let job = auth::job(src, at, r.job)?;
    let outbound = super::tls::load_outbound(src, at, super::tls::outbound_keys!(r), base)?;
    let queue = r.queue.unwrap_or_default();
    let queue_at = at.key("queue");
    let max_samples = match &queue.max_samples {
        Some(v) => positive(src, &queue_at, "max_samples", v, MOST_SAMPLES)? as usize,
        None => 100_000,
    };
    let max_samples_per_send = match &queue.max_samples_per_send {
        Some(v) => positive(src, &queue_at, "max_samples_per_send", v, 100_000)? as usize,
        None => max_samples.min(2_000),
    };
    if max_samples_per_send > max_samples {
        let v = queue.max_samples_per_send.as_ref().map(|v| v.referenced);
        return Err(src.err(
            &queue_at.key("max_samples_per_send"),
            v.unwrap_or(r.url.referenced),
            format!("max_samples_per_send ({max_samples_per_send}) must not exceed max_samples ({max_samples})"),
        ));
    }
    Ok(RemoteWriteSettings {
        url,
        job,
        interval: nonzero(src, at, "interval", r.interval, Duration::from_secs(15))?,
        timeout: nonzero(src, at, "timeout", r.timeout, Duration::from_secs(10))?,
        max_samples,
        max_samples_per_send,
        max_backoff: nonzero(
            src,
            &queue_at,
            "max_backoff",
            queue.max_backoff,
            Duration::from_secs(5),
        )?,
        auth,
        outbound,
    })
}
