//! One connection of the sim: its requests in turn, routed (`/health`, `/v1/models`,
//! `/_sim/requests`, the completions endpoints), checked against the caches a canary must
//! defeat, logged, and handed to [`Generation`] for the answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::generate::Generation;
use super::http::{self, HttpRequest};
use super::scenarios::{Kind, Scenario, CATALOG};
use super::wire::Wire;
use super::{bound, Seen, State, Timings};
use crate::listener::{Door, Tracked};

/// Accepts connections for as long as the sim runs, each on its own task.
pub(super) async fn serve(door: Door, st: Arc<State>) {
    let header_timeout = door.limits().header_timeout;
    loop {
        let (sock, slot) = door.accept().await;
        let st = st.clone();
        tokio::spawn(slot.run(connection(sock, st, header_timeout)));
    }
}

/// Keep-alive: serve requests on one connection until the client closes or a scenario breaks it.
async fn connection(
    mut sock: Tracked,
    st: Arc<State>,
    header_timeout: Duration,
) -> std::io::Result<()> {
    let _ = sock.get_ref().set_nodelay(true);
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

pub(super) fn json_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize")
}

async fn reply_json(sock: &mut Tracked, status: u16, v: &Value) -> std::io::Result<()> {
    http::respond(sock, status, "application/json", &[], &json_bytes(v)).await
}

/// The build a scenario's model lists name (`build=`), `base` by default.
fn build_of(spec: Option<&str>) -> String {
    spec.and_then(|s| Scenario::parse(s).ok())
        .map_or_else(|| "base".to_string(), |s| s.build)
}

/// Serves one request; returns whether the connection may be reused.
async fn handle(sock: &mut Tracked, req: &HttpRequest, st: &State) -> std::io::Result<bool> {
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
        ("GET", "/metrics") => {
            // The scenario in the path says whose names (and whether metrics are on at all).
            let names = match Scenario::parse(scenario_spec.as_deref().unwrap_or("healthy")) {
                Ok(s) => s.metrics,
                Err(e) => {
                    let msg = json!({"error": {"message": e, "type": "invalid_request_error"}});
                    reply_json(sock, 404, &msg).await?;
                    return Ok(true);
                }
            };
            match st.served.encode(names) {
                Some(body) => {
                    http::respond(sock, 200, "text/plain; version=0.0.4", &[], &body).await?;
                }
                // What llama.cpp's server answers without `--metrics`.
                None => {
                    let msg = json!({"error": {"code": 501, "message": "This server does not support metrics endpoint. Start it with `--metrics`", "type": "not_supported_error"}});
                    reply_json(sock, 501, &msg).await?;
                }
            }
            return Ok(true);
        }
        ("GET", "/v1/models") => {
            // The weights behind every name, as vLLM lists them (`root`); `build=` swaps them.
            let build = build_of(scenario_spec.as_deref());
            let data: Vec<Value> = CATALOG
                .iter()
                .map(|(n, _, _)| {
                    json!({"id": n, "object": "model", "owned_by": "llm-canary-sim",
                    "root": format!("/models/{build}/{n}"), "created": fastrand::u32(..)})
                })
                .collect();
            reply_json(sock, 200, &json!({"object": "list", "data": data})).await?;
            return Ok(true);
        }
        ("GET", "/api/tags") => {
            // Ollama's list: the weights' digest follows the build.
            let build = build_of(scenario_spec.as_deref());
            let digest = crate::probe::sha256_hex(&build);
            let models: Vec<Value> = CATALOG
                .iter()
                .map(|(n, _, _)| {
                    json!({"name": format!("{n}:latest"), "model": format!("{n}:latest"),
                    "digest": digest, "modified_at": "2026-01-01T00:00:00Z"})
                })
                .collect();
            reply_json(sock, 200, &json!({"models": models})).await?;
            return Ok(true);
        }
        ("GET", "/_sim/requests") => {
            let mut seen: Vec<Seen> = st
                .seen
                .lock()
                .expect("sim state lock")
                .iter()
                .cloned()
                .collect();
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
        ("POST", r) if Wire::from_route(r).is_some() => {}
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
    let wire = Wire::from_route(&route).expect("the route was matched above");
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
    // Only a scenario with warm= loads: with none, a request that took its t0 just before the
    // first one was counted must not read as arriving before the start.
    if !scenario.warm.is_zero() && t0 < first_seen + scenario.warm {
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
    let prompt = wire.prompt(&body);

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
    st.log(Seen {
        method: req.method.clone(),
        path: req.path.clone(),
        scenario: scenario.name.clone(),
        headers: req.headers.clone(),
        body: body.clone(),
        prefix_cache_hit,
        http_cache_hit,
    });
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
                abandoned: false,
            },
        );
    }
    let gen = Generation {
        wire,
        model,
        prompt,
        tool: wire.tool_name(&body),
        scenario,
        max_tokens: wire.max_tokens(&body).unwrap_or(256) as usize,
        stream: wire.stream(&body),
        include_usage: wire.sends_usage(&body),
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
    // What was served is reported on /metrics by the generation, before its last bytes go out.
    let id = gen.request_id.clone();
    let served = gen.respond(sock, st).await;
    if let (Err(e), Some(id)) = (&served, id) {
        use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
        if matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted) {
            st.record_abandoned(&id);
        }
    }
    served
}
