//! Reading one response under the probe's layered deadlines — first token, stall, total — into
//! plain data: when headers and every content-carrying event arrived, the text and tool calls,
//! the token count, and the transport failure if reading stopped early. Judging the text is
//! elsewhere, with one exception asked for by `checks.stop_on_repetition`: once the text
//! certainly loops, reading stops and the connection is dropped, so a looping replica is not
//! kept busy to `max_tokens`.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::HeaderMap;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::time::timeout_at;

use super::connect::{self, Way};
use super::flavor::{Delta, Flavor, Framing, ToolCalls};
use crate::checks::repetition::{self, Thresholds};
use crate::config::{Api, Probe, Target, Timeouts};
use crate::outcome::{HttpReason, Outcome};
use crate::result::Reading;
use crate::stream::eventstream::EventStreamReader;
use crate::stream::ndjson::NdjsonReader;
use crate::stream::sse::{SseError, SseReader};
use crate::stream::{Body, BodyError, Event, StreamCaps};
use crate::util::{clip, error_chain, human_duration, snippet};

/// Hard limits on what a server may send, so a hostile one cannot exhaust the agent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    pub max_line: usize,
    pub max_body: usize,
    pub max_tokens: u64,
}

impl Caps {
    /// Generous for an honest server (about 1 KiB of stream per token), small enough to keep a
    /// daemon inside its memory budget.
    pub(crate) fn for_probe(probe: &Probe) -> Caps {
        let t = u64::from(probe.max_tokens);
        Caps {
            max_line: 1 << 20,
            max_body: (1usize << 20)
                .saturating_add((probe.max_tokens as usize).saturating_mul(2048)),
            max_tokens: t.saturating_mul(2).saturating_add(16),
        }
    }
}

/// Why reading stopped early: the transport outcome and a sentence for the on-call engineer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    pub outcome: Outcome,
    pub error: String,
}

fn fail(outcome: Outcome, error: impl Into<String>) -> Failure {
    Failure {
        outcome,
        error: error.into(),
    }
}

/// What reading one response gave: what it showed (the record's [`Reading`]), the text and tool
/// calls for the checks, and why reading stopped early, if it did.
#[derive(Debug)]
pub(crate) struct Read {
    pub reading: Reading,
    pub text: String,
    /// The tool calls, in the order they began, each with its arguments put together.
    pub tool_calls: ToolCalls,
    pub failure: Option<Failure>,
}

/// How to read one response: its flavor, deadlines and caps, and whether to stop on a loop.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub api: Api,
    pub timeouts: Timeouts,
    pub caps: Caps,
    /// Stop once the text certainly loops by these thresholds.
    pub stop_on_loop: Option<Thresholds>,
}

impl Plan {
    pub(crate) fn for_run(probe: &Probe, target: &Target) -> Plan {
        let checks = &probe.checks;
        Plan {
            api: target.api,
            timeouts: probe.timeouts,
            caps: Caps::for_probe(probe),
            stop_on_loop: checks
                .repetition
                .clone()
                .filter(|_| checks.stop_on_repetition),
        }
    }
}

/// What to do about a server that refused the `priority` field.
const PRIORITY_ADVICE: &str = "the server does not take request priorities: start it with priority scheduling (vLLM: --scheduling-policy priority; SGLang: --enable-priority-scheduling), or remove priority: from the target";

/// Looking for a certain loop costs a pass over the text: every this many content events.
const LOOP_CHECK_EVERY: usize = 16;

/// The layered deadlines of one run, all from its start.
struct Deadlines {
    timeouts: Timeouts,
    first_token: Instant,
    total: Instant,
}

impl Deadlines {
    fn new(start: Instant, timeouts: Timeouts) -> Self {
        let total = start + timeouts.total;
        Deadlines {
            timeouts,
            first_token: (start + timeouts.ttft).min(total),
            total,
        }
    }

    /// Until the first token, the first-token deadline; after it, a stall deadline from the
    /// last event, never past the total.
    fn next(&self, last_event: Option<Instant>) -> Instant {
        match last_event {
            Some(last) => (last + self.timeouts.stall).min(self.total),
            None => self.first_token,
        }
    }

