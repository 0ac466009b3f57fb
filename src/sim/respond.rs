//! How a [`Generation`] is written, by a plan chosen before the first byte: refused at once,
//! held silent, one JSON answer, a stream that breaks before its content, or the tokens
//! streamed, framed as the scenario's server frames them (vLLM or llama.cpp style, CRLF, no
//! space, split writes, comments), with the faults at their moment (a reset, an error or a
//! stall at the fourth token, no end).

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::time::sleep_until;

use super::generate::{Generation, Pace, Piece};
use super::http::{self, json_bytes, Chunked};
use super::scenarios::Kind;
use super::state::State;
use super::wire::{Call, Ending, Out, PieceKind, Wire};
use crate::listener::Tracked;

/// The longest a scenario keeps a connection open on purpose (no answer, or keep-alives only).
pub(super) const HOLD: Duration = Duration::from_secs(120);

/// How often a Messages stream pings while it stalls.
const PING_EVERY: Duration = Duration::from_millis(250);

/// What a broken proxy splices into a stream: a line of its own error page.
const HTML_LINE: &[u8] = b"<html><body><h1>502 Bad Gateway</h1></body></html>\n";

/// The token at which a stream resets, errs or stalls.
const FAULT_AT: usize = 3;

/// What a scenario does with a request, decided before anything is written.
enum Plan {
    /// An error status, or a page that is not the protocol, answered at once.
    Refuse {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// The headers never come.
    Hold,
    /// One JSON answer, after the whole generation's time.
    Whole,
    /// A stream that breaks before any token: a line too long, keep-alives only, an event cut
    /// in half, or no end at all.
    Broken,
    /// The tokens, streamed.
    Stream,
}

impl Generation {
    fn plan(&self) -> Plan {
        let refuse = |status, body: serde_json::Value| Plan::Refuse {
            status,
            content_type: "application/json",
            body: json_bytes(&body),
        };
        match self.scenario.kind {
            Kind::Http(code) if self.wire == Wire::Bedrock => {
                refuse(code, super::bedrock::error_body(code))
            }
            Kind::Http(code) => {
                if let Some(body) = self.wire.refusal(code, &self.model) {
                    return refuse(code, body);
                }
                let (msg, ty, code_field) = match code {
                    400 => (
                        "This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 tokens.",
                        "invalid_request_error",
                        json!("context_length_exceeded"),
                    ),
                    404 => (
                        "The model does not exist or you do not have access to it.",
                        "invalid_request_error",
                        json!("model_not_found"),
                    ),
                    429 => ("Rate limit exceeded, retry later", "rate_limit_error", json!(code)),
                    503 => ("The model is overloaded", "server_error", json!(code)),
                    // Anthropic's shape for its own overload status.
                    529 => {
                        return refuse(
                            code,
                            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                        )
                    }
                    _ => ("Internal server error", "server_error", json!(code)),
                };
                refuse(
                    code,
                    json!({"error": {"message": msg, "type": ty, "code": code_field}}),
                )
            }
            // vLLM's own words and error shape (`ErrorResponse`), for any priority but 0.
            Kind::VllmDefault if self.priority.is_some_and(|p| p != 0) => refuse(
                400,
                json!({"error": {
                    "message": format!(
                        "Got priority {} but Priority scheduling is not enabled.",
                        self.priority.unwrap_or_default()
                    ),
                    "type": "BadRequestError",
                    "param": null,
                    "code": 400,
                }}),
            ),
            Kind::EchoAuth => {
                let said = self.authorization.as_deref().unwrap_or("none");
                refuse(
                    401,
                    json!({"error": {"message": format!("invalid credentials: {said}")}}),
                )
            }
            Kind::Garbage => Plan::Refuse {
                status: 200,
                content_type: "text/html",
                body: b"<html><body><h1>502 Bad Gateway</h1></body></html>\n".to_vec(),
            },
            Kind::NoHeaders => Plan::Hold,
            kind if !self.stream || kind == Kind::NonStream => Plan::Whole,
            Kind::HugeLine | Kind::RoleOnly | Kind::Malformed | Kind::Endless => Plan::Broken,
            _ => Plan::Stream,
        }
    }

