//! One probe run against one target: the envelope every API flavor shares — request id, cache
//! busting, layered deadlines (connect, first token, stall, total), byte and token caps, the
//! transport outcome — around a flavor that only knows its path, body and chunk shape.
//! A run returns a [`ProbeResult`]; it never touches metrics or output.

pub mod openai_chat;
pub mod openai_completions;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};
use tokio::time::timeout_at;

use crate::checks;
use crate::config::{Api, CacheBust, Probe, ServerKind, Target};
use crate::outcome::Outcome;
use crate::result::{ProbeResult, TokensSource};
use crate::stream::{SseDecoder, SseError};
use crate::timeline::Timeline;

/// What one chunk (or a whole non-streamed answer) carried, as a flavor reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta {
    /// Generated text the user sees (content and tool-call text).
    pub text: String,
    pub reasoning_chars: usize,
    pub finish_reason: Option<String>,
}

impl Delta {
    /// Text, reasoning or a tool call: a role-only or empty chunk is not a token.
    pub fn is_generated(&self) -> bool {
        !self.text.is_empty() || self.reasoning_chars > 0
    }
}

fn flavor_path(api: Api) -> &'static str {
    match api {
        Api::OpenaiChat => openai_chat::PATH,
        Api::OpenaiCompletions => openai_completions::PATH,
    }
}

fn flavor_body(api: Api, probe: &Probe, nonce: Option<&str>) -> Map<String, Value> {
    match api {
        Api::OpenaiChat => openai_chat::body(&probe.prompt, nonce),
        Api::OpenaiCompletions => openai_completions::body(&probe.prompt, nonce),
    }
}

fn flavor_delta(api: Api, choice: &Value) -> Delta {
    match api {
        Api::OpenaiChat => openai_chat::delta(choice),
        Api::OpenaiCompletions => openai_completions::delta(choice),
    }
}

/// Hard limits on what a server may send, so a hostile one cannot exhaust the agent.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub max_line: usize,
    pub max_body: usize,
    pub max_tokens: u64,
}

impl Caps {
    /// Generous for an honest server (about 1 KiB of stream per token), small enough to keep a
    /// daemon inside its memory budget.
    pub fn for_probe(probe: &Probe) -> Caps {
        let t = u64::from(probe.max_tokens);
        Caps {
            max_line: 1 << 20,
            max_body: (1usize << 20)
                .saturating_add((probe.max_tokens as usize).saturating_mul(2048)),
            max_tokens: t.saturating_mul(2).saturating_add(16),
        }
    }
}

/// A fresh random id in UUID v4 form.
pub fn request_id() -> String {
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

/// The request for one run: URL, headers and JSON body, built from the probe and target.
pub struct Request {
    pub url: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub request_id: String,
}

pub fn build_request(probe: &Probe, target: &Target) -> Request {
    let request_id = request_id();
    let nonce = match probe.cache_bust {
        CacheBust::Prefix => Some(format!("[canary {:016x}]", fastrand::u64(..))),
        _ => None,
    };
    let mut body = flavor_body(target.api, probe, nonce.as_deref());
    body.insert("model".into(), json!(target.model));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    body.insert("max_tokens".into(), json!(probe.max_tokens));
    if let Some(t) = probe.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = target.priority {
        body.insert("priority".into(), json!(p));
    }
    if probe.cache_bust == CacheBust::Auto {
        match target.server {
            ServerKind::Vllm => {
                body.insert(
                    "cache_salt".into(),
                    json!(format!("{:016x}", fastrand::u64(..))),
                );
            }
            ServerKind::LlamaCpp => {
                body.insert("cache_prompt".into(), json!(false));
            }
            _ => {}
        }
    }
    let mut headers = HeaderMap::new();
    let mut put = |k: &str, v: &str| {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            headers.insert(k, v);
        }
    };
    put("content-type", "application/json");
    put("accept", "text/event-stream");
    if probe.cache_bust != CacheBust::Off {
        put("cache-control", "no-cache");
    }
    for (k, v) in &target.headers {
        put(k, v);
    }
    // After the configured headers: every request's id must be its own.
    put("x-request-id", &request_id);
    if let Some(key) = &target.api_key {
        if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", key.expose())) {
            v.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, v);
        }
    }
    Request {
        url: format!("{}{}", target.base_url, flavor_path(target.api)),
        headers,
        body: serde_json::to_vec(&Value::Object(body)).expect("a JSON map always serializes"),
        request_id,
    }
}

