//! What each scenario answers and how it writes it: the tokens and finish reason by scenario
//! and `max_tokens`, framed in the request's flavor ([`super::wire`]) with the scenario's quirks
//! (vLLM or llama.cpp style, CRLF, no space, split writes, comments), and the faults (errors,
//! stalls, resets, endless or huge streams).

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::time::sleep_until;

use super::answers;
use super::http::{self, Chunked};
use super::metrics::Observation;
use super::scenarios::{Kind, Scenario};
use super::serve::json_bytes;
use super::wire::{Call, Ending, Out, PieceKind, Usage, Wire};
use super::State;

/// How often a Messages stream pings while it stalls.
const PING_EVERY: Duration = Duration::from_millis(250);
use crate::listener::Tracked;

/// The longest a scenario keeps a connection open on purpose (no answer, or keep-alives only).
pub(super) const HOLD: Duration = Duration::from_secs(120);

/// One completion request, decoded: what to answer, in which flavor, and how fast.
pub(super) struct Generation {
    pub(super) wire: Wire,
    pub(super) model: String,
    pub(super) prompt: String,
    /// The first tool the request offers, for the tool-call scenarios.
    pub(super) tool: Option<String>,
    pub(super) scenario: Scenario,
    pub(super) max_tokens: usize,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) request_id: Option<String>,
    pub(super) authorization: Option<String>,
    pub(super) cache: &'static str,
    pub(super) t0: Instant,
}

struct Piece {
    kind: PieceKind,
    text: String,
}

impl Generation {
    /// The tool call a tool-call scenario makes: to the request's first tool (or a tool it did
    /// not offer), with good or bad arguments.
    fn call(&self) -> Option<Call> {
        let offered = self.tool.as_deref().unwrap_or("get_weather");
        let (name, arguments) = match self.scenario.kind {
            Kind::ToolCall => (offered, answers::CALL_ARGUMENTS),
            Kind::ToolCallWrong => ("get_time", "{}"),
            Kind::ToolCallBadArgs => (offered, answers::BAD_CALL_ARGUMENTS),
            _ => return None,
        };
        Some(Call {
            name: name.into(),
            arguments: arguments.into(),
        })
    }

    /// The tokens to send and the finish reason, by scenario and `max_tokens`.
    fn script(&self) -> (Vec<Piece>, &'static str) {
        let max = self.max_tokens.max(1);
        if let Some(call) = self.call() {
            let mut pieces: Vec<Piece> = answers::tokenize(&call.arguments)
                .into_iter()
                .map(|text| Piece {
                    kind: PieceKind::Tool,
                    text,
                })
                .collect();
            let finish = if pieces.len() > max {
                pieces.truncate(max);
                "length"
            } else {
                "tool_calls"
            };
            return (pieces, finish);
        }
        let text: String = match self.scenario.kind {
            Kind::HealthyZh => answers::CHINESE.into(),
            Kind::Repetition => answers::looping(false, max),
            Kind::RepetitionZh => answers::looping(true, max),
            Kind::TooShort => answers::SHORT.into(),
            Kind::TooLong => answers::rambling(max),
            Kind::Mismatch => answers::MISMATCH.into(),
            Kind::Forbidden => answers::FORBIDDEN.into(),
            Kind::Empty => " \u{200B}\n \u{FEFF} ".into(),
            Kind::Crawl => answers::rambling(200),
            Kind::RepetitionList => answers::looping_list(max),
            Kind::JsonBroken => answers::JSON_BROKEN.into(),
            Kind::ToolCallNone => answers::NO_CALL.into(),
            _ => answers::healthy(&self.prompt).into(),
        };
        let mut tokens = answers::tokenize(&text);
        if self.scenario.kind == Kind::Empty {
            tokens = text.chars().map(String::from).collect();
        }
        let mut finish = "stop";
        let cut = if self.scenario.kind == Kind::Truncated {
            5.min(max)
        } else {
            max
        };
        if self.scenario.kind == Kind::TooLong {
            // Long, but finished on its own: only `too_long` should fire.
            tokens.truncate(max.saturating_sub(1).max(1));
        }
        if tokens.len() > cut {
            tokens.truncate(cut);
            finish = "length";
        }
        let mut pieces: Vec<Piece> = Vec::new();
        if self.scenario.kind == Kind::Reasoning {
            pieces.extend(
                answers::tokenize("Let me recall the capital of France.")
                    .into_iter()
                    .map(|text| Piece {
                        kind: PieceKind::Reasoning,
                        text,
                    }),
            );
        }
        pieces.extend(tokens.into_iter().map(|text| Piece {
            kind: PieceKind::Answer,
            text,
        }));
        (pieces, finish)
    }