    /// The failure for a deadline passed at `now` while reading the body.
    fn passed(&self, now: Instant, got_content: bool) -> Failure {
        let t = &self.timeouts;
        if now >= self.total {
            fail(
                Outcome::TimeoutTotal,
                format!(
                    "the response took longer than {} (timeouts.total)",
                    human_duration(t.total)
                ),
            )
        } else if !got_content {
            fail(
                Outcome::TimeoutTtft,
                format!(
                    "no generated content within {} (timeouts.ttft)",
                    human_duration(t.ttft)
                ),
            )
        } else {
            fail(
                Outcome::Stall,
                format!(
                    "no chunk for {} after the first token (timeouts.stall)",
                    human_duration(t.stall)
                ),
            )
        }
    }

    /// The failure when not even the response headers came in time.
    fn no_headers(&self) -> Failure {
        let t = &self.timeouts;
        let (outcome, limit, key) = if t.ttft >= t.total {
            (Outcome::TimeoutTotal, t.total, "total")
        } else {
            (Outcome::TimeoutTtft, t.ttft, "ttft")
        };
        fail(
            outcome,
            format!(
                "no response headers within {} (timeouts.{key})",
                human_duration(limit)
            ),
        )
    }
}

/// A response being read.
struct Reader {
    flavor: &'static dyn Flavor,
    caps: Caps,
    stop_on_loop: Option<Thresholds>,
    deadlines: Deadlines,
    seen: Reading,
    /// The text so far, and the tool calls.
    text: String,
    tool_calls: ToolCalls,
    /// The flavor's last event (`[DONE]`, `response.completed`, `message_stop`, `done: true`)
    /// arrived.
    done: bool,
    /// The last event that carried content, once the first token came.
    last_event: Option<Instant>,
    /// What the TLS handshake showed, made into the record's `tls` once the run is over.
    peer: Option<connect::Peer>,
}

impl Read {
    /// A run that never went out: the credential its cloud hands out could not be had
    /// (`http_error`, reason `auth`), with why.
    pub(crate) fn no_credential(start: Instant, why: String) -> Read {
        let mut reading = Reading::empty(start);
        reading.timeline.end = Some(Instant::now());
        reading.http_reason = Some(HttpReason::Auth);
        Read {
            reading,
            text: String::new(),
            tool_calls: ToolCalls::default(),
            failure: Some(fail(Outcome::HttpError, why)),
        }
    }
}

/// Sends the request and reads the response.
pub(crate) async fn read(way: &Way, request: super::Request, plan: Plan, start: Instant) -> Read {
    let mut reader = Reader {
        flavor: plan.api.flavor(),
        caps: plan.caps,
        stop_on_loop: plan.stop_on_loop,
        deadlines: Deadlines::new(start, plan.timeouts),
        seen: Reading::empty(start),
        text: String::new(),
        tool_calls: ToolCalls::default(),
        done: false,
        last_event: None,
        peer: None,
    };
    let result = reader
        .exchange(way, request.url, request.headers, request.body)
        .await;
    // The one place a run's end is set: the end of the stream, or when reading stopped.
    let end = match &result {
        Ok(at) => *at,
        Err(_) => Instant::now(),
    };
    reader.seen.timeline.end = Some(end);
    reader.seen.tls = reader.peer.as_ref().and_then(connect::Peer::session);
    Read {
        reading: reader.seen,
        text: reader.text,
        tool_calls: reader.tool_calls,
        failure: result.err(),
    }
}

/// A response body as a stream of reads (its data frames; trailers are skipped).
fn body_of(body: Incoming) -> impl Stream<Item = Result<Bytes, hyper::Error>> + Unpin {
    Box::pin(futures_util::stream::unfold(body, |mut body| async move {
        loop {
            match body.frame().await? {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        return Some((Ok(data), body));
                    }
                }
                Err(e) => return Some((Err(e), body)),
            }
        }
    }))
}

