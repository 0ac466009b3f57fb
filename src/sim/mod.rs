//! The simulated OpenAI-compatible replica (`llm-canary sim`): chat and completions, streaming
//! and not, `/v1/models`, `/health`, with a scenario per request (see [`scenarios`]). It keeps a
//! prefix cache (keyed on prompt and `cache_salt`, bypassed by `cache_prompt: false`) and an
//! HTTP response cache (bypassed by `Cache-Control: no-cache`), so cache busting can be proven,
//! and it records every request and the instant of its first content write, so tests can check
//! what arrived and how exactly the agent measured it.

mod answers;

pub mod scenarios;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::sleep_until;

use self::scenarios::{Kind, Scenario, CATALOG};
use crate::httpd::{self as http, Chunked, HttpRequest};

/// What the sim saw of one request.
#[derive(Debug, Clone, Serialize)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub scenario: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub prefix_cache_hit: bool,
    pub http_cache_hit: bool,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        http::header(&self.headers, name)
    }
}

#[derive(Debug, Clone, Copy)]
struct Timings {
    received: Instant,
    headers: Option<Instant>,
    first_content: Option<Instant>,
}

impl Timings {
    fn ms(&self, at: Option<Instant>) -> Option<f64> {
        at.map(|a| (a - self.received).as_secs_f64() * 1000.0)
    }
}

#[derive(Default)]
struct State {
    seen: Mutex<Vec<Seen>>,
    /// Per `X-Request-Id`: when the request arrived, its headers and its first content left.
    timings: Mutex<HashMap<String, Timings>>,
    prefix_cache: Mutex<HashSet<String>>,
    http_cache: Mutex<HashSet<Vec<u8>>>,
    /// Per scenario spec: requests seen and the first one's arrival (for `every` and `warm`).
    counters: Mutex<HashMap<String, (u64, Instant)>>,
}

const MAX_SEEN: usize = 10_000;
const MAX_CACHED: usize = 10_000;

/// A long-running sim (fire drills, soaks) must not grow without bound: an over-full cache
/// starts afresh, as a real one evicts.
fn bound<T>(cache: &mut HashSet<T>) {
    if cache.len() >= MAX_CACHED {
        cache.clear();
    }
}

/// A running simulated replica; stops when dropped.
pub struct Sim {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sim {
    /// Binds `listen` (use `127.0.0.1:0` for a free port) and serves in the background.
    pub async fn start(listen: &str) -> std::io::Result<Sim> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = connection(sock, st).await;
                });
            }
        });
        Ok(Sim { addr, state, task })
    }

    /// The sim on a runtime of its own with one worker thread, so what is being measured
    /// (benchmarks, the chaos suite) shares no scheduler with it. The sim serves as long as the
    /// returned runtime lives.
    pub fn start_apart() -> std::io::Result<(tokio::runtime::Runtime, Sim)> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let sim = rt.block_on(Sim::start("127.0.0.1:0"))?;
        Ok((rt, sim))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL (ending in `/v1`) that selects `scenario`.
    pub fn base_url(&self, scenario: &str) -> String {
        format!("http://{}/s/{scenario}/v1", self.addr)
    }

    /// Every request seen so far, oldest first.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().expect("sim state lock").clone()
    }

    /// How much later the agent saw a run's first content than the sim wrote it, in ms
    /// (signed: a negative error would mean a wrong clock or stamp). `None` without both.
    pub fn first_token_error_ms(&self, r: &crate::result::ProbeResult) -> Option<f64> {
        let agent = r.timeline.as_ref()?.first_content()?;
        let server = self.first_content_write(&r.request_id)?;
        Some(if agent >= server {
            (agent - server).as_secs_f64() * 1000.0
        } else {
            -(server - agent).as_secs_f64() * 1000.0
        })
    }

    /// When the first content chunk for this `X-Request-Id` was handed to the kernel.
    pub fn first_content_write(&self, request_id: &str) -> Option<Instant> {
        self.state
            .timings
            .lock()
            .expect("sim state lock")
            .get(request_id)
            .and_then(|t| t.first_content)
    }
}

