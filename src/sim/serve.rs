//! One connection of the sim: its requests in turn, each routed to one function (`/health`,
//! `/metrics`, the model lists, `/_sim/requests`, the completions endpoints, whose route picks
//! its flavor in `wire`'s registry). A completion is let in at its flavor's door, admitted by
//! its scenario (loading, `every`, jitter), looked up in the caches a canary must defeat,
//! logged, and handed to [`Generation`] for the answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::conn::Conn;
use super::generate::Generation;
use super::http::{self, respond_error, respond_json, HttpRequest};
use super::queue::Slot;
use super::scenarios::{Kind, Scenario, CATALOG};
use super::state::{Seen, State};
use super::wire::{self, Wire};
use crate::listener::Door;
use tokio_rustls::TlsAcceptor;

/// Accepts connections for as long as the sim runs, each on its own task; over TLS when `tls`
/// is given, its handshake under the header timeout.
pub(super) async fn serve(door: Door, st: Arc<State>, tls: Option<TlsAcceptor>) {
    let header_timeout = door.limits().header_timeout;
    loop {
        let (sock, slot) = door.accept().await;
        let st = st.clone();
        let tls = tls.clone();
        tokio::spawn(slot.run(async move {
            let sock = match tls {
                None => tokio_util::either::Either::Left(sock),
                Some(tls) => match tokio::time::timeout(header_timeout, tls.accept(sock)).await {
                    Ok(Ok(s)) => tokio_util::either::Either::Right(Box::new(s)),
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "sim: TLS handshake failed");
                        return Err(e);
                    }
                    Err(_) => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "no TLS handshake within the header timeout",
                        ))
                    }
                },
            };
            connection(sock, st, header_timeout).await
        }));
    }
}