impl Reader {
    /// Returns when the stream ended, or the transport failure.
    async fn exchange(
        &mut self,
        way: &Way,
        url: String,
        mut headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<Instant, Failure> {
        let (dest, conn) = self.connect(way, &url).await?;
        connect::complete(&mut headers, &dest, &conn);
        let uri = connect::request_uri(&dest, &conn);
        let first_byte = conn.first_byte.clone();
        let mut request = hyper::Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = hyper::Method::POST;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        let send = async {
            let (mut sender, driver) =
                hyper::client::conn::http1::handshake(TokioIo::new(conn.io)).await?;
            // The connection's own task reads and writes; it ends when the response is read or
            // dropped (which closes the connection).
            tokio::spawn(driver);
            sender.send_request(request).await
        };
        let resp = match timeout_at(self.deadlines.first_token.into(), send).await {
            Err(_) => return Err(self.deadlines.no_headers()),
            Ok(Err(e)) => {
                let addr = dest.addr();
                let mismatch =
                    connect::answered_plain_http_in_tls(first_byte.as_ref(), None, &addr);
                if let Some((reason, error)) =
                    mismatch.or_else(|| connect::refused_after_handshake(&e, &addr))
                {
                    self.seen.http_reason = Some(reason);
                    return Err(fail(Outcome::ConnectError, error));
                }
                return Err(fail(
                    Outcome::StreamInterrupted,
                    format!("before response headers: {}", error_chain(&e)),
                ));
            }
            Ok(Ok(r)) => r,
        };
        self.seen.timeline.headers = Some(Instant::now());
        let (resp, body) = resp.into_parts();
        let status = resp.status;
        self.seen.http_status = Some(status.as_u16());
        let content_type = resp
            .headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if !status.is_success() {
            self.seen.rate_limit = super::http_reason::rate_limit_headers(&resp.headers);
            let resp_headers = resp.headers;
            let text = self.head(body).await;
            if let Some((reason, error)) = (status == hyper::StatusCode::BAD_REQUEST)
                .then(|| connect::answered_plain_http_in_tls(None, Some(&text), &dest.addr()))
                .flatten()
            {
                self.seen.http_reason = Some(reason);
                return Err(fail(Outcome::ConnectError, error));
            }
            let json = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
            self.seen.http_reason = Some(super::http_reason::classify(
                status.as_u16(),
                self.flavor.error_signs(&json, &resp_headers),
            ));
            if let Some(delay) = self.flavor.retry_delay(&json) {
                let kept = self.seen.rate_limit.get_or_insert_with(BTreeMap::new);
                kept.insert("retryDelay".into(), delay);
            }
            let msg = match self.flavor.error_message(&json) {
                Some(m) => m.to_string(),
                None => text.trim().to_string(),
            };
            let reason = status.canonical_reason().unwrap_or("");
            let error = if msg.is_empty() {
                format!("HTTP {} {reason}", status.as_u16())
            } else {
                format!("HTTP {} {reason}: {}", status.as_u16(), clip(&msg))
            };
            let error = match self.seen.http_reason {
                Some(HttpReason::PriorityUnsupported) => format!("{error}; {PRIORITY_ADVICE}"),
                _ => error,
            };
            return Err(fail(Outcome::HttpError, error));
        }
        if content_type.starts_with("application/json") {
            return self.non_streamed(body_of(body)).await;
        }
        // A page served with a 200 (a proxy's error page, a login form) is not a stream; a
        // server that names no type is judged by what it sends.
        let framing = self.flavor.framing();
        let expected = framing.content_types();
        if !content_type.is_empty() && !expected.iter().any(|t| content_type.starts_with(t)) {
            let head = self.head(body).await;
            return Err(fail(
                Outcome::MalformedStream,
                format!(
                    "the response is {content_type}, not {}: {:?}",
                    expected[0],
                    snippet(head.as_bytes())
                ),
            ));
        }
        let caps = StreamCaps {
            max_line: self.caps.max_line,
            max_body: self.caps.max_body,
        };
        let start = self.seen.timeline.start;
        match framing {
            Framing::Sse => {
                let mut events = SseReader::new(body_of(body), caps, start);
                let result = self.each_event(&mut events).await;
                self.seen.bytes_read = events.bytes_read();
                result
            }
            Framing::Ndjson => {
                let mut lines = NdjsonReader::new(body_of(body), caps, start);
                let result = self
                    .each_event(&mut (&mut lines).map(|r| r.map_err(SseError::Body)))
                    .await;
                self.seen.bytes_read = lines.bytes_read();
                result
            }
            Framing::EventStream => {
                let mut frames = EventStreamReader::new(body_of(body), caps, start);
                let result = self
                    .each_event(&mut (&mut frames).map(|r| r.map_err(SseError::Body)))
                    .await;
                self.seen.bytes_read = frames.bytes_read();
                result
            }
        }
    }

    /// Opens the run's connection under the connect timeout (and the first-token deadline),
    /// its steps stamped on the run's timeline and its TLS session kept.
    async fn connect(
        &mut self,
        way: &Way,
        url: &str,
    ) -> Result<(connect::Dest, connect::Connection), Failure> {
        let dest =
            connect::Dest::parse(url).map_err(|e| fail(Outcome::ConnectError, e.describe("").1))?;
        let addr = dest.addr();
        let limit = self.seen.timeline.start + self.deadlines.timeouts.connect;
        let by = limit.min(self.deadlines.first_token);
        let opened = connect::open(way, &dest, &mut self.seen.timeline.setup);
        match timeout_at(by.into(), opened).await {
            Err(_) if limit <= self.deadlines.first_token => Err(fail(
                Outcome::ConnectError,
                format!("connect: timed out ({addr})"),
            )),
            Err(_) => Err(self.deadlines.no_headers()),
            Ok(Err(e)) => {
                let (reason, error) = e.describe(&addr);
                self.seen.http_reason = reason;
                Err(fail(Outcome::ConnectError, error))
            }
            Ok(Ok(mut conn)) => {
                self.peer = conn.tls.take();
                Ok((dest, conn))
            }
        }
    }

    /// The start of a body that is not the answer, for the error message: a little, within the
    /// first-token deadline, never more.
    async fn head(&self, body: Incoming) -> String {
        let mut body = body_of(body);
        let mut head = Vec::new();
        while head.len() < 4096 {
            match timeout_at(self.deadlines.first_token.into(), body.next()).await {
                Ok(Some(Ok(b))) => head.extend_from_slice(&b[..b.len().min(4096 - head.len())]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&head).into_owned()
    }

    /// Reads events under the deadlines until the flavor's last event or the end of the body.
    async fn each_event<S>(&mut self, events: &mut S) -> Result<Instant, Failure>
    where
        S: Stream<Item = Result<Event, SseError>> + Unpin,
    {
        loop {
            let deadline = self.deadlines.next(self.last_event);
            let got_content = self.last_event.is_some();
            match timeout_at(deadline.into(), events.next()).await {
                Err(_) => return Err(self.deadlines.passed(Instant::now(), got_content)),
                Ok(None) => {
                    let at = Instant::now();
                    if !self.done && self.seen.finish_reason.is_none() {
                        return Err(fail(
                            Outcome::StreamInterrupted,
                            "the stream ended before a finish reason or its end marker",
                        ));
                    }
                    return Ok(at);
                }
                Ok(Some(Err(e))) => return Err(stream_failure(e)),
                Ok(Some(Ok(ev))) => {
                    self.event(&ev.event, &ev.data, ev.at)?;
                    // Returning drops the body unread: the connection closes.
                    if self.done || self.seen.stopped_early {
                        return Ok(ev.at);
                    }
                }
            }
        }
    }

    /// A server that answered `stream: true` with one JSON document: its content arrived all at
    /// once, with its last byte.
    async fn non_streamed<S, B, E>(&mut self, body: S) -> Result<Instant, Failure>
    where
        S: Stream<Item = Result<B, E>> + Unpin,
        B: Into<bytes::Bytes>,
        E: std::error::Error + 'static,
    {
        // One document may be one line: only the body cap applies.
        let caps = StreamCaps {
            max_line: self.caps.max_body,
            max_body: self.caps.max_body,
        };
        let mut reads = Body::new(body, caps, self.seen.timeline.start);
        let progress = reads.progress();
        let mut whole = Vec::new();
        loop {
            match timeout_at(self.deadlines.first_token.into(), reads.next()).await {
                Err(_) => return Err(self.deadlines.passed(Instant::now(), false)),
                Ok(Some(Ok(read))) => whole.extend_from_slice(read.as_ref()),
                Ok(Some(Err(e))) => {
                    self.seen.bytes_read = progress.bytes();
                    return Err(stream_failure(SseError::Body(e)));
                }
                Ok(None) => break,
            }
        }
        self.seen.bytes_read = progress.bytes();
        let at = progress.last_arrival();
        let v: Value = serde_json::from_slice(&whole).map_err(|_| {
            fail(
                Outcome::MalformedStream,
                format!("the answer is not JSON: {:?}", snippet(&whole)),
            )
        })?;
        if !v.is_object() {
            return Err(fail(
                Outcome::MalformedStream,
                "the answer is not a JSON object",
            ));
        }
        self.take(self.flavor.whole(&v), at)?;
        self.done = true;
        Ok(at)
    }

    /// Reads one event through the flavor: text, reasoning, counts, timings, an error.
    fn event(&mut self, kind: &str, data: &str, at: Instant) -> Result<(), Failure> {
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let v: Value = serde_json::from_str(data).map_err(|_| {
            fail(
                Outcome::MalformedStream,
                format!("event is not JSON: {:?}", snippet(data.as_bytes())),
            )
        })?;
        if !v.is_object() {
            return Err(fail(Outcome::MalformedStream, "event is not a JSON object"));
        }
        self.take(self.flavor.event(kind, &v), at)
    }

    /// Takes in what one event carried.
    fn take(&mut self, d: Delta, at: Instant) -> Result<(), Failure> {
        if let Some(msg) = d.error {
            return Err(fail(
                Outcome::StreamError,
                format!("error in stream: {}", clip(&msg)),
            ));
        }
        let generated = d.is_generated();
        let finished = d.finish_reason.is_some();
        let seen = &mut self.seen;
        if d.output_tokens.is_some() {
            seen.usage_tokens = d.output_tokens;
        }
        if d.input_tokens.is_some() {
            seen.input_tokens = d.input_tokens;
        }
        if d.cached_tokens.is_some() {
            seen.cached_tokens = d.cached_tokens;
        }
        if d.reasoning_tokens.is_some() {
            seen.reasoning_tokens = d.reasoning_tokens;
        }
        if d.server_timings.is_some() {
            seen.server_timings = d.server_timings;
        }
        if d.model.is_some() {
            seen.reported_model = d.model;
        }
        if d.fingerprint.is_some() {
            seen.system_fingerprint = d.fingerprint;
        }
        if generated {
            seen.timeline.content.push(at);
            seen.chunks += 1;
            if !d.text.is_empty() && seen.timeline.answer.is_none() {
                seen.timeline.answer = Some(at);
            }
            self.text.push_str(&d.text);
            if let Some(t) = &self.stop_on_loop {
                if seen.chunks.is_multiple_of(LOOP_CHECK_EVERY)
                    && repetition::certain_loop(&self.text, t)
                {
                    seen.stopped_early = true;
                }
            }
        }
        for piece in d.tool_calls {
            self.tool_calls.take(piece);
        }
        if d.finish_reason.is_some() {
            seen.finish_reason = d.finish_reason;
            seen.timeline.finish = Some(at);
        }
        self.done |= d.done;
        // Only content (or the finish) restarts the stall clock: a ping or a bookkeeping event
        // between chunks is no chunk, and a stream kept alive by them still stalls.
        if generated || (finished && !seen.timeline.content.is_empty()) {
            self.last_event = Some(at);
        }
        let tokens = seen.usage_tokens.unwrap_or(0).max(seen.chunks as u64);
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

/// The transport outcome of a body or stream that could not be read as the protocol.
fn stream_failure(e: SseError) -> Failure {
    let outcome = match &e {
        SseError::Body(
            BodyError::LineTooLong { .. }
            | BodyError::BodyTooLarge { .. }
            | BodyError::FrameTooLarge { .. },
        ) => Outcome::Oversized,
        SseError::Body(BodyError::Transport(_)) => {
            return fail(
                Outcome::StreamInterrupted,
                format!("reading the stream: {e}"),
            )
        }
        SseError::Body(BodyError::InvalidUtf8 { .. } | BodyError::BadFrame(_))
        | SseError::NoEvents { .. }
        | SseError::ForeignLine(_)
        | SseError::Syntax(_) => Outcome::MalformedStream,
    };
    fail(outcome, e.to_string())
}