/// HTTP clients, one per connect timeout. Connections are not pooled: every run opens its own,
/// so each measurement includes the same connect work, as blackbox_exporter's do.
#[derive(Default)]
pub struct Clients(Mutex<HashMap<Duration, reqwest::Client>>);

impl Clients {
    pub fn get(&self, connect: Duration) -> reqwest::Client {
        let mut map = self.0.lock().expect("the client map is never poisoned");
        map.entry(connect)
            .or_insert_with(|| {
                reqwest::Client::builder()
                    .connect_timeout(connect)
                    .pool_max_idle_per_host(0)
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!("llm-canary/", env!("CARGO_PKG_VERSION")))
                    .tcp_nodelay(true)
                    .build()
                    .expect("a client with static settings builds")
            })
            .clone()
    }
}

/// State of one run while its response is read.
struct Run<'a> {
    target: &'a Target,
    caps: Caps,
    timeline: Timeline,
    text: String,
    chunks: usize,
    usage_tokens: Option<u64>,
    finish_reason: Option<String>,
    server_timings: Option<Value>,
    done: bool,
    last_event: Option<Instant>,
}

/// Why reading stopped early.
struct Failure {
    outcome: Outcome,
    error: String,
}

fn fail(outcome: Outcome, error: impl Into<String>) -> Failure {
    Failure {
        outcome,
        error: error.into(),
    }
}

fn secs(d: Duration) -> String {
    crate::report::human_duration(d)
}

impl Run<'_> {
    /// Reads one parsed event: usage, timings, an error object, or a choice.
    fn event(&mut self, data: &str, at: Instant) -> Result<(), Failure> {
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let v: Value = serde_json::from_str(data).map_err(|_| {
            fail(
                Outcome::MalformedStream,
                format!(
                    "event is not JSON: {:?}",
                    crate::stream::snippet(data.as_bytes())
                ),
            )
        })?;
        if !v.is_object() {
            return Err(fail(Outcome::MalformedStream, "event is not a JSON object"));
        }
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let msg = err["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            return Err(fail(
                Outcome::StreamError,
                format!("error in stream: {}", clip(&msg)),
            ));
        }
        self.last_event = Some(at);
        if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
            self.usage_tokens = Some(n);
        }
        if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
            self.server_timings = Some(t.clone());
        }
        if let Some(choice) = v["choices"].get(0) {
            let d = flavor_delta(self.target.api, choice);
            if d.is_generated() {
                self.timeline.content.push(at);
                self.chunks += 1;
                self.text.push_str(&d.text);
            }
            if d.finish_reason.is_some() {
                self.finish_reason = d.finish_reason;
            }
        }
        let tokens = self.usage_tokens.unwrap_or(0).max(self.chunks as u64);
        if tokens > self.caps.max_tokens {
            return Err(fail(
                Outcome::Oversized,
                format!(
                    "more than {} output tokens (max_tokens ignored?)",
                    self.caps.max_tokens
                ),
            ));
        }
        if self.text.len() > self.caps.max_body {
            return Err(fail(
                Outcome::Oversized,
                format!("output over {} bytes", self.caps.max_body),
            ));
        }
        Ok(())
    }
}

fn clip(s: &str) -> String {
    let mut out: String = s.chars().filter(|c| !c.is_control()).take(200).collect();
    if s.chars().count() > 200 {
        out.push('…');
    }
    out
}