    pub(super) async fn respond(self, sock: &mut Tracked, st: &State) -> std::io::Result<bool> {
        let extra = [("x-sim-cache", self.cache.as_str().to_string())];
        let pace = self.pace();
        let plan = match self.plan() {
            Plan::Refuse {
                status,
                content_type,
                body,
            } => {
                let mut extra = extra.to_vec();
                if self.wire == Wire::Bedrock && status >= 400 {
                    extra.push(super::bedrock::error_type_header(status));
                } else if status == 429 {
                    // What OpenAI sends with it: when to come back, and what is left.
                    extra.push(("retry-after", "2".into()));
                    extra.push(("x-ratelimit-remaining-requests", "0".into()));
                    extra.push(("x-ratelimit-reset-requests", "2s".into()));
                }
                http::respond(sock, status, content_type, &extra, &body).await?;
                return Ok(true);
            }
            Plan::Hold => {
                hold(sock).await;
                return Ok(false);
            }
            Plan::Whole => return self.whole(sock, st, &extra, pace).await,
            plan => plan,
        };
        let mut rng = fastrand::Rng::with_seed(7);
        if let Some(id) = &self.request_id {
            st.record_headers(id, Instant::now());
        }
        let mut w = Chunked::start(sock, 200, self.wire.content_type(), &extra).await?;
        // vLLM opens chat with a role-only chunk (not a token); llama.cpp does not.
        let opening = self
            .wire
            .opening(&self.model, self.scenario.kind != Kind::LlamaCpp);
        self.send_all(&mut w, &opening, &mut rng).await?;
        if let Plan::Broken = plan {
            self.break_stream(w, pace).await?;
            return Ok(false);
        }
        let out = Streamer {
            gen: &self,
            st,
            w,
            rng,
            block: None,
            index: 0,
            writes: Vec::new(),
        };
        out.stream(pace).await
    }

    /// The whole answer as one JSON body.
    async fn whole(
        &self,
        sock: &mut Tracked,
        st: &State,
        extra: &[(&str, String)],
        pace: Pace,
    ) -> std::io::Result<bool> {
        let (pieces, finish) = self.script();
        let call = self.call();
        let usage = self.usage(&pieces);
        sleep_until((self.t0 + pace.ttft + pace.itl * pieces.len() as u32).into()).await;
        let text: String = pieces
            .iter()
            .filter(|p| p.kind == PieceKind::Answer)
            .map(|p| p.text.as_str())
            .collect();
        let end = Ending {
            finish,
            usage: Some(&usage),
            timings: None,
            block: 0,
            call: call.as_ref(),
        };
        let body = self.wire.whole(&self.model, &text, &end);
        self.report(st, &[Instant::now()], &usage);
        http::respond(sock, 200, "application/json", extra, &json_bytes(&body)).await?;
        if let Some(id) = &self.request_id {
            st.record_first_write(id, Instant::now());
        }
        Ok(true)
    }

