//! `otlp:` against a receiver in the test that decodes OTLP/HTTP with the official protobuf
//! definitions (`opentelemetry-proto`): the GenAI names, units, attributes and bucket
//! boundaries; cumulative counts equal to the results log; one span per failed run whose trace
//! id is the `traceparent` the sim received; and a receiver outage (503) that loses nothing
//! the queue holds.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::daemon::Daemon;
use common::services::{self, eventually, get, sample, signal};
use http_body_util::BodyExt;
use llm_canary::testing::sim::Sim;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, Metric};
use opentelemetry_proto::tonic::trace::v1::{status, Span};
use prost::Message;

const PROBE: &str = "name: p\ntargets: [good, bad]\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 32\ntimeouts: {ttft: 5s, stall: 5s, total: 20s}\nchecks: {expect: \"(?i)paris\"}\n";

/// What the receiver took, decoded, and whether it is down (answering 503).
#[derive(Default)]
struct Received {
    metrics: Mutex<Vec<ExportMetricsServiceRequest>>,
    traces: Mutex<Vec<ExportTraceServiceRequest>>,
    refused: Mutex<usize>,
    down: AtomicBool,
}

async fn receiver() -> (Arc<Received>, u16) {
    use hyper::{body::Incoming, Request, Response};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Received::default());
    let state = got.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let state = state.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let state = state.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let typ = req.headers().get("content-type").cloned();
                        let body = req.into_body().collect().await?.to_bytes();
                        assert_eq!(typ.unwrap(), "application/x-protobuf");
                        let status = if state.down.load(Ordering::SeqCst) {
                            *state.refused.lock().unwrap() += 1;
                            503
                        } else {
                            match path.as_str() {
                                "/v1/metrics" => {
                                    let m = ExportMetricsServiceRequest::decode(body).unwrap();
                                    state.metrics.lock().unwrap().push(m);
                                    200
                                }
                                "/v1/traces" => {
                                    let t = ExportTraceServiceRequest::decode(body).unwrap();
                                    state.traces.lock().unwrap().push(t);
                                    200
                                }
                                _ => 404,
                            }
                        };
                        let mut resp =
                            Response::new(http_body_util::Full::new(hyper::body::Bytes::new()));
                        *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                        Ok::<_, hyper::Error>(resp)
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    (got, port)
}