    fn usage(&self, pieces: &[Piece]) -> Usage {
        Usage {
            prompt: self.prompt.chars().count() / 4 + 1,
            completion: pieces.len(),
            reasoning: pieces
                .iter()
                .filter(|p| p.kind == PieceKind::Reasoning)
                .count(),
        }
    }

    /// Reports a request on the sim's /metrics, as the server it plays would: `writes` are the
    /// instants its content left (the first is its first token). Called before the last bytes
    /// go out, so a client that scrapes as soon as its answer ends finds it counted.
    fn report(&self, st: &State, writes: &[Instant], usage: &Usage) {
        let Some(first) = writes.first() else {
            return;
        };
        let secs = |at: Instant| at.saturating_duration_since(self.t0).as_secs_f64();
        let gaps: Vec<f64> = writes
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect();
        st.served.observe(&Observation {
            model: &self.model,
            ttft: secs(*first),
            e2e: secs(Instant::now()),
            gaps: &gaps,
            prompt_tokens: usage.prompt,
            output_tokens: usage.completion,
            skew: self.scenario.skew,
        });
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
        let prefix = if self.scenario.kind == Kind::NoSpace {
            "data:"
        } else {
            "data: "
        };
        let event = name.map(|n| format!("event: {n}{nl}")).unwrap_or_default();
        format!("{event}{prefix}{data}{nl}{nl}").into_bytes()
    }

    /// A keep-alive in this flavor: an SSE comment, or a blank NDJSON line.
    fn keep_alive(&self) -> &'static [u8] {
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