/// Runs `probe` once against `target`.
pub async fn run(
    client: &reqwest::Client,
    probe: &Probe,
    target: &Target,
    show_output: bool,
) -> ProbeResult {
    let req = build_request(probe, target);
    let caps = Caps::for_probe(probe);
    let started_at = jiff::Timestamp::now();
    let start = Instant::now();
    let mut run = Run {
        target,
        caps,
        timeline: Timeline::new(start),
        text: String::new(),
        chunks: 0,
        usage_tokens: None,
        finish_reason: None,
        server_timings: None,
        done: false,
        last_event: None,
    };
    let mut http_status = None;
    let mut bytes_read = 0usize;
    let failure = exchange(
        client,
        probe,
        req.url.clone(),
        req.headers,
        req.body,
        &mut run,
        &mut http_status,
        &mut bytes_read,
    )
    .await;
    let end = Instant::now();
    if run.timeline.end.is_none() {
        run.timeline.end = Some(end);
    }

    let (output_tokens, tokens_source) = match (run.usage_tokens, run.chunks) {
        (Some(n), _) => (Some(n), Some(TokensSource::Usage)),
        (None, 0) if failure.is_some() => (None, None),
        (None, c) => (Some(c as u64), Some(TokensSource::Chunks)),
    };
    let figures = run.timeline.figures(output_tokens);
    let (outcome, failed_checks, error, output_chars, repetition) = match failure {
        Some(f) => (f.outcome, vec![f.outcome], Some(f.error), None, None),
        None => {
            let v = checks::judge(&probe.checks, &run.text, run.finish_reason.as_deref());
            let outcome = Outcome::first_content_failure(&v.failed);
            (outcome, v.failed, None, Some(v.output_chars), v.repetition)
        }
    };
    let error = error.map(|e| match &target.api_key {
        Some(k) => e.replace(k.expose(), "***"),
        None => e,
    });
    ProbeResult {
        probe: probe.name.clone(),
        target: target.name.clone(),
        model: target.model.clone(),
        request_id: req.request_id,
        started_at,
        outcome,
        success: outcome == Outcome::Ok,
        failed_checks,
        http_status,
        figures,
        output_tokens,
        tokens_source,
        finish_reason: run.finish_reason,
        output_chars,
        repetition_score: repetition
            .as_ref()
            .map(|r| (r.score * 1000.0).round() / 1000.0),
        warmup: false,
        error,
        server_timings: run.server_timings,
        content_chunks: run.chunks,
        response_bytes: bytes_read,
        repetition,
        output: show_output.then_some(run.text),
        timeline: Some(run.timeline),
    }
}