/// `llm-canary sim`: serve until Ctrl-C / SIGTERM.
pub async fn serve_forever(listen: &str) -> anyhow::Result<ExitCode> {
    let sim = Sim::start(listen)
        .await
        .map_err(|e| anyhow::anyhow!("sim: cannot listen on {listen}: {e}"))?;
    // A closed stdout (the reader went away) must not stop the server: ignore write errors.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "llm-canary sim listening on http://{}", sim.addr());
    let _ = writeln!(
        out,
        "base_url per scenario: http://{}/s/<scenario>/v1 (or model name = scenario)",
        sim.addr()
    );
    for (name, _, what) in CATALOG {
        let _ = writeln!(out, "  {name:<18} {what}");
    }
    let _ = out.flush();
    drop(out);
    crate::util::terminate_signal().await;
    Ok(ExitCode::SUCCESS)
}

/// Keep-alive: serve requests on one connection until the client closes or a scenario breaks it.
async fn connection(mut sock: TcpStream, st: Arc<State>) -> std::io::Result<()> {
    let _ = sock.set_nodelay(true);
    let mut buf = Vec::new();
    while let Some(req) = http::read_request(&mut sock, &mut buf).await? {
        let keep = handle(&mut sock, &req, &st).await?;
        if !keep
            || req
                .header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            break;
        }
    }
    Ok(())
}

fn json_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize")
}

async fn reply_json(sock: &mut TcpStream, status: u16, v: &Value) -> std::io::Result<()> {
    http::respond(sock, status, "application/json", &[], &json_bytes(v)).await
}

/// Serves one request; returns whether the connection may be reused.
async fn handle(sock: &mut TcpStream, req: &HttpRequest, st: &State) -> std::io::Result<bool> {
    let t0 = Instant::now();
    let (scenario_spec, rest) = match req.path.strip_prefix("/s/") {
        Some(r) => match r.split_once('/') {
            Some((s, rest)) => (Some(s.to_string()), format!("/{rest}")),
            None => (Some(r.to_string()), "/".into()),
        },
        None => (None, req.path.clone()),
    };
    let route = rest.split('?').next().unwrap_or_default().to_string();
    match (req.method.as_str(), route.as_str()) {
        ("GET", "/health") => {
            http::respond(sock, 200, "application/json", &[], b"{\"status\":\"ok\"}").await?;
            return Ok(true);
        }
        ("GET", "/v1/models") => {
            let data: Vec<Value> = CATALOG
                .iter()
                .map(|(n, _, _)| json!({"id": n, "object": "model", "owned_by": "llm-canary-sim"}))
                .collect();
            reply_json(sock, 200, &json!({"object": "list", "data": data})).await?;
            return Ok(true);
        }
        ("GET", "/_sim/requests") => {
            let mut seen = st.seen.lock().expect("sim state lock").clone();
            let timings = st.timings.lock().expect("sim state lock").clone();
            let seen: Vec<Value> = seen
                .iter_mut()
                .map(|s| {
                    let t = s
                        .header("x-request-id")
                        .and_then(|id| timings.get(id))
                        .copied();
                    // Over HTTP, credentials are not echoed back (tests read them in-process).
                    for (k, v) in &mut s.headers {
                        if k.eq_ignore_ascii_case("authorization") {
                            *v = "***".into();
                        }
                    }
                    let mut v = serde_json::to_value(&*s).unwrap_or_default();
                    v["server_ttfb_ms"] = json!(t.and_then(|t| t.ms(t.headers)));
                    v["server_ttft_ms"] = json!(t.and_then(|t| t.ms(t.first_content)));
                    v
                })
                .collect();
            reply_json(sock, 200, &Value::Array(seen)).await?;
            return Ok(true);
        }
        ("POST", "/v1/chat/completions") | ("POST", "/v1/completions") => {}
        _ => {
            let msg = format!("no route for {} {}", req.method, req.path);
            reply_json(
                sock,
                404,
                &json!({"error": {"message": msg, "type": "not_found"}}),
            )
            .await?;
            return Ok(true);
        }
    }
    let chat = route == "/v1/chat/completions";
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("invalid JSON body: {e}");
            reply_json(
                sock,
                400,
                &json!({"error": {"message": msg, "type": "invalid_request_error"}}),
            )
            .await?;
            return Ok(true);
        }
    };
    let model = body["model"].as_str().unwrap_or("sim").to_string();
    let spec = scenario_spec.unwrap_or_else(|| {
        if CATALOG.iter().any(|c| c.0 == model) {
            model.clone()
        } else {
            "healthy".into()
        }
    });
    let mut scenario = match Scenario::parse(&spec) {
        Ok(s) => s,
        Err(e) => {
            reply_json(
                sock,
                404,
                &json!({"error": {"message": e, "type": "invalid_request_error"}}),
            )
            .await?;
            return Ok(true);
        }
    };
    let (nth, first_seen) = {
        let mut c = st.counters.lock().expect("sim state lock");
        let e = c.entry(spec.clone()).or_insert((0, t0));
        e.0 += 1;
        *e
    };
    if t0 < first_seen + scenario.warm {
        let body = json_bytes(
            &json!({"error": {"message": "the model is still loading", "type": "server_error", "code": 503}}),
        );
        http::respond(sock, 503, "application/json", &[], &body).await?;
        return Ok(true);
    }
    if nth % scenario.every != 0 {
        scenario.kind = Kind::Healthy;
    }
    if !scenario.jitter.is_zero() {
        // Reproducible: the nth request of a scenario always gets the same extra delay.
        let mut rng = fastrand::Rng::with_seed(
            nth ^ spec
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))),
        );
        scenario.ttft += scenario.jitter.mul_f64(rng.f64());
    }
    let prompt = if chat {
        body["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter_map(|x| x["content"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    } else {
        body["prompt"].as_str().unwrap_or_default().to_string()
    };

    // The caches a canary must defeat.
    let http_cache_hit = {
        let no_cache = req
            .header("cache-control")
            .is_some_and(|v| v.contains("no-cache"));
        let mut cache = st.http_cache.lock().expect("sim state lock");
        bound(&mut cache);
        !no_cache && !cache.insert(req.body.clone())
    };
    let prefix_cache_hit = {
        let bypass = body["cache_prompt"] == json!(false);
        let key = format!(
            "{model}\u{0}{}\u{0}{prompt}",
            body["cache_salt"].as_str().unwrap_or_default()
        );
        let mut cache = st.prefix_cache.lock().expect("sim state lock");
        bound(&mut cache);
        !bypass && !cache.insert(key)
    };
    {
        let mut seen = st.seen.lock().expect("sim state lock");
        if seen.len() >= MAX_SEEN {
            seen.remove(0);
        }
        seen.push(Seen {
            method: req.method.clone(),
            path: req.path.clone(),
            scenario: scenario.name.clone(),
            headers: req.headers.clone(),
            body: body.clone(),
            prefix_cache_hit,
            http_cache_hit,
        });
    }
    if let Some(id) = req.header("x-request-id") {
        let mut m = st.timings.lock().expect("sim state lock");
        if m.len() > 100_000 {
            m.clear();
        }
        // A new request with the same id (a static header) starts its timings afresh.
        m.insert(
            id.to_string(),
            Timings {
                received: t0,
                headers: None,
                first_content: None,
            },
        );
    }
    let gen = Generation {
        chat,
        model,
        prompt,
        scenario,
        max_tokens: body["max_tokens"].as_u64().unwrap_or(256) as usize,
        stream: body["stream"].as_bool().unwrap_or(false),
        include_usage: body["stream_options"]["include_usage"]
            .as_bool()
            .unwrap_or(false),
        request_id: req.header("x-request-id").map(str::to_string),
        authorization: req.header("authorization").map(str::to_string),
        cache: if http_cache_hit {
            "http-hit"
        } else if prefix_cache_hit {
            "prefix-hit"
        } else {
            "miss"
        },
        t0,
    };
    gen.respond(sock, st).await
}

