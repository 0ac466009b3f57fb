//! The content checks beyond the text's length and patterns, end to end over loopback against
//! the sim: a list that loops, JSON and its schema (`format_error`), tool calls in every flavor
//! that has them (`tool_call_error`), and stopping early on a certain loop.

use crate::common;

use std::collections::BTreeMap;

use llm_canary::testing::checks::repetition::Detector;
use llm_canary::testing::config::{self, Config};
use llm_canary::testing::outcome::Outcome;
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;

const TOOLS: &str = r#"[
  {"type": "function", "function": {
    "name": "get_weather",
    "description": "The weather in a city now.",
    "parameters": {"type": "object", "required": ["city"], "additionalProperties": false,
                   "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}}}}}
]"#;

const SCHEMA: &str = r#"{"type": "object", "required": ["city", "country", "population_millions"],
  "properties": {"city": {"type": "string"}, "country": {"type": "string"},
                 "population_millions": {"type": "integer"}}}"#;

/// A config of `targets` (name, scenario, extra target keys) and `probes` (file name, body,
/// each given `prompt: q.txt` unless it names its own).
fn setup(
    sim: &Sim,
    targets: &[(&str, &str, &str)],
    probes: &[(&str, &str)],
) -> (common::TempDir, Config) {
    let dir = common::TempDir::new("checks");
    let agent = common::agent_yaml(sim, targets);
    let mut files = vec![
        ("llm-canary.yaml".to_string(), agent),
        (
            "prompts/q.txt".into(),
            "What is the weather in Paris?".into(),
        ),
        (
            "prompts/json.txt".into(),
            "Give the capital of France as JSON. Reply with JSON only.".into(),
        ),
        ("tools/weather.json".into(), TOOLS.into()),
        ("schemas/city.json".into(), SCHEMA.into()),
    ];
    for (name, body) in probes {
        files.push((format!("probes/{name}.yaml"), body.to_string()));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    dir.write(&refs);
    let cfg = config::load(&dir.path().join("llm-canary.yaml")).unwrap_or_else(|e| panic!("{e}"));
    (dir, cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_in_every_flavor_that_has_them() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let cases = [
        ("tool-call", "ok", None),
        (
            "tool-call-none",
            "tool_call_error",
            Some("no tool call: get_weather was to be called"),
        ),
        (
            "tool-call-wrong",
            "tool_call_error",
            Some("the last tool call is to get_time, not get_weather"),
        ),
        (
            "tool-call-bad-args",
            "tool_call_error",
            Some("the arguments of get_weather do not match its schema: at /city: want string, but got number"),
        ),
    ];
    let mut names = Vec::new();
    for f in common::CHAT_FLAVORS {
        for (scenario, _, _) in cases {
            names.push((format!("{f}-{scenario}"), scenario, format!("api: {f}")));
        }
    }
    let targets: Vec<(&str, &str, &str)> = names
        .iter()
        .map(|(n, s, e)| (n.as_str(), *s, e.as_str()))
        .collect();
    let probe = "name: weather\nprompt: q.txt\nmax_tokens: 64\ntools: tools/weather.json\ntimeouts: {total: 5s}\nchecks: {tool_call: get_weather}\n";
    let (_dir, cfg) = setup(&sim, &targets, &[("weather", probe)]);
    let pairs = cfg
        .targets
        .iter()
        .map(|t| (cfg.probes[0].clone(), t.clone()))
        .collect();
    let results = std::sync::Arc::new(Runner::new(32)).run_all(pairs).await;
    let mut wrong = BTreeMap::new();
    for (r, (name, scenario, _)) in results.iter().zip(&names) {
        let (_, outcome, error) = cases.iter().find(|c| c.0 == *scenario).unwrap();
        if r.judged.outcome.as_str() != *outcome || r.judged.error.as_deref() != *error {
            wrong.insert(
                name.clone(),
                format!(
                    "{} {:?} {:?}",
                    r.judged.outcome, r.judged.failed_checks, r.judged.error
                ),
            );
        }
        // The call's first piece is the first token.
        if r.judged.outcome == Outcome::Ok {
            assert!(r.measured.figures.ttft_ms.is_some(), "{name}");
            assert_eq!(r.judged.failed_checks, vec![], "{name}");
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Each flavor sent the tools in its own shape.
    let seen = sim.seen();
    let body = |tail: &str| {
        seen.iter()
            .find(|s| s.path.ends_with(tail))
            .map(|s| s.body["tools"][0].clone())
            .unwrap()
    };
    assert_eq!(body("/chat/completions")["function"]["name"], "get_weather");
    assert_eq!(body("/api/chat")["function"]["name"], "get_weather");
    assert_eq!(body("/responses")["name"], "get_weather");
    assert_eq!(body("/responses")["type"], "function");
    assert_eq!(body("/messages")["name"], "get_weather");
    assert_eq!(body("/messages")["input_schema"]["required"][0], "city");
    let gemini = seen
        .iter()
        .find(|s| s.path.contains(":streamGenerateContent"))
        .map(|s| s.body["tools"][0]["functionDeclarations"][0].clone())
        .unwrap();
    assert_eq!(gemini["name"], "get_weather");
    assert_eq!(gemini["parametersJsonSchema"]["required"][0], "city");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_answers_and_their_schema() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let json = "name: json\nprompt: json.txt\nchecks: {json: true}\n";
    let schema = "name: schema\nprompt: json.txt\nchecks: {json_schema: schemas/city.json}\n";
    let (_dir, cfg) = setup(
        &sim,
        &[("healthy", "healthy", ""), ("broken", "json-broken", "")],
        &[("json", json), ("schema", schema)],
    );
    let runner = Runner::new(4);
    let run = |probe: &str, target: &str| {
        let p = cfg.probes.iter().find(|p| p.name == probe).unwrap().clone();
        let t = cfg.target(target).unwrap().clone();
        let runner = &runner;
        async move { runner.run_one(&p, &t).await }
    };
    let r = run("json", "healthy").await;
    assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
    let r = run("json", "broken").await;
    assert_eq!(r.judged.outcome, Outcome::FormatError);
    assert_eq!(
        r.judged.error.as_deref(),
        Some("the answer is not JSON: trailing comma at line 1 column 39")
    );
    // The sim's population is 2.1 million: a number, not the integer the schema asks for.
    let r = run("schema", "healthy").await;
    assert_eq!(r.judged.outcome, Outcome::FormatError);
    assert_eq!(
        r.judged.error.as_deref(),
        Some("the answer does not match the JSON Schema: at /population_millions: want integer, but got number")
    );
    let line: serde_json::Value = serde_json::from_str(&r.to_json_line()).unwrap();
    assert_eq!(line["outcome"], "format_error");
    assert_eq!(line["failed_checks"], serde_json::json!(["format_error"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_whose_items_cycle_is_repetition_with_its_period() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let probe = "name: list\nprompt: q.txt\nmax_tokens: 80\nchecks: {allow_truncation: true}\n";
    let (_dir, cfg) = setup(&sim, &[("list", "repetition-list", "")], &[("list", probe)]);
    let r = Runner::new(1)
        .run_one(&cfg.probes[0], &cfg.targets[0])
        .await;
    assert_eq!(
        r.judged.outcome,
        Outcome::Repetition,
        "{:?}",
        r.judged.repetition
    );
    let rep = r.judged.repetition.as_ref().unwrap();
    assert_eq!(
        rep.decided()
            .map(|f| (f.detector(), f.period().map(|p| p.0))),
        Some((Detector::ItemCycle, Some(3)))
    );
    let line: serde_json::Value = serde_json::from_str(&r.to_json_line()).unwrap();
    assert_eq!(line["repetition"]["detector"], "item_cycle");
    assert_eq!(line["stopped_early"], false);
}

/// Thresholds are the probe's own: the same looping list passes a probe that asks for far more
/// repeats and items before it calls a loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_sets_its_own_thresholds() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let strict = "name: strict\nprompt: q.txt\nmax_tokens: 80\nchecks: {allow_truncation: true}\n";
    let lenient = "name: lenient\nprompt: q.txt\nmax_tokens: 80\nchecks:\n  allow_truncation: true\n  repetition: {list_min_repeats: 50, list_min_items: 200, tail_min_repeats: 50, tail_min_units: 2000, line_ratio: 1.0, ngram_margin: 1.0, min_units: 100000, sentence_min_units: 1000, ending_min_sentences: 1000}\n";
    let (_dir, cfg) = setup(
        &sim,
        &[("list", "repetition-list", "")],
        &[("strict", strict), ("lenient", lenient)],
    );
    let runner = Runner::new(1);
    let probe = |n: &str| cfg.probes.iter().find(|p| p.name == n).unwrap();
    let r = runner.run_one(probe("strict"), &cfg.targets[0]).await;
    assert_eq!(
        r.judged.outcome,
        Outcome::Repetition,
        "{:?}",
        r.judged.repetition
    );
    let r = runner.run_one(probe("lenient"), &cfg.targets[0]).await;
    assert_eq!(
        r.judged.outcome,
        Outcome::Ok,
        "{:?} {:?}",
        r.judged.failed_checks,
        r.judged.repetition
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certain_loop_stops_the_read_and_keeps_the_figures() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    // 2,000 tokens 5 ms apart: ten seconds to read to the end, past the total timeout.
    let probe = |name: &str, stop: bool| {
        format!("name: {name}\nprompt: q.txt\nmax_tokens: 2000\ntimeouts: {{total: 4s}}\nchecks: {{allow_truncation: true, stop_on_repetition: {stop}}}\n")
    };
    let (stop, read_on) = (probe("stop", true), probe("read-on", false));
    let (_dir, cfg) = setup(
        &sim,
        &[
            ("en", "repetition,itl=5ms", ""),
            ("list", "repetition-list,itl=5ms", "api: anthropic-messages"),
        ],
        &[("stop", &stop), ("read-on", &read_on)],
    );
    let runner = Runner::new(2);
    let probe_named = |n: &str| cfg.probes.iter().find(|p| p.name == n).unwrap();
    for target in &cfg.targets {
        let r = runner.run_one(probe_named("stop"), target).await;
        assert_eq!(
            r.judged.outcome,
            Outcome::Repetition,
            "{}: {:?}",
            target.name,
            r.judged.error
        );
        assert!(r.measured.reading.stopped_early, "{}", target.name);
        assert_eq!(r.measured.reading.finish_reason, None, "{}", target.name);
        let chunks = r.measured.reading.chunks;
        assert!(
            chunks < 200,
            "{}: read {chunks} chunks before stopping",
            target.name
        );
        assert!(
            r.measured.figures.ttft_ms.is_some() && r.measured.figures.tokens_per_second.is_some(),
            "{}: {:?} {:?} {:?}",
            target.name,
            r.measured.figures,
            r.measured.output_tokens,
            r.measured.tokens_source
        );
        assert!(
            r.measured.figures.e2e_ms.unwrap() < 3000.0,
            "{}: {:?}",
            target.name,
            r.measured.figures.e2e_ms
        );
        let line: serde_json::Value = serde_json::from_str(&r.to_json_line()).unwrap();
        assert_eq!(line["stopped_early"], true);
        // The connection was dropped: the server's next writes failed, so a looping replica is
        // not kept busy to max_tokens. It notices at its next write, 5 ms on.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !sim.abandoned(&r.id.request_id) {
            assert!(
                std::time::Instant::now() < deadline,
                "{}: the server still writes to the agent",
                target.name
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    // Without the key, the same loop is read until the total timeout ends it.
    let r = runner
        .run_one(probe_named("read-on"), &cfg.targets[0])
        .await;
    assert!(!r.measured.reading.stopped_early);
    assert_eq!(
        r.judged.outcome,
        Outcome::TimeoutTotal,
        "{:?}",
        r.judged.error
    );
}