/// Keep-alive: serve requests on one connection until the client closes or a scenario breaks it.
async fn connection(
    mut sock: Conn,
    st: Arc<State>,
    header_timeout: Duration,
) -> std::io::Result<()> {
    let _ = super::conn::tcp(&sock).set_nodelay(true);
    let mut buf = Vec::new();
    while let Some(req) = http::read_request(&mut sock, &mut buf, header_timeout).await? {
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

/// Where a request goes.
enum Route {
    Health,
    Metrics,
    /// vLLM's model list.
    Models,
    /// Ollama's model list.
    Tags,
    /// The sim's request log.
    Requests,
    Completion(&'static dyn Wire),
    NotFound,
}

impl Route {
    fn of(method: &str, path: &str) -> Route {
        match (method, path) {
            ("GET", "/health") => Route::Health,
            ("GET", "/metrics") => Route::Metrics,
            ("GET", "/v1/models") => Route::Models,
            ("GET", "/api/tags") => Route::Tags,
            ("GET", "/_sim/requests") => Route::Requests,
            ("POST", p) => wire::of_route(p).map_or(Route::NotFound, Route::Completion),
            _ => Route::NotFound,
        }
    }
}

/// Serves one request; returns whether the connection may be reused.
async fn handle(sock: &mut Conn, req: &HttpRequest, st: &State) -> std::io::Result<bool> {
    let t0 = Instant::now();
    // `/s/<scenario>/v1/...` chooses the scenario; without it, the model name does.
    let (scenario, rest) = match req.path.strip_prefix("/s/") {
        Some(r) => match r.split_once('/') {
            Some((s, rest)) => (Some(s), format!("/{rest}")),
            None => (Some(r), "/".into()),
        },
        None => (None, req.path.clone()),
    };
    let path = rest.split('?').next().unwrap_or_default();
    if scenario.is_none() && super::credentials::serve(sock, req, &st.issued).await? {
        return Ok(true);
    }
    match Route::of(&req.method, path) {
        Route::Health => {
            http::respond(sock, 200, "application/json", &[], b"{\"status\":\"ok\"}").await?;
        }
        Route::Metrics => metrics(sock, st, scenario).await?,
        Route::Models => models(sock, scenario).await?,
        Route::Tags => tags(sock, scenario).await?,
        Route::Requests => requests(sock, st).await?,
        Route::Completion(wire) => {
            return completion(sock, req, st, (wire, path), scenario, t0).await
        }
        Route::NotFound => {
            let msg = format!("no route for {} {}", req.method, req.path);
            respond_error(sock, 404, "not_found", &msg).await?;
        }
    }
    Ok(true)
}

/// What was served, in the names of the server the scenario plays (or none at all).
async fn metrics(sock: &mut Conn, st: &State, scenario: Option<&str>) -> std::io::Result<()> {
    let names = match Scenario::parse(scenario.unwrap_or("healthy")) {
        Ok(s) => s.metrics,
        Err(e) => return respond_error(sock, 404, "invalid_request_error", &e).await,
    };
    match st.served.encode(names) {
        Some(body) => http::respond(sock, 200, "text/plain; version=0.0.4", &[], &body).await,
        // What llama.cpp's server answers without `--metrics`.
        None => {
            let msg = json!({"error": {"code": 501, "message": "This server does not support metrics endpoint. Start it with `--metrics`", "type": "not_supported_error"}});
            respond_json(sock, 501, &[], &msg).await
        }
    }
}

/// The build a scenario's model lists name (`build=`), `base` by default.
fn build_of(scenario: Option<&str>) -> String {
    scenario
        .and_then(|s| Scenario::parse(s).ok())
        .map_or_else(|| "base".to_string(), |s| s.build)
}

/// The weights behind every name, as vLLM lists them (`root`); `build=` swaps them.
async fn models(sock: &mut Conn, scenario: Option<&str>) -> std::io::Result<()> {
    let build = build_of(scenario);
    let data: Vec<Value> = CATALOG
        .iter()
        .map(|(n, _, _)| {
            json!({"id": n, "object": "model", "owned_by": "llm-canary-sim",
            "root": format!("/models/{build}/{n}"), "created": fastrand::u32(..)})
        })
        .collect();
    respond_json(sock, 200, &[], &json!({"object": "list", "data": data})).await
}

/// Ollama's list: the weights' digest follows the build.
async fn tags(sock: &mut Conn, scenario: Option<&str>) -> std::io::Result<()> {
    let digest = crate::probe::sha256_hex(&build_of(scenario));
    let models: Vec<Value> = CATALOG
        .iter()
        .map(|(n, _, _)| {
            json!({"name": format!("{n}:latest"), "model": format!("{n}:latest"),
            "digest": digest, "modified_at": "2026-01-01T00:00:00Z"})
        })
        .collect();
    respond_json(sock, 200, &[], &json!({"models": models})).await
}

/// Every request seen, with when its headers and first content left; over HTTP, credentials
/// are not echoed back (tests read them in-process).
async fn requests(sock: &mut Conn, st: &State) -> std::io::Result<()> {
    let seen: Vec<Seen> = st
        .seen
        .lock()
        .expect("sim state lock")
        .iter()
        .cloned()
        .collect();
    let timings = st.timings.lock().expect("sim state lock").clone();
    let seen: Vec<Value> = seen
        .into_iter()
        .map(|mut s| {
            let t = s
                .header("x-request-id")
                .and_then(|id| timings.get(id))
                .copied();
            for (k, v) in &mut s.headers {
                if k.eq_ignore_ascii_case("authorization") {
                    *v = "***".into();
                }
            }
            let mut v = serde_json::to_value(&s).unwrap_or_default();
            v["server_ttfb_ms"] = json!(t.and_then(|t| t.ms(t.headers)));
            v["server_ttft_ms"] = json!(t.and_then(|t| t.ms(t.first_content)));
            v
        })
        .collect();
    respond_json(sock, 200, &[], &Value::Array(seen)).await
}

/// A completion request in any flavor (and the route it came by): let in at its flavor's door,
/// admitted by its scenario, looked up in the caches, logged, answered once it has a slot.
async fn completion(
    sock: &mut Conn,
    req: &HttpRequest,
    st: &State,
    (wire, route): (&'static dyn Wire, &str),
    scenario: Option<&str>,
    t0: Instant,
) -> std::io::Result<bool> {
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("invalid JSON body: {e}");
            respond_error(sock, 400, "invalid_request_error", &msg).await?;
            return Ok(true);
        }
    };
    if let Err(r) = wire.admit(req, &st.issued) {
        respond_json(sock, r.status, &r.headers, &r.body).await?;
        return Ok(true);
    }
    let model = wire
        .model(req, route, &body)
        .unwrap_or_else(|| "sim".to_string());
    let spec = scenario.map_or_else(|| spec_named_by(&model), str::to_string);
    let scenario = match admit(st, &spec, t0) {
        Ok(Some(s)) => s,
        Ok(None) => {
            let msg = json!({"error": {"message": "the model is still loading", "type": "server_error", "code": 503}});
            respond_json(sock, 503, &[], &msg).await?;
            return Ok(true);
        }
        Err(e) => {
            respond_error(sock, 404, "invalid_request_error", &e).await?;
            return Ok(true);
        }
    };
    let mut gen = generation(wire, req, st, body, model, scenario, t0);
    let _slot = match gen.scenario.slots {
        Some(n) => Some(take_slot(st, &spec, n, &mut gen).await),
        None => None,
    };
    // What was served is reported on /metrics by the generation, before its last bytes go out.
    let request_id = gen.request_id.clone();
    let served = gen.respond(sock, st).await;
    if let (Err(e), Some(id)) = (&served, request_id) {
        use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
        if matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted) {
            st.record_abandoned(&id);
        }
    }
    served
}

/// The scenario a request without `/s/<scenario>` plays: the one its model names, or healthy.
fn spec_named_by(model: &str) -> String {
    let named = CATALOG.iter().any(|c| c.0 == model);
    if named {
        model.to_string()
    } else {
        "healthy".into()
    }
}

/// What the request asks, read in its flavor's words: looked up in the caches a canary must
/// defeat, logged with what it hit, and its arrival recorded.
fn generation(
    wire: &'static dyn Wire,
    req: &HttpRequest,
    st: &State,
    body: Value,
    model: String,
    scenario: Scenario,
    t0: Instant,
) -> Generation {
    let prompt = wire.prompt(&body);
    let prefix_cache = scenario.kind != Kind::PrefixCacheBroken;
    let found = st.caches.look_up(req, &body, &model, &prompt, prefix_cache);
    st.log(Seen {
        method: req.method.clone(),
        path: req.path.clone(),
        scenario: scenario.name.clone(),
        headers: req.headers.clone(),
        body: body.clone(),
        prefix_cache_hit: found.prefix,
        http_cache_hit: found.http,
    });
    let request_id = req.header("x-request-id").map(str::to_string);
    if let Some(id) = &request_id {
        st.record_received(id, t0);
    }
    Generation {
        wire,
        model,
        prompt,
        tool: wire.tool_name(&body),
        scenario,
        max_tokens: wire.max_tokens(&body).unwrap_or(256) as usize,
        stream: wire.stream(&body),
        include_usage: wire.sends_usage(&body),
        request_id,
        authorization: wire.credential(req).map(str::to_string),
        priority: body["priority"].as_i64(),
        cache: found.hit(),
        t0,
    }
}

/// A busy server: the request waits for one of its `slots`, in priority order, before any
/// byte of its answer; the slot is held until the answer is written. Its first token comes a
/// prefill after it is served, not after it arrived.
async fn take_slot(st: &State, spec: &str, slots: usize, gen: &mut Generation) -> Slot {
    let slot = st
        .queues
        .enter(spec, slots, gen.priority.unwrap_or(0))
        .await;
    gen.t0 = Instant::now();
    if let Some(id) = &gen.request_id {
        st.record_slot(id, gen.t0);
    }
    slot
}

/// The scenario this request plays, counted: `Ok(None)` while a `warm=` scenario still
/// loads; healthy but for every `every`th request; its first token later by its jitter.
fn admit(st: &State, spec: &str, t0: Instant) -> Result<Option<Scenario>, String> {
    let mut scenario = Scenario::parse(spec)?;
    let (nth, first_seen) = {
        let mut c = st.counters.lock().expect("sim state lock");
        let e = c.entry(spec.to_string()).or_insert((0, t0));
        e.0 += 1;
        *e
    };
    // Only a scenario with warm= loads: with none, a request that took its t0 just before the
    // first one was counted must not read as arriving before the start.
    if !scenario.warm.is_zero() && t0 < first_seen + scenario.warm {
        return Ok(None);
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
    Ok(Some(scenario))
}
