use super::*;

#[test]
fn a_pair_is_cold_after_start_and_after_its_target_was_unreachable() {
    let mut w = Warm::default();
    let ok = Outcome::Ok;
    assert!(w.note("a", "t", ok), "first success after start");
    assert!(!w.note("a", "t", ok));
    assert!(w.note("b", "t", ok), "each probe has its own first success");
    assert!(w.note("a", "u", ok), "and each target");
    // A failure that is not about reaching the target changes nothing.
    assert!(!w.note("a", "t", Outcome::HttpError));
    assert!(!w.note("a", "t", ok));
    // Probe b finds t unreachable: a and b are both cold on t, not on u.
    assert!(!w.note("b", "t", Outcome::ConnectError));
    assert!(
        !w.note("a", "t", Outcome::Repetition),
        "only successes warm up"
    );
    assert!(w.note("a", "t", ok));
    assert!(w.note("b", "t", ok));
    assert!(!w.note("a", "u", ok));
}

fn result(probe: &str, target: &str, build: Option<&str>, out: Option<&str>) -> Measurement {
    let mut m = Measurement::example();
    (m.id.probe, m.id.target) = (probe.into(), target.into());
    m.measured.reading.system_fingerprint = build.map(str::to_string);
    m.measured.output_sha256 = out.map(str::to_string);
    m
}

#[test]
fn a_new_fingerprint_or_a_new_deterministic_output_is_a_change() {
    let mut c = Changes::default();
    let mut note = |det, m: Measurement| {
        let change = c.note(det, None, &m);
        (change.target_changed, change.output_changed)
    };
    assert_eq!(
        note(true, result("a", "t", Some("b1"), Some("x"))),
        (false, false)
    );
    assert_eq!(
        note(true, result("a", "t", Some("b1"), Some("x"))),
        (false, false)
    );
    // Another probe on the same target sees the build change too; its output is new to it.
    assert_eq!(
        note(true, result("b", "t", Some("b2"), Some("y"))),
        (true, false)
    );
    assert_eq!(
        note(true, result("a", "t", Some("b2"), Some("z"))),
        (false, true)
    );
    // No fingerprint sent (a failure): no change, and the last one is kept.
    assert_eq!(note(true, result("a", "t", None, None)), (false, false));
    assert_eq!(
        note(true, result("a", "t", Some("b2"), Some("z"))),
        (false, false)
    );
    // Outputs of sampled probes vary by design.
    assert_eq!(
        note(false, result("c", "t", Some("b2"), Some("1"))),
        (false, false)
    );
    assert_eq!(
        note(false, result("c", "t", Some("b2"), Some("2"))),
        (false, false)
    );
}

#[test]
fn a_new_model_list_entry_is_a_change_and_joins_the_fingerprint() {
    let mut c = Changes::default();
    let mut note = |id: Option<&str>| {
        let m = result("a", "t", Some("b1"), Some("x"));
        let change = c.note(true, id.map(str::to_string), &m);
        let ctx = RunContext {
            target_changed: change.target_changed,
            fingerprint: change.fingerprint,
            ..RunContext::default()
        };
        let r = ProbeResult::new(m, ctx);
        (
            r.context.fingerprint.unwrap().to_string(),
            r.context.target_changed,
        )
    };
    // Not asked yet, then the first answer: no change, the entry joins the fingerprint.
    assert_eq!(note(None), ("b1".to_string(), false));
    assert_eq!(note(Some("m1")), ("b1; models m1".to_string(), false));
    assert_eq!(note(Some("m1")), ("b1; models m1".to_string(), false));
    // New weights behind the same name and build string.
    assert_eq!(note(Some("m2")), ("b1; models m2".to_string(), true));
    assert_eq!(note(Some("m2")), ("b1; models m2".to_string(), false));
    // A run that never reached the model (no build) names none and changes nothing; the
    // next answer with a new list entry still does.
    let failed = c.note(true, Some("m3".into()), &result("a", "t", None, None));
    assert_eq!(failed, Change::default());
    let change = c.note(
        true,
        Some("m3".into()),
        &result("a", "t", Some("b1"), Some("x")),
    );
    assert_eq!(
        (
            change.fingerprint.and_then(|f| f.models).as_deref(),
            change.target_changed
        ),
        (Some("m3"), true)
    );
}

/// A config with one target per `(name, scenario, extra target keys)` on `sim`, and `probe`.
fn config(
    sim: &crate::sim::Sim,
    targets: &[(&str, &str, &str)],
    probe: &str,
) -> (tempfile::TempDir, crate::config::Config) {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = String::from("agent: {name: test}\ntargets:\n");
    for (name, scenario, extra) in targets {
        let url = sim.base_url(scenario);
        agent.push_str(&format!(
            "  - {{name: {name}, base_url: \"{url}\", model: m, {extra}}}\n"
        ));
    }
    std::fs::create_dir_all(dir.path().join("probes")).unwrap();
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    std::fs::write(dir.path().join("llm-canary.yaml"), agent).unwrap();
    std::fs::write(dir.path().join("probes/p.yaml"), probe).unwrap();
    std::fs::write(
        dir.path().join("prompts/q.txt"),
        "What is the capital of France?",
    )
    .unwrap();
    let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).unwrap();
    (dir, cfg)
}

