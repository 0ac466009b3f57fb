//! Building one request: the flavor's body with the envelope's fields, headers, a fresh request
//! id, and cache busting chosen by the target's server kind.

use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Value};

use super::flavor::{Ask, Signer};
use crate::cloud::entra::Entra;
use crate::config::{AwsAuth, CacheBust, CacheBustValue, Probe, Target};

/// A fresh random id in UUID v4 form.
pub(crate) fn request_id() -> String {
    let v = fastrand::u128(..);
    let v = (v & !(0xF << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let h = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A fresh W3C trace context for one request: (`traceparent` value, trace id). Sampled, so
/// the serving stack records the probe's spans. The parent id is the trace id's low half: the
/// record keeps the trace id, and so names the client span (`otlp.traces`) the server's spans
/// hang under.
pub(crate) fn trace_context() -> (String, String) {
    let (high, low) = (fastrand::u64(..), fastrand::u64(1..));
    let trace_id = format!("{high:016x}{low:016x}");
    (format!("00-{trace_id}-{low:016x}-01"), trace_id)
}

/// The request for one run: URL, headers and JSON body, built from the probe and target.
pub(crate) struct Request {
    pub url: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub request_id: String,
    pub trace_id: String,
    /// The credential a cloud hands out that the request still needs ([`Request::authorize`]),
    /// with the target's name for the log.
    auth: Option<(CloudAuth, String)>,
}

/// A credential fetched (and refreshed) while the agent runs, rather than a key read at load.
#[derive(Clone)]
enum CloudAuth {
    /// AWS SigV4 with the target's credentials: the signature covers the request id and trace
    /// too, so every copy ([`Request::again`]) signs anew.
    Aws(Signer, AwsAuth),
    /// An Entra ID bearer token.
    Entra(Arc<Entra>),
}

pub(crate) fn build_request(probe: &Probe, target: &Target) -> Request {
    let nonce = match probe.cache_bust {
        CacheBust::Prefix => Some(format!("[canary {:016x}]", fastrand::u64(..))),
        _ => None,
    };
    build(probe, target, nonce.as_deref(), probe.cache_bust)
}

/// The request of a cache check's cold run: `prefix` first in the prompt, and no cache-busting
/// field, so the same request again ([`Request::again`]) may be served from the prefix cache.
/// `Cache-Control: no-cache` still keeps an HTTP cache in front from answering for the model.
pub(crate) fn build_with_prefix(probe: &Probe, target: &Target, prefix: &str) -> Request {
    build(probe, target, Some(prefix), CacheBust::Prefix)
}

fn build(probe: &Probe, target: &Target, nonce: Option<&str>, bust: CacheBust) -> Request {
    let flavor = target.api.flavor();
    let ask = Ask {
        messages: &probe.prompt.messages,
        max_tokens: probe.max_tokens,
        temperature: probe.temperature,
        tools: probe.tools.as_deref(),
    };
    let mut body = flavor.body(&ask, nonce);
    if let (Some(prefix), true) = (nonce, probe.cache_check.is_some()) {
        flavor.mark_cacheable(&mut body, prefix);
    }
    if flavor.model_in_body() {
        body.insert("model".into(), json!(target.model));
    }
    if let Some(p) = target.priority.and_then(|p| p.sends()) {
        body.insert("priority".into(), json!(p));
    }
    if bust == CacheBust::Auto {
        if let Some((field, value)) = target.server.cache_bust_field(target.api) {
            let value = match value {
                CacheBustValue::Fresh => json!(format!("{:016x}", fastrand::u64(..))),
                CacheBustValue::False => json!(false),
            };
            body.insert(field.into(), value);
        }
    }
    let mut headers = HeaderMap::new();
    put(&mut headers, "content-type", "application/json");
    put(&mut headers, "accept", flavor.framing().accept());
    if bust != CacheBust::Off {
        put(&mut headers, "cache-control", "no-cache");
    }
    headers.extend(target.headers.clone());
    let mut url = target.endpoint(&flavor.path(&target.model));
    if let Some(v) = &target.api_version {
        url.push_str("?api-version=");
        url.push_str(v);
    }
    let aws = target
        .aws
        .clone()
        .and_then(|aws| Some(CloudAuth::Aws(flavor.aws_signer()?, aws)));
    let entra = target.entra.clone().map(CloudAuth::Entra);
    Request {
        url,
        headers,
        body: serde_json::to_vec(&Value::Object(body)).expect("a JSON map always serializes"),
        request_id: String::new(),
        trace_id: String::new(),
        auth: aws.or(entra).map(|a| (a, target.name.clone())),
    }
    .again()
}

impl Request {
    /// The same request (URL, headers, body byte for byte) with its own request id and trace.
    pub(crate) fn again(&self) -> Request {
        let mut headers = self.headers.clone();
        // After the configured headers: every request's id and trace must be its own.
        let request_id = request_id();
        put(&mut headers, "x-request-id", &request_id);
        let (traceparent, trace_id) = trace_context();
        put(&mut headers, "traceparent", &traceparent);
        Request {
            url: self.url.clone(),
            headers,
            body: self.body.clone(),
            request_id,
            trace_id,
            auth: self.auth.clone(),
        }
    }

    /// Adds what a cloud's credential says, fetched (or refreshed) now, before the run's clock
    /// starts: the SigV4 signature, last, over every header and the body; or the Entra ID
    /// token. `Err` (why, naming no secret) when there is none to be had: the request is not
    /// sent, and the run is an `auth` error.
    pub(crate) async fn authorize(&mut self, client: &reqwest::Client) -> Result<(), String> {
        let Some((auth, target)) = &self.auth else {
            return Ok(());
        };
        let done = match auth {
            CloudAuth::Aws(sign, aws) => match aws.credentials.keys().await {
                Ok(keys) => {
                    let now = std::time::SystemTime::now();
                    sign(
                        &mut self.headers,
                        &self.url,
                        &self.body,
                        &aws.region,
                        &keys,
                        now,
                    )
                    .map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            },
            CloudAuth::Entra(entra) => match entra.token(client).await {
                Ok(token) => HeaderValue::from_str(&format!("Bearer {}", token.expose()))
                    .map(|mut v| {
                        v.set_sensitive(true);
                        self.headers.insert(reqwest::header::AUTHORIZATION, v);
                    })
                    .map_err(|_| "the Entra ID token is not a valid header value".to_string()),
                Err(e) => Err(e.to_string()),
            },
        };
        if let Err(e) = &done {
            tracing::warn!(target = %target, error = %e, "request not sent: no credential");
        }
        done
    }
}

fn put(headers: &mut HeaderMap, k: &str, v: &str) {
    if let (Ok(k), Ok(v)) = (
        HeaderName::from_bytes(k.as_bytes()),
        HeaderValue::from_str(v),
    ) {
        headers.insert(k, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_uuid_v4_and_fresh() {
        let a = request_id();
        let b = request_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
    }

    #[test]
    fn traceparent_is_w3c_and_sampled() {
        let (tp, id) = trace_context();
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!((parts[0], parts[1], parts[3]), ("00", id.as_str(), "01"));
        assert_eq!((parts[1].len(), parts[2].len()), (32, 16));
        assert_ne!(parts[1], "0".repeat(32));
        assert_ne!(trace_context().1, id);
        // The parent id is the trace id's low half (the client span's id).
        assert_eq!(parts[2], &parts[1][16..]);
    }
}
