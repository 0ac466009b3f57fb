//! What each scenario answers and how it writes it: the tokens and finish reason by scenario
//! and `max_tokens`, the chunk and event framing (vLLM or llama.cpp style, CRLF, no space,
//! split writes, comments), and the faults (errors, stalls, resets, endless or huge streams).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::time::sleep_until;

use super::answers;
use super::http::{self, Chunked};
use super::scenarios::{Kind, Scenario};
use super::serve::json_bytes;
use super::State;
use crate::listener::Tracked;

/// The longest a scenario keeps a connection open on purpose (no answer, or keep-alives only).
pub(super) const HOLD: Duration = Duration::from_secs(120);

/// One completion request, decoded: what to answer, and how fast.
pub(super) struct Generation {
    pub(super) chat: bool,
    pub(super) model: String,
    pub(super) prompt: String,
    pub(super) scenario: Scenario,
    pub(super) max_tokens: usize,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) request_id: Option<String>,
    pub(super) authorization: Option<String>,
    pub(super) cache: &'static str,
    pub(super) t0: Instant,
}

enum Piece {
    Reasoning(String),
    Content(String),
}

impl Generation {
    /// The tokens to send and the finish reason, by scenario and `max_tokens`.
    fn script(&self) -> (Vec<Piece>, &'static str) {
        let max = self.max_tokens.max(1);
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
                    .map(Piece::Reasoning),
            );
        }
        pieces.extend(tokens.into_iter().map(Piece::Content));
        (pieces, finish)
    }

    fn chunk(&self, piece: Option<&Piece>, finish: Option<&str>) -> Value {
        let (content, reasoning) = match piece {
            Some(Piece::Content(t)) => (Some(t.as_str()), None),
            Some(Piece::Reasoning(t)) => (None, Some(t.as_str())),
            None => (None, None),
        };
        if self.chat {
            let mut delta = serde_json::Map::new();
            if let Some(c) = content {
                delta.insert("content".into(), json!(c));
            }
            if let Some(r) = reasoning {
                delta.insert("reasoning_content".into(), json!(r));
            }
            json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": self.model,
                   "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
        } else {
            json!({"id": "cmpl-sim", "object": "text_completion", "created": 0, "model": self.model,
                   "choices": [{"index": 0, "text": content.unwrap_or_default(), "logprobs": null, "finish_reason": finish}]})
        }
    }

    fn usage(&self, completion: usize) -> Value {
        let prompt = self.prompt.chars().count() / 4 + 1;
        json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
    }

    /// Serialises one event the way this scenario's server would.
    fn sse(&self, data: &str) -> Vec<u8> {
        let nl = if self.scenario.kind == Kind::Crlf {
            "\r\n"
        } else {
            "\n"
        };
        let prefix = if self.scenario.kind == Kind::NoSpace {
            "data:"
        } else {
            "data: "
        };
        format!("{prefix}{data}{nl}{nl}").into_bytes()
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
                w.write(b": keep-alive\n\n").await?;
                w.write(bytes).await
            }
            _ => w.write(bytes).await,
        }
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
        if !self.stream || kind == Kind::NonStream {
            sleep_until((self.t0 + ttft + itl * pieces.len() as u32).into()).await;
            let text: String = pieces
                .iter()
                .filter_map(|p| {
                    if let Piece::Content(t) = p {
                        Some(t.as_str())
                    } else {
                        None
                    }
                })
                .collect();
            let choice = if self.chat {
                json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish})
            } else {
                json!({"index": 0, "text": text, "finish_reason": finish})
            };
            let body = json!({"id": "sim", "object": if self.chat { "chat.completion" } else { "text_completion" },
                              "model": self.model, "choices": [choice], "usage": self.usage(pieces.len())});
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
        let mut w = Chunked::start(sock, 200, "text/event-stream", &extra).await?;
        if self.chat && kind != Kind::LlamaCpp {
            // vLLM opens with a role-only chunk: not a token.
            let role = json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": self.model,
                              "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]});
            self.send(&mut w, &self.sse(&role.to_string()), &mut rng)
                .await?;
        }
        match kind {
            Kind::HugeLine => {
                w.write(b"data: {\"choices\":[{\"delta\":{\"content\":\"")
                    .await?;
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
                    w.write(b": keep-alive\n\n").await?;
                }
                return Ok(false);
            }
            Kind::Malformed => {
                sleep_until((self.t0 + ttft).into()).await;
                w.write(&self.sse("{\"choices\": [{\"delta\": {\"content\": \"Par"))
                    .await?;
                w.finish().await?;
                return Ok(false);
            }
            Kind::Endless => {
                let mut i = 0u32;
                let start = self.t0 + ttft;
                loop {
                    sleep_until((start + itl * i).into()).await;
                    let piece = Piece::Content(format!(" word{i}"));
                    w.write(&self.sse(&self.chunk(Some(&piece), None).to_string()))
                        .await?;
                    i += 1;
                    if i > 1_000_000 {
                        return Ok(false);
                    }
                }
            }
            _ => {}
        }

        let mut first = true;
        let mut offset = Duration::ZERO;
        for (i, piece) in pieces.iter().enumerate() {
            if i == 3 {
                match kind {
                    Kind::Reset => {
                        w.reset();
                        return Ok(false);
                    }
                    Kind::MidStreamError => {
                        let err = json!({"error": {"message": "CUDA error: out of memory", "type": "server_error", "code": 500}});
                        w.write(&self.sse(&err.to_string())).await?;
                        w.finish().await?;
                        return Ok(false);
                    }
                    Kind::Stall => offset = self.scenario.stall,
                    _ => {}
                }
            }
            sleep_until((self.t0 + ttft + offset + itl * i as u32).into()).await;
            let at = self
                .send(
                    &mut w,
                    &self.sse(&self.chunk(Some(piece), None).to_string()),
                    &mut rng,
                )
                .await?;
            if first {
                first = false;
                if let Some(id) = &self.request_id {
                    st.record_first_write(id, at);
                }
            }
        }
        if kind == Kind::NoDone {
            w.finish().await?;
            return Ok(false);
        }
        let mut last = self.chunk(None, Some(finish));
        if kind == Kind::LlamaCpp {
            let decode_ms = itl.as_secs_f64() * 1000.0 * pieces.len().saturating_sub(1) as f64;
            last["timings"] = json!({
                "prompt_n": self.prompt.chars().count() / 4 + 1, "prompt_ms": ttft.as_secs_f64() * 1000.0,
                "predicted_n": pieces.len(), "predicted_ms": decode_ms,
                "predicted_per_second": if decode_ms > 0.0 { (pieces.len() as f64 - 1.0) * 1000.0 / decode_ms } else { 0.0 },
            });
        }
        self.send(&mut w, &self.sse(&last.to_string()), &mut rng)
            .await?;
        if self.include_usage && kind != Kind::NoUsage {
            let u = json!({"id": "sim", "object": "chat.completion.chunk", "created": 0, "model": self.model, "choices": [], "usage": self.usage(pieces.len())});
            self.send(&mut w, &self.sse(&u.to_string()), &mut rng)
                .await?;
        }
        self.send(&mut w, &self.sse("[DONE]"), &mut rng).await?;
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
