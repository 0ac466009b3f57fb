//! `otlp:`: where the agent sends OpenTelemetry metrics (and, with `traces: true`, one client
//! span per run) over OTLP/HTTP, how often, with which temporality, and how much an outage may
//! buffer.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::auth;
use super::duration::Dur;
use super::source::nonzero;
use super::{positive, ConfigError, FieldPath, PushAuth, Source};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOtlp {
    pub endpoint: Spanned<String>,
    pub traces: Option<bool>,
    pub temporality: Option<Temporality>,
    pub interval: Option<Spanned<Dur>>,
    pub timeout: Option<Spanned<Dur>>,
    pub success_sample_ratio: Option<Spanned<f64>>,
    pub queue: Option<RawOtlpQueue>,
    pub username: Option<Spanned<String>>,
    pub password_env: Option<Spanned<String>>,
    pub password_file: Option<Spanned<String>>,
    pub bearer_token_env: Option<Spanned<String>>,
    pub bearer_token_file: Option<Spanned<String>>,
    pub tls: Option<Spanned<super::tls::RawTls>>,
    pub proxy_url: Option<Spanned<String>>,
    pub no_proxy: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOtlpQueue {
    pub max_points: Option<Spanned<i64>>,
    pub max_spans: Option<Spanned<i64>>,
    pub max_backoff: Option<Spanned<Dur>>,
}

/// How a histogram's or counter's points relate to the ones before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Temporality {
    /// Every export carries the totals since the agent started (Prometheus-style backends).
    Cumulative,
    /// Every export carries what happened since the previous one (Datadog, Dynatrace).
    Delta,
}

#[derive(Debug, Clone)]
pub struct OtlpSettings {
    /// The collector's base URL, e.g. `http://collector:4318`; metrics go to `/v1/metrics`,
    /// spans to `/v1/traces`.
    pub endpoint: String,
    /// One client span per run.
    pub traces: bool,
    pub temporality: Temporality,
    /// How often the metrics are exported.
    pub interval: Duration,
    /// One request's deadline.
    pub timeout: Duration,
    /// The share of successful runs whose span is sent; every failed run's span is.
    pub success_sample_ratio: f64,
    /// Data points an outage may buffer; beyond it the oldest exports are dropped and counted.
    pub max_points: usize,
    /// Spans an outage may buffer, likewise.
    pub max_spans: usize,
    /// The longest wait between retries while the collector fails.
    pub max_backoff: Duration,
    pub auth: Option<PushAuth>,
    /// Its `tls:` block and proxy.
    pub outbound: crate::tls::client::Outbound,
}

impl OtlpSettings {
    pub fn metrics_url(&self) -> String {
        format!("{}/v1/metrics", self.endpoint)
    }

    pub fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.endpoint)
    }
}

pub(super) fn load(
    src: &Source,
    at: &FieldPath,
    r: RawOtlp,
    base: &Path,
) -> Result<OtlpSettings, ConfigError> {
    let endpoint = r.endpoint.value.trim().trim_end_matches('/').to_string();
    if !auth::plain_http_url(&endpoint) {
        // Not echoed: a URL with credentials in it holds a secret.
        return Err(src.err(
            &at.key("endpoint"),
            r.endpoint.referenced,
            "endpoint must be an http(s) URL without credentials, e.g. http://collector:4318",
        ));
    }
    let keys = auth::auth_keys!(r);
    let auth = auth::load(
        src,
        at,
        keys,
        base,
        "otlp",
        (at.key("endpoint"), r.endpoint.referenced),
    )?;
    let success_sample_ratio = match r.success_sample_ratio {
        Some(s) if !(0.0..=1.0).contains(&s.value) => {
            return Err(src.err(
                &at.key("success_sample_ratio"),
                s.referenced,
                format!(
                    "success_sample_ratio must be between 0 and 1, found {}",
                    s.value
                ),
            ))
        }
        Some(s) => s.value,
        None => 1.0,
    };
    let outbound = super::tls::load_outbound(src, at, super::tls::outbound_keys!(r), base)?;
    let queue = r.queue.unwrap_or_default();
    let queue_at = at.key("queue");
    let max_points = match &queue.max_points {
        Some(v) => positive(src, &queue_at, "max_points", v, 10_000_000)? as usize,
        None => 100_000,
    };
    let max_spans = match &queue.max_spans {
        Some(v) => positive(src, &queue_at, "max_spans", v, 1_000_000)? as usize,
        None => 10_000,
    };
    Ok(OtlpSettings {
        endpoint,
        traces: r.traces.unwrap_or(false),
        temporality: r.temporality.unwrap_or(Temporality::Cumulative),
        interval: nonzero(src, at, "interval", r.interval, Duration::from_secs(15))?,
        timeout: nonzero(src, at, "timeout", r.timeout, Duration::from_secs(10))?,
        success_sample_ratio,
        max_points,
        max_spans,
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