struct Generation {
    chat: bool,
    model: String,
    prompt: String,
    scenario: Scenario,
    max_tokens: usize,
    stream: bool,
    include_usage: bool,
    request_id: Option<String>,
    authorization: Option<String>,
    cache: &'static str,
    t0: Instant,
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

    async fn respond(self, sock: &mut TcpStream, st: &State) -> std::io::Result<bool> {
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
                record_first_write(st, id, Instant::now());
            }
            return Ok(true);
        }

        let mut rng = fastrand::Rng::with_seed(7);
        if let Some(id) = &self.request_id {
            record_headers(st, id, Instant::now());
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
                let until = Instant::now() + Duration::from_secs(120);
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
                    record_first_write(st, id, at);
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

fn record_first_write(st: &State, id: &str, at: Instant) {
    if let Some(t) = st.timings.lock().expect("sim state lock").get_mut(id) {
        t.first_content.get_or_insert(at);
    }
}

fn record_headers(st: &State, id: &str, at: Instant) {
    if let Some(t) = st.timings.lock().expect("sim state lock").get_mut(id) {
        t.headers.get_or_insert(at);
    }
}

/// Holds a connection open without answering, until the client gives up (bounded).
async fn hold(sock: &mut TcpStream) {
    use tokio::io::AsyncReadExt;
    let mut b = [0u8; 64];
    let _ = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(n) = sock.read(&mut b).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}