/// Sends the request and reads the response under the probe's layered deadlines. Returns the
/// transport failure, if any; everything observed is left in `run`.
#[allow(clippy::too_many_arguments)]
async fn exchange(
    client: &reqwest::Client,
    probe: &Probe,
    url: String,
    headers: HeaderMap,
    body: Vec<u8>,
    run: &mut Run<'_>,
    http_status: &mut Option<u16>,
    bytes_read: &mut usize,
) -> Option<Failure> {
    let t = probe.timeouts;
    let start = run.timeline.start;
    let total_deadline = start + t.total;
    let ttft_deadline = (start + t.ttft).min(total_deadline);
    let late = |now: Instant, run: &Run| -> Failure {
        if now >= total_deadline {
            fail(
                Outcome::TimeoutTotal,
                format!(
                    "the response took longer than {} (timeouts.total)",
                    secs(t.total)
                ),
            )
        } else if run.timeline.content.is_empty() {
            fail(
                Outcome::TimeoutTtft,
                format!(
                    "no generated content within {} (timeouts.ttft)",
                    secs(t.ttft)
                ),
            )
        } else {
            fail(
                Outcome::Stall,
                format!(
                    "no chunk for {} after the first token (timeouts.stall)",
                    secs(t.stall)
                ),
            )
        }
    };

    let send = client.post(&url).headers(headers).body(body).send();
    let mut resp = match timeout_at(ttft_deadline.into(), send).await {
        Err(_) => {
            return Some(if t.ttft >= t.total {
                fail(
                    Outcome::TimeoutTotal,
                    format!(
                        "no response headers within {} (timeouts.total)",
                        secs(t.total)
                    ),
                )
            } else {
                fail(
                    Outcome::TimeoutTtft,
                    format!(
                        "no response headers within {} (timeouts.ttft)",
                        secs(t.ttft)
                    ),
                )
            });
        }
        Ok(Err(e)) if e.is_connect() => {
            return Some(fail(
                Outcome::ConnectError,
                format!("connect: {}", error_chain(&e)),
            ))
        }
        Ok(Err(e)) => {
            return Some(fail(
                Outcome::StreamInterrupted,
                format!("before response headers: {}", error_chain(&e)),
            ))
        }
        Ok(Ok(r)) => r,
    };
    run.timeline.headers = Some(Instant::now());
    let status = resp.status();
    *http_status = Some(status.as_u16());
    let is_json = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));

    if !status.is_success() {
        // Read a little of the body for the message, within the deadline; never more.
        let mut snippet = Vec::new();
        while snippet.len() < 4096 {
            match timeout_at(ttft_deadline.into(), resp.chunk()).await {
                Ok(Ok(Some(b))) => {
                    snippet.extend_from_slice(&b[..b.len().min(4096 - snippet.len())])
                }
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&snippet);
        let msg = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| {
                v["error"]["message"]
                    .as_str()
                    .or(v["message"].as_str())
                    .or(v["error"].as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| text.trim().to_string());
        let reason = status.canonical_reason().unwrap_or("");
        let error = if msg.is_empty() {
            format!("HTTP {} {reason}", status.as_u16())
        } else {
            format!("HTTP {} {reason}: {}", status.as_u16(), clip(&msg))
        };
        return Some(fail(Outcome::HttpError, error));
    }

    let mut decoder = SseDecoder::new(run.caps.max_line, run.caps.max_body);
    let mut events = Vec::new();
    let mut whole = Vec::new();
    loop {
        let deadline = match run.last_event.filter(|_| !run.timeline.content.is_empty()) {
            Some(last) => (last + t.stall).min(total_deadline),
            None => ttft_deadline,
        };
        let chunk = match timeout_at(deadline.into(), resp.chunk()).await {
            Err(_) => return Some(late(Instant::now(), run)),
            Ok(Err(e)) => {
                run.timeline.end = Some(Instant::now());
                return Some(fail(
                    Outcome::StreamInterrupted,
                    format!("reading the stream: {}", error_chain(&e)),
                ));
            }
            Ok(Ok(c)) => c,
        };
        let at = Instant::now();
        let Some(bytes) = chunk else {
            run.timeline.end = Some(at);
            if is_json {
                return non_streamed(run, &whole, at);
            }
            if let Err(e) = decoder.finish(at, &mut events) {
                return Some(sse_failure(e));
            }
            for ev in events.drain(..) {
                if let Err(f) = run.event(&ev.data, ev.at) {
                    return Some(f);
                }
            }
            if !run.done && run.finish_reason.is_none() {
                return Some(fail(
                    Outcome::StreamInterrupted,
                    "the stream ended before a finish reason or [DONE]",
                ));
            }
            return None;
        };
        *bytes_read += bytes.len();
        if is_json {
            if whole.len() + bytes.len() > run.caps.max_body {
                return Some(fail(
                    Outcome::Oversized,
                    format!("response over {} bytes", run.caps.max_body),
                ));
            }
            whole.extend_from_slice(&bytes);
            continue;
        }
        if let Err(e) = decoder.feed(&bytes, at, &mut events) {
            return Some(sse_failure(e));
        }
        for ev in events.drain(..) {
            if let Err(f) = run.event(&ev.data, ev.at) {
                return Some(f);
            }
            if run.done {
                run.timeline.end = Some(ev.at);
                return None;
            }
        }
    }
}

/// A server that answered `stream: true` with one JSON document: its content arrived all at
/// once, with the last byte.
fn non_streamed(run: &mut Run, body: &[u8], at: Instant) -> Option<Failure> {
    let text = String::from_utf8_lossy(body);
    if let Err(f) = run.event(text.trim(), at) {
        return Some(f);
    }
    run.done = true;
    None
}

fn sse_failure(e: SseError) -> Failure {
    match e {
        SseError::LineTooLong { .. } | SseError::BodyTooLarge { .. } => {
            fail(Outcome::Oversized, e.to_string())
        }
        SseError::NotSse { .. } | SseError::InvalidUtf8 => {
            fail(Outcome::MalformedStream, e.to_string())
        }
    }
}

/// An error with its causes, one line (`{:#}` style), as the user should read it.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
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
}