const PROBE: &str = "name: p\nprompt: q.txt\ncache_bust: prefix\nmax_tokens: 64\n\
    timeouts: {connect: 1s, ttft: 700ms, stall: 700ms, total: 3s}\nchecks: {min_chars: 20}\n";

/// A model swapped behind an unchanged name: the answers still echo the same name and build,
/// the server's model list names new weights. The run after the list says so is a change, in
/// the result and in the metrics; a temperature-0 answer that differs is an output change.
#[tokio::test]
async fn a_new_build_behind_the_same_name_is_a_change() {
    let sim = crate::sim::Sim::start("127.0.0.1:0").await.unwrap();
    let probe = "name: p\nprompt: q.txt\ntemperature: 0\nmax_tokens: 64\n\
        timeouts: {connect: 1s, ttft: 700ms, stall: 700ms, total: 3s}\nchecks: {min_chars: 1}\n";
    let targets = [
        ("t", "healthy", "server: vllm"),
        ("next", "healthy,build=next", "server: vllm"),
        ("looping", "repetition,build=next", "server: vllm"),
    ];
    let (_dir, cfg) = config(&sim, &targets, probe);
    // One target named t, at three addresses in turn; its model is one the sim lists.
    let as_t = |i: usize| {
        let mut t = (*cfg.targets[i]).clone();
        (t.name, t.model) = ("t".into(), "healthy".into());
        Arc::new(t)
    };
    let (before, after, looping) = (as_t(0), as_t(1), as_t(2));
    let p = &cfg.probes[0];
    let runner = Runner::new(1);
    let metrics = crate::sinks::metrics::Metrics::new(&cfg);
    let run = |r: crate::result::ProbeResult| {
        metrics.record(&r, &before);
        r
    };

    let first = run(runner.run_one(p, &before).await);
    let listed = runner
        .identify(&before)
        .await
        .expect("the sim lists its models");
    let second = run(runner.run_one(p, &before).await);
    assert_eq!(
        second.judged.outcome,
        Outcome::Ok,
        "{:?}",
        second.judged.error
    );
    let fp = second.context.fingerprint.clone().unwrap().to_string();
    assert!(fp.ends_with(&format!("; models {listed}")), "{fp}");
    assert!(
        fp.starts_with(&first.context.fingerprint.as_ref().unwrap().to_string()),
        "{fp}"
    );
    assert!(!second.context.target_changed && !second.context.output_changed);

    runner
        .identify(&after)
        .await
        .expect("the sim lists its models");
    let third = run(runner.run_one(p, &after).await);
    assert!(
        third.context.target_changed,
        "{:?} after {fp}",
        third.context.fingerprint
    );
    assert!(!third.context.output_changed, "the same canned answer");
    assert_ne!(third.context.fingerprint, second.context.fingerprint);

    let fourth = run(runner.run_one(p, &looping).await);
    assert!(fourth.context.output_changed && !fourth.context.target_changed);

    let text = String::from_utf8(metrics.encode()).unwrap();
    let value = |name: &str| {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap_or("");
        line.rsplit(' ').next().unwrap_or("").to_string()
    };
    assert_eq!(value("llm_canary_target_changes_total{"), "1", "{text}");
    assert_eq!(value("llm_canary_output_changes_total{"), "1", "{text}");
    let info = text
        .lines()
        .find(|l| l.starts_with("llm_canary_target_info{"))
        .unwrap();
    assert!(
        info.contains(&format!(
            "fingerprint=\"{}\"",
            third.context.fingerprint.unwrap()
        )),
        "{info}"
    );
}

/// The model list is asked in the background, without a run waiting for it: the first run has
/// no answer yet, the answer arrives on its own, the next run carries it.
#[tokio::test]
async fn the_model_list_is_asked_in_the_background() {
    let sim = crate::sim::Sim::start("127.0.0.1:0").await.unwrap();
    let (_dir, cfg) = config(&sim, &[("t", "healthy", "server: vllm")], PROBE);
    let mut target = (*cfg.targets[0]).clone();
    target.model = "healthy".into();
    let target = Arc::new(target);
    let runner = Runner::new(1);
    let first = runner.run_one(&cfg.probes[0], &target).await;
    assert_eq!(first.context.fingerprint.unwrap().models, None);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let listed = loop {
        if let Some(id) = runner.last_identity(&target) {
            break id;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no model-list answer in 5 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    let second = runner.run_one(&cfg.probes[0], &target).await;
    assert!(
        second
            .context
            .fingerprint
            .unwrap()
            .to_string()
            .ends_with(&format!("; models {listed}")),
        "the next run carries the answer"
    );
}