    /// The streams that break before any token; the connection is not reused.
    async fn break_stream(&self, mut w: Chunked<'_>, pace: Pace) -> std::io::Result<()> {
        match self.scenario.kind {
            Kind::HugeLine if self.wire == Wire::Bedrock => {
                for piece in super::bedrock::huge_frame().chunks(64 * 1024) {
                    w.write(piece).await?;
                }
            }
            Kind::HugeLine => {
                let head: &[u8] = if self.wire.ndjson() {
                    b"{\"message\":{\"content\":\""
                } else {
                    b"data: {\"choices\":[{\"delta\":{\"content\":\""
                };
                w.write(head).await?;
                let block = vec![b'x'; 64 * 1024];
                for _ in 0..4096 {
                    w.write(&block).await?;
                }
            }
            Kind::RoleOnly => {
                let until = Instant::now() + HOLD;
                while Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    w.write(self.keep_alive()).await?;
                }
            }
            Kind::Malformed => {
                sleep_until((self.t0 + pace.ttft).into()).await;
                w.write(&self.frame_raw(None, "{\"choices\": [{\"delta\": {\"content\": \"Par"))
                    .await?;
                w.finish().await?;
            }
            Kind::Endless => {
                let start = self.t0 + pace.ttft;
                let mut block = None;
                for i in 0..=1_000_000u32 {
                    sleep_until((start + pace.itl * i).into()).await;
                    let mut events = self.wire.block_change(block, PieceKind::Answer, 0);
                    block = Some(PieceKind::Answer);
                    events.push(self.wire.piece(
                        &self.model,
                        PieceKind::Answer,
                        &format!(" word{i}"),
                        0,
                    ));
                    for ev in &events {
                        w.write(&self.frame(ev)).await?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Serialises one event the way this scenario's server would: SSE (named or not, CRLF or
    /// LF, with or without the space after `data:`), or one NDJSON line.
    fn frame(&self, ev: &Out) -> Vec<u8> {
        self.frame_raw(ev.name, &ev.data.to_string())
    }

    fn frame_raw(&self, name: Option<&str>, data: &str) -> Vec<u8> {
        let nl = if self.scenario.kind == Kind::Crlf {
            "\r\n"
        } else {
            "\n"
        };
        if self.wire.ndjson() {
            return format!("{data}{nl}").into_bytes();
        }
        if self.wire == Wire::Bedrock {
            return super::bedrock::frame(name.unwrap_or_default(), data.as_bytes());
        }
        let prefix = if self.scenario.kind == Kind::NoSpace {
            "data:"
        } else {
            "data: "
        };
        let event = name.map(|n| format!("event: {n}{nl}")).unwrap_or_default();
        format!("{event}{prefix}{data}{nl}{nl}").into_bytes()
    }

    /// A keep-alive in this flavor: an SSE comment, a blank NDJSON line, or an empty Bedrock
    /// text delta.
    fn keep_alive(&self) -> &'static [u8] {
        if self.wire == Wire::Bedrock {
            return &super::bedrock::KEEP_ALIVE;
        }
        if self.wire.ndjson() {
            b"\n"
        } else {
            b": keep-alive\n\n"
        }
    }

    async fn send(
        &self,
        w: &mut Chunked<'_>,
        bytes: &[u8],
        rng: &mut fastrand::Rng,
    ) -> std::io::Result<Instant> {
        match self.scenario.kind {
            Kind::Split => {
                // The event is complete only with its last piece: that write is its instant.
                let mut rest = bytes;
                let mut at = Instant::now();
                while !rest.is_empty() {
                    let n = rng.usize(1..=7).min(rest.len());
                    at = w.write(&rest[..n]).await?;
                    rest = &rest[n..];
                }
                Ok(at)
            }
            Kind::Comments => {
                w.write(self.keep_alive()).await?;
                w.write(bytes).await
            }
            _ => w.write(bytes).await,
        }
    }

    async fn send_all(
        &self,
        w: &mut Chunked<'_>,
        events: &[Out],
        rng: &mut fastrand::Rng,
    ) -> std::io::Result<()> {
        for ev in events {
            self.send(w, &self.frame(ev), rng).await?;
        }
        Ok(())
    }
}

/// A stream being written: where its content blocks stand, and when each token left.
struct Streamer<'g, 'w> {
    gen: &'g Generation,
    st: &'g State,
    w: Chunked<'w>,
    rng: fastrand::Rng,
    /// The kind of content of the open block (Anthropic's framing), and its index.
    block: Option<PieceKind>,
    index: usize,
    /// When each piece of content left: the first token, then the gaps between them.
    writes: Vec<Instant>,
}

impl Streamer<'_, '_> {
    /// The tokens, each at its due time, then the end; with the scenario's fault on the way.
    async fn stream(mut self, pace: Pace) -> std::io::Result<bool> {
        let gen = self.gen;
        let kind = gen.scenario.kind;
        let (pieces, finish) = gen.script();
        let call = gen.call();
        let usage = gen.usage(&pieces);
        let mut offset = Duration::ZERO;
        for (i, piece) in pieces.iter().enumerate() {
            if i == FAULT_AT {
                match kind {
                    Kind::Reset => {
                        self.w.reset();
                        return Ok(false);
                    }
                    Kind::MidStreamError => {
                        let err = gen.wire.error("CUDA error: out of memory");
                        self.w.write(&gen.frame(&err)).await?;
                        self.w.finish().await?;
                        return Ok(false);
                    }
                    Kind::HtmlSplice => {
                        self.send(HTML_LINE).await?;
                    }
                    Kind::Stall => offset = gen.scenario.stall,
                    _ => {}
                }
            }
            let due = gen.t0 + pace.ttft + offset + pace.itl * i as u32;
            if kind == Kind::Stall && i == FAULT_AT && gen.wire == Wire::Messages {
                // Anthropic's servers keep a quiet stream alive with pings: they are not chunks,
                // so the gap is still a stall.
                while Instant::now() + PING_EVERY < due {
                    sleep_until((Instant::now() + PING_EVERY).into()).await;
                    self.send(&gen.frame_raw(Some("ping"), PING)).await?;
                }
            }
            sleep_until(due.into()).await;
            self.piece(i, piece, call.as_ref()).await?;
        }
        if kind == Kind::NoDone {
            self.w.finish().await?;
            return Ok(false);
        }
        let timings =
            (kind == Kind::LlamaCpp).then(|| gen.server_timings(pace, pieces.len(), &usage));
        gen.report(self.st, &self.writes, &usage);
        let end = Ending {
            finish,
            usage: (gen.include_usage && kind != Kind::NoUsage).then_some(&usage),
            timings,
            block: self.index,
            call: call.as_ref(),
        };
        for ev in gen.wire.closing(&gen.model, end) {
            let bytes = match &ev {
                Some(ev) => gen.frame(ev),
                None => gen.frame_raw(None, "[DONE]"),
            };
            self.send(&bytes).await?;
        }
        self.w.finish().await?;
        Ok(true)
    }

    /// One token, with the block and tool-call events its flavor puts before it.
    async fn piece(&mut self, i: usize, piece: &Piece, call: Option<&Call>) -> std::io::Result<()> {
        let gen = self.gen;
        // A new kind of content opens the next content block (Anthropic's framing).
        if self.block.is_some_and(|b| b != piece.kind) {
            self.index += 1;
        }
        let mut changes = gen.wire.block_change(self.block, piece.kind, self.index);
        let call_starts = piece.kind == PieceKind::Tool && self.block != Some(PieceKind::Tool);
        self.block = Some(piece.kind);
        let whole_calls = !gen.wire.streams_tool_arguments();
        if let (true, Some(c)) = (call_starts, call) {
            if whole_calls {
                // The whole call in one event, in place of its pieces.
                self.content(&gen.frame(&gen.wire.whole_call(&gen.model, c)))
                    .await?;
            }
            changes.extend(gen.wire.tool_call_start(&gen.model, &c.name, self.index));
        }
        if piece.kind == PieceKind::Tool && whole_calls {
            return Ok(());
        }
        for ev in &changes {
            self.send(&gen.frame(ev)).await?;
        }
        // Anthropic's servers send pings between deltas; they are not tokens.
        if gen.wire == Wire::Messages && i % 4 == 2 {
            self.send(&gen.frame_raw(Some("ping"), PING)).await?;
        }
        let ev = gen
            .wire
            .piece(&gen.model, piece.kind, &piece.text, self.index);
        self.content(&gen.frame(&ev)).await
    }

    async fn send(&mut self, bytes: &[u8]) -> std::io::Result<Instant> {
        self.gen.send(&mut self.w, bytes, &mut self.rng).await
    }

    /// Content: its instant is kept, and the first is the sim's own first-token stamp.
    async fn content(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let at = self.send(bytes).await?;
        if self.writes.is_empty() {
            if let Some(id) = &self.gen.request_id {
                self.st.record_first_write(id, at);
            }
        }
        self.writes.push(at);
        Ok(())
    }
}

/// An Anthropic ping event's data.
const PING: &str = "{\"type\": \"ping\"}";

/// Holds a connection open without answering, until the client gives up (bounded).
async fn hold(sock: &mut Tracked) {
    let mut b = [0u8; 64];
    let _ = tokio::time::timeout(HOLD, async {
        while let Ok(n) = sock.read(&mut b).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}