    pub(super) async fn respond(self, sock: &mut Tracked, st: &State) -> std::io::Result<bool> {
        let kind = self.scenario.kind;
        let extra = [("x-sim-cache", self.cache.to_string())];
        if let Kind::Http(code) = kind {
            let (msg, ty) = match code {
                429 => ("Rate limit exceeded, retry later", "rate_limit_error"),
                503 => ("The model is overloaded", "server_error"),
                _ => ("Internal server error", "server_error"),
            };
            let body = json_bytes(&json!({"error": {"message": msg, "type": ty, "code": code}}));
            http::respond(sock, code, "application/json", &extra, &body).await?;
            return Ok(true);
        }
        if kind == Kind::EchoAuth {
            let body = json_bytes(
                &json!({"error": {"message": format!("invalid credentials: {}", self.authorization.as_deref().unwrap_or("none"))}}),
            );
            http::respond(sock, 401, "application/json", &extra, &body).await?;
            return Ok(true);
        }
        if kind == Kind::Garbage {
            http::respond(
                sock,
                200,
                "text/html",
                &extra,
                b"<html><body><h1>502 Bad Gateway</h1></body></html>\n",
            )
            .await?;
            return Ok(true);
        }
        if kind == Kind::NoHeaders {
            hold(sock).await;
            return Ok(false);
        }
        let (mut ttft, mut itl) = (self.scenario.ttft, self.scenario.itl);
        match self.cache {
            "http-hit" => (ttft, itl) = (Duration::ZERO, Duration::ZERO),
            "prefix-hit" => ttft /= 4,
            _ => {}
        }
        let (pieces, finish) = self.script();
        let call = self.call();
        let usage = self.usage(&pieces);
        if !self.stream || kind == Kind::NonStream {
            sleep_until((self.t0 + ttft + itl * pieces.len() as u32).into()).await;
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
            http::respond(sock, 200, "application/json", &extra, &json_bytes(&body)).await?;
            if let Some(id) = &self.request_id {
                st.record_first_write(id, Instant::now());
            }
            return Ok(true);
        }

        let mut rng = fastrand::Rng::with_seed(7);
        if let Some(id) = &self.request_id {
            st.record_headers(id, Instant::now());
        }
        let mut w = Chunked::start(sock, 200, self.wire.content_type(), &extra).await?;
        // vLLM opens chat with a role-only chunk (not a token); llama.cpp does not.
        let opening = self.wire.opening(&self.model, kind != Kind::LlamaCpp);
        self.send_all(&mut w, &opening, &mut rng).await?;
        match kind {
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
                return Ok(false);
            }
            Kind::RoleOnly => {
                let until = Instant::now() + HOLD;
                while Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    w.write(self.keep_alive()).await?;
                }
                return Ok(false);
            }
            Kind::Malformed => {
                sleep_until((self.t0 + ttft).into()).await;
                w.write(&self.frame_raw(None, "{\"choices\": [{\"delta\": {\"content\": \"Par"))
                    .await?;
                w.finish().await?;
                return Ok(false);
            }
            Kind::Endless => {
                let mut i = 0u32;
                let start = self.t0 + ttft;
                let mut block = None;
                loop {
                    sleep_until((start + itl * i).into()).await;
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
                    i += 1;
                    if i > 1_000_000 {
                        return Ok(false);
                    }
                }
            }
            _ => {}
        }

        // When each piece of content left: the first token, then the gaps between them.
        let mut writes: Vec<Instant> = Vec::with_capacity(pieces.len());
        let mut offset = Duration::ZERO;
        let mut block: Option<PieceKind> = None;
        let mut index = 0usize;
        for (i, piece) in pieces.iter().enumerate() {
            if i == 3 {
                match kind {
                    Kind::Reset => {
                        w.reset();
                        return Ok(false);
                    }
                    Kind::MidStreamError => {
                        let err = self.wire.error("CUDA error: out of memory");
                        w.write(&self.frame(&err)).await?;
                        w.finish().await?;
                        return Ok(false);
                    }
                    Kind::Stall => offset = self.scenario.stall,
                    _ => {}
                }
            }
            let due = self.t0 + ttft + offset + itl * i as u32;
            if kind == Kind::Stall && i == 3 && self.wire == Wire::Messages {
                // Anthropic's servers keep a quiet stream alive with pings: they are not chunks,
                // so the gap is still a stall.
                while Instant::now() + PING_EVERY < due {
                    sleep_until((Instant::now() + PING_EVERY).into()).await;
                    w.write(&self.frame_raw(Some("ping"), "{\"type\": \"ping\"}"))
                        .await?;
                }
            }
            sleep_until(due.into()).await;
            // A new kind of content opens the next content block (Anthropic's framing).
            if block.is_some_and(|b| b != piece.kind) {
                index += 1;
            }
            let mut changes = self.wire.block_change(block, piece.kind, index);
            let call_starts = piece.kind == PieceKind::Tool && block != Some(PieceKind::Tool);
            block = Some(piece.kind);
            if let (true, Some(c)) = (call_starts, &call) {
                if !self.wire.streams_tool_arguments() {
                    // The whole call in one event, in place of its pieces.
                    let at = self
                        .send(
                            &mut w,
                            &self.frame(&self.wire.whole_call(&self.model, c)),
                            &mut rng,
                        )
                        .await?;
                    if writes.is_empty() {
                        if let Some(id) = &self.request_id {
                            st.record_first_write(id, at);
                        }
                    }
                    writes.push(at);
                }
                changes.extend(self.wire.tool_call_start(&self.model, &c.name, index));
            }
            if piece.kind == PieceKind::Tool && !self.wire.streams_tool_arguments() {
                continue;
            }
            self.send_all(&mut w, &changes, &mut rng).await?;
            // Anthropic's servers send pings between deltas; they are not tokens.
            if self.wire == Wire::Messages && i % 4 == 2 {
                self.send(
                    &mut w,
                    &self.frame_raw(Some("ping"), "{\"type\": \"ping\"}"),
                    &mut rng,
                )
                .await?;
            }
            let ev = self.wire.piece(&self.model, piece.kind, &piece.text, index);
            let at = self.send(&mut w, &self.frame(&ev), &mut rng).await?;
            if writes.is_empty() {
                if let Some(id) = &self.request_id {
                    st.record_first_write(id, at);
                }
            }
            writes.push(at);
        }
        if kind == Kind::NoDone {
            w.finish().await?;
            return Ok(false);
        }
        let timings = (kind == Kind::LlamaCpp).then(|| {
            // What the server says about itself, scaled like its /metrics.
            let (ttft, itl) = (
                ttft.mul_f64(self.scenario.skew),
                itl.mul_f64(self.scenario.skew),
            );
            let decode_ms = itl.as_secs_f64() * 1000.0 * pieces.len().saturating_sub(1) as f64;
            let ns = |d: Duration| d.as_nanos() as u64;
            json!({
                "prompt_n": usage.prompt, "prompt_ms": ttft.as_secs_f64() * 1000.0,
                "predicted_n": pieces.len(), "predicted_ms": decode_ms,
                "predicted_per_second": if decode_ms > 0.0 { (pieces.len() as f64 - 1.0) * 1000.0 / decode_ms } else { 0.0 },
                // Ollama's names for the same figures, in nanoseconds: a quarter of the first
                // token's wait spent loading the model, the rest on the prompt.
                "load_duration": ns(ttft / 4), "prompt_eval_duration": ns(ttft - ttft / 4),
                "eval_duration": ns(itl * pieces.len().saturating_sub(1) as u32),
                "total_duration": ns(ttft + itl * pieces.len() as u32),
            })
        });
        self.report(st, &writes, &usage);
        let usage = (self.include_usage && kind != Kind::NoUsage).then_some(&usage);
        let end = Ending {
            finish,
            usage,
            timings,
            block: index,
            call: call.as_ref(),
        };
        for ev in self.wire.closing(&self.model, end) {
            let bytes = match &ev {
                Some(ev) => self.frame(ev),
                None => self.frame_raw(None, "[DONE]"),
            };
            self.send(&mut w, &bytes, &mut rng).await?;
        }
        w.finish().await?;
        Ok(true)
    }
}

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