fn results(d: &Daemon) -> Vec<serde_json::Value> {
    std::fs::read_to_string(d.dir.path().join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn own(d: &Daemon, metric: &str, having: &[&str]) -> f64 {
    sample(&get(&d.url("/metrics")).await, metric, having).unwrap_or(-1.0)
}

fn attrs(kv: &[KeyValue]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|k| {
            let v = match k.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                Some(any_value::Value::IntValue(i)) => format!("int:{i}"),
                other => format!("{other:?}"),
            };
            (k.key.clone(), v)
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn find<'a>(req: &'a ExportMetricsServiceRequest, name: &str) -> Option<&'a Metric> {
    req.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .find(|m| m.name == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_spans_decode_match_the_results_log_and_survive_an_outage() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (got, otlp_port) = receiver().await;
    let port = services::free_port();
    let yaml = format!(
        "agent:\n  name: canary-otel\n  labels: {{region: test}}\n  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\n\
         otlp:\n  endpoint: http://127.0.0.1:{otlp_port}/\n  traces: true\n  interval: 250ms\n  timeout: 2s\n  success_sample_ratio: 0\n  queue: {{max_backoff: 250ms}}\n\
         targets:\n  - {{name: good, base_url: \"{}\", model: m-a, server: vllm, labels: {{cluster: c1}}}}\n  - {{name: bad, base_url: \"{}\", model: m-b, server: vllm}}\n",
        sim.base_url("healthy"),
        sim.base_url("repetition"),
    );
    let mut d = Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );
    eventually("two exports received", Duration::from_secs(40), || async {
        (got.metrics.lock().unwrap().len() >= 2).then_some(())
    })
    .await;

    // The receiver answers 503 while runs go on: the agent counts failures and queues.
    got.down.store(true, Ordering::SeqCst);
    let at_outage = results(&d).len();
    eventually(
        "four runs during the outage",
        Duration::from_secs(40),
        || async { (results(&d).len() >= at_outage + 4).then_some(()) },
    )
    .await;
    let failures = own(&d, "llm_canary_otlp_failures_total", &["metrics"]).await;
    let queued = own(&d, "llm_canary_otlp_queue_items", &["metrics"]).await;
    assert!(
        failures >= 1.0 && queued > 0.0,
        "failures {failures}, queued {queued}\n{}",
        d.log()
    );
    got.down.store(false, Ordering::SeqCst);
    eventually("the queues to drain", Duration::from_secs(60), || async {
        let m = own(&d, "llm_canary_otlp_queue_items", &["metrics"]).await;
        let t = own(&d, "llm_canary_otlp_queue_items", &["traces"]).await;
        (m == 0.0 && t <= 0.0).then_some(())
    })
    .await;
    signal(d.child.id(), "TERM");
    let child = &mut d.child;
    let code = eventually("the daemon to exit", Duration::from_secs(30), || {
        let r = child.try_wait().unwrap();
        async move { r }
    })
    .await;
    assert_eq!(code.code(), Some(0), "{}", d.log());
    assert!(*got.refused.lock().unwrap() >= 1);
    assert!(!d.log().contains("OTLP queue full"), "{}", d.log());

    let runs = results(&d);
    let metrics = got.metrics.lock().unwrap();
    let last = metrics.last().unwrap();

    // The resource: service name, the agent's name and its static labels.
    let res = attrs(
        &last.resource_metrics[0]
            .resource
            .as_ref()
            .unwrap()
            .attributes,
    );
    assert_eq!(res["service.name"], "llm-canary");
    assert_eq!(res["service.instance.id"], "canary-otel");
    assert_eq!(res["region"], "test");

    // Names, units and the conventions' bucket boundaries.
    let seconds = [
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
    ];
    let tokens = [
        1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
        4194304.0, 16777216.0, 67108864.0,
    ];
    for (name, unit, bounds) in [
        ("gen_ai.client.operation.duration", "s", &seconds[..]),
        (
            "gen_ai.client.operation.time_to_first_chunk",
            "s",
            &seconds[..],
        ),
        (
            "gen_ai.client.operation.time_per_output_chunk",
            "s",
            &seconds[..],
        ),
        ("gen_ai.client.token.usage", "{token}", &tokens[..]),
    ] {
        let m = find(last, name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(m.unit, unit, "{name}");
        let Some(metric::Data::Histogram(h)) = &m.data else {
            panic!("{name} is not a histogram")
        };
        assert_eq!(h.aggregation_temporality, 2, "{name}: cumulative");
        for p in &h.data_points {
            assert_eq!(p.explicit_bounds, bounds, "{name}");
            assert_eq!(p.bucket_counts.len(), bounds.len() + 1);
            assert_eq!(p.bucket_counts.iter().sum::<u64>(), p.count);
        }
    }

    // Cumulative counts equal the results log: runs by target and outcome, and one duration
    // per run but warm-ups.
    let mut logged: BTreeMap<(String, String), i64> = BTreeMap::new();
    for r in &runs {
        let k = (
            r["target"].as_str().unwrap().to_string(),
            r["outcome"].as_str().unwrap().to_string(),
        );
        *logged.entry(k).or_default() += 1;
    }
    let Some(metric::Data::Sum(sum)) = &find(last, "llm_canary.probe.runs").unwrap().data else {
        panic!("runs is not a sum")
    };
    assert!(sum.is_monotonic);
    let mut exported: BTreeMap<(String, String), i64> = BTreeMap::new();
    for p in &sum.data_points {
        let a = attrs(&p.attributes);
        let Some(number_data_point::Value::AsInt(n)) = p.value else {
            panic!("not an int")
        };
        exported.insert(
            (
                a["llm_canary.target"].clone(),
                a["llm_canary.outcome"].clone(),
            ),
            n,
        );
    }
    assert_eq!(exported, logged);
    assert!(
        logged.contains_key(&("bad".into(), "repetition".into())),
        "{logged:?}"
    );

    let Some(metric::Data::Histogram(dur)) =
        &find(last, "gen_ai.client.operation.duration").unwrap().data
    else {
        unreachable!()
    };
    for p in &dur.data_points {
        let a = attrs(&p.attributes);
        let target = &a["llm_canary.target"];
        let n = runs
            .iter()
            .filter(|r| r["target"] == target.as_str() && r["warmup"] == false)
            .count();
        assert_eq!(p.count as usize, n, "{target}");
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.provider.name"], "openai");
        assert_eq!(a["server.address"], "127.0.0.1");
        assert_eq!(a["server.port"], format!("int:{}", sim.addr().port()));
        match target.as_str() {
            "good" => {
                assert_eq!(a["gen_ai.request.model"], "m-a");
                assert_eq!(a["cluster"], "c1");
                assert!(!a.contains_key("error.type"), "{a:?}");
            }
            _ => assert_eq!(a["error.type"], "repetition"),
        }
    }

    // Nothing the queue held was lost: exports stamped during the outage arrived after it.
    let stamps: BTreeSet<u64> = metrics
        .iter()
        .map(|m| {
            let Some(metric::Data::Sum(s)) = &find(m, "llm_canary.probe.runs").unwrap().data else {
                unreachable!()
            };
            s.data_points[0].time_unix_nano
        })
        .collect();
    let gaps: Vec<u64> = stamps
        .iter()
        .zip(stamps.iter().skip(1))
        .map(|(a, b)| (b - a) / 1_000_000)
        .collect();
    assert!(
        gaps.iter().all(|ms| *ms < 1_000),
        "an export is missing: gaps in ms {gaps:?}"
    );

    // Spans: one per failed run (successful ones are sampled at 0), each with the trace id and
    // parent id of the traceparent the sim received for that request.
    let spans: Vec<Span> = got
        .traces
        .lock()
        .unwrap()
        .iter()
        .flat_map(|t| t.resource_spans[0].scope_spans[0].spans.clone())
        .collect();
    let failed: BTreeSet<String> = runs
        .iter()
        .filter(|r| r["outcome"] != "ok")
        .map(|r| r["trace_id"].as_str().unwrap().to_string())
        .collect();
    let traced: BTreeSet<String> = spans.iter().map(|s| hex(&s.trace_id)).collect();
    assert_eq!(traced, failed);
    let seen: BTreeMap<String, String> = sim
        .seen()
        .iter()
        .filter_map(|s| {
            Some((
                s.header("x-request-id")?.to_string(),
                s.header("traceparent")?.to_string(),
            ))
        })
        .collect();
    for s in &spans {
        let a = attrs(&s.attributes);
        let tp = &seen[&a["llm_canary.request_id"]];
        assert_eq!(
            tp,
            &format!("00-{}-{}-01", hex(&s.trace_id), hex(&s.span_id))
        );
        assert_eq!(s.name, "chat m-b");
        assert_eq!(s.kind, 3, "client");
        let st = s.status.as_ref().unwrap();
        assert_eq!(
            (st.code, st.message.as_str()),
            (status::StatusCode::Error as i32, "repetition")
        );
        assert_eq!(a["error.type"], "repetition");
        assert_eq!(a["gen_ai.request.model"], "m-b");
        let events: Vec<&str> = s.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            events,
            ["first_byte", "first_token", "first_answer_token", "finish"]
        );
        let times: Vec<u64> = s.events.iter().map(|e| e.time_unix_nano).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        assert!(s.start_time_unix_nano <= times[0] && times[3] == s.end_time_unix_nano);
    }
    println!(
        "{} runs ({} failed), {} metric exports, {} spans, {} requests refused during the outage",
        runs.len(),
        failed.len(),
        metrics.len(),
        spans.len(),
        got.refused.lock().unwrap()
    );
}
