use super::*;

fn config() -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("probes")).unwrap();
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    std::fs::write(
            dir.path().join("llm-canary.yaml"),
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m, labels: {model_version: \"7\"}}\n",
        )
        .unwrap();
    std::fs::write(dir.path().join("probes/p.yaml"), "name: p\nprompt: q.txt\n").unwrap();
    std::fs::write(dir.path().join("prompts/q.txt"), "hi").unwrap();
    let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).unwrap();
    (dir, cfg)
}

/// docs/design.md's buckets, as written there: the latency histograms start at 10 ms.
const CONTRACT_BUCKETS: &str =
    "0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.5 0.75 1 1.5 2 3 5 7.5 10 20 30 60";

#[test]
fn an_http_error_is_counted_by_its_reason_and_other_runs_without_one() {
    let sets = runs_label_sets();
    for o in Outcome::ALL {
        for r in [None, Some(HttpReason::Auth), Some(HttpReason::Overloaded)] {
            let set = &sets[runs_index(o, r)];
            assert_eq!(set[0], ("outcome", o.as_str()), "{o} {r:?}");
            match (o, r) {
                (Outcome::HttpError, Some(r)) => assert_eq!(set[1], ("reason", r.as_str())),
                (Outcome::HttpError, None) => assert_eq!(set[1].1, "server_error"),
                _ => assert_eq!(set.len(), 1),
            }
        }
    }
    let (_dir, cfg) = config();
    let m = Metrics::new(&cfg);
    let mut r = ProbeResult::example();
    r.judged.outcome = Outcome::HttpError;
    r.measured.reading.http_reason = Some(HttpReason::RateLimited);
    m.record(&r, &cfg.targets[0]);
    r.judged.outcome = Outcome::ContentFiltered;
    r.measured.reading.http_reason = None;
    m.record(&r, &cfg.targets[0]);
    let text = String::from_utf8(m.encode()).unwrap();
    let runs: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("llm_canary_probe_runs_total{"))
        .collect();
    assert_eq!(runs.len(), 2, "{text}");
    assert!(
        runs.iter().any(|l| l.contains("outcome=\"http_error\"")
            && l.contains("reason=\"rate_limited\"")
            && l.ends_with(" 1")),
        "{runs:?}"
    );
    assert!(
        runs.iter()
            .any(|l| l.contains("outcome=\"content_filtered\"") && !l.contains("reason=")),
        "{runs:?}"
    );
}

#[test]
fn answer_ttft_is_observed_apart_and_not_for_warm_ups() {
    let (_dir, cfg) = config();
    let m = Metrics::new(&cfg);
    let target = cfg.targets[0].clone();
    let mut r = ProbeResult::example();
    r.measured.figures.ttft_ms = Some(30.0);
    r.measured.figures.answer_ttft_ms = Some(640.0);
    r.measured.figures.e2e_ms = Some(900.0);
    m.record(&r, &target);
    r.context.warmup = true;
    m.record(&r, &target);
    let text = String::from_utf8(m.encode()).unwrap();
    let find =
        |prefix: &str| -> Vec<&str> { text.lines().filter(|l| l.starts_with(prefix)).collect() };
    let count = find("llm_canary_answer_ttft_seconds_count{");
    assert!(count.len() == 1 && count[0].ends_with(" 1"), "{count:?}");
    let sum = find("llm_canary_answer_ttft_seconds_sum{");
    assert!(sum[0].ends_with(" 0.64"), "{sum:?}");
    // The answer came in the 0.75 s bucket, the first token in the 0.05 s one.
    let le = |name: &str, bound: &str| {
        find(&format!("{name}_bucket{{"))
            .into_iter()
            .find(|l| l.contains(&format!("le=\"{bound}\"")))
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
    };
    assert_eq!(
        le("llm_canary_answer_ttft_seconds", "0.5").as_deref(),
        Some("0")
    );
    assert_eq!(
        le("llm_canary_answer_ttft_seconds", "0.75").as_deref(),
        Some("1")
    );
    assert_eq!(le("llm_canary_ttft_seconds", "0.01").as_deref(), Some("0"));
    assert_eq!(le("llm_canary_ttft_seconds", "0.05").as_deref(), Some("1"));
    // Every latency histogram has docs/design.md's buckets, from 0.01 s.
    for name in ["ttft", "answer_ttft", "e2e"] {
        let bounds: Vec<String> = find(&format!("llm_canary_{name}_seconds_bucket{{"))
            .iter()
            .filter_map(|l| {
                l.split("le=\"")
                    .nth(1)?
                    .split('"')
                    .next()
                    .map(str::to_string)
            })
            .filter(|b| b != "+Inf")
            .collect();
        assert_eq!(bounds.join(" "), CONTRACT_BUCKETS, "{name}");
    }
}

#[test]
fn a_build_change_shows_in_the_series() {
    let (_dir, cfg) = config();
    let m = Metrics::new(&cfg);
    let target = cfg.targets[0].clone();
    let mut r = ProbeResult::example();
    r.measured.reading.reported_model = Some("m".into());
    r.context.fingerprint = Some("build-a".into());
    m.record(&r, &target);
    r.context.fingerprint = Some("build-b".into());
    (r.context.target_changed, r.context.output_changed) = (true, true);
    m.record(&r, &target);
    let text = String::from_utf8(m.encode()).unwrap();
    let line = |name: &str| {
        text.lines()
            .filter(|l| l.starts_with(name))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        line("llm_canary_target_changes_total").ends_with(" 1"),
        "{text}"
    );
    assert!(
        line("llm_canary_output_changes_total").ends_with(" 1"),
        "{text}"
    );
    // One info series, for what the target reports now.
    let info = line("llm_canary_target_info");
    assert_eq!(info.lines().count(), 1, "{info}");
    assert!(info.contains("fingerprint=\"build-b\""), "{info}");
    assert!(info.contains("model_version=\"7\""), "{info}");
    assert!(
        line("llm_canary_target_last_change_timestamp_seconds").ends_with(" 0"),
        "{text}"
    );
}

#[test]
fn tokens_and_cost_add_up_per_pair_warm_ups_included() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("probes")).unwrap();
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    std::fs::write(
            dir.path().join("llm-canary.yaml"),
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m, price: {input: 2, output: 10}}\n  - {name: free, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
        )
        .unwrap();
    std::fs::write(dir.path().join("probes/p.yaml"), "name: p\nprompt: q.txt\n").unwrap();
    std::fs::write(dir.path().join("prompts/q.txt"), "hi").unwrap();
    let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).unwrap();
    let m = Metrics::new(&cfg);
    m.init_pair(&cfg.probes[0], &cfg.targets[1]);
    let mut r = ProbeResult::example();
    (r.measured.reading.input_tokens, r.measured.output_tokens) = (Some(1000), Some(100));
    m.record(&r, &cfg.targets[0]);
    r.context.warmup = true;
    m.record(&r, &cfg.targets[0]);
    let text = String::from_utf8(m.encode()).unwrap();
    let value = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let tokens = "llm_canary_probe_tokens_total{direction=";
    assert_eq!(
        value(&format!(
            "{tokens}\"input\",model=\"m\",probe=\"p\",target=\"t\"}}"
        )),
        Some(2000.0),
        "{text}"
    );
    assert_eq!(
        value(&format!(
            "{tokens}\"output\",model=\"m\",probe=\"p\",target=\"t\"}}"
        )),
        Some(200.0),
        "{text}"
    );
    // Twice (1000 x 2 + 100 x 10) / 1e6.
    let cost = value("llm_canary_probe_cost_total{model=\"m\",probe=\"p\",target=\"t\"}").unwrap();
    assert!((cost - 0.006).abs() < 1e-12, "{text}");
    // A target without a price counts tokens, from zero, and no cost.
    assert_eq!(
        value(&format!(
            "{tokens}\"input\",model=\"m\",probe=\"p\",target=\"free\"}}"
        )),
        Some(0.0),
        "{text}"
    );
    assert!(
        !text.contains("llm_canary_probe_cost_total{model=\"m\",probe=\"p\",target=\"free\"}"),
        "{text}"
    );
}

#[test]
fn a_budget_gone_over_sets_its_gauge() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("probes")).unwrap();
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    std::fs::write(
            dir.path().join("llm-canary.yaml"),
            "agent: {budget: {daily: 0.01}}\ntargets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m, price: {input: 2, output: 10, currency: EUR}}\n",
        )
        .unwrap();
    std::fs::write(dir.path().join("probes/p.yaml"), "name: p\nprompt: q.txt\n").unwrap();
    std::fs::write(dir.path().join("prompts/q.txt"), "hi").unwrap();
    let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).unwrap();
    let m = Metrics::new(&cfg);
    let gauge = |m: &Metrics| {
        let text = String::from_utf8(m.encode()).unwrap();
        assert!(
            !text.contains("period=\"monthly\""),
            "no monthly budget: {text}"
        );
        text.lines()
            .find(|l| l.starts_with("llm_canary_budget_exceeded{period=\"daily\"}"))
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
    };
    assert_eq!(gauge(&m).as_deref(), Some("0"));
    let mut r = ProbeResult::example();
    r.id.started_at = jiff::Timestamp::now();
    // 0.006 EUR a run: over 0.01 on the second.
    (r.measured.reading.input_tokens, r.measured.output_tokens) = (Some(1000), Some(400));
    m.record(&r, &cfg.targets[0]);
    assert_eq!(gauge(&m).as_deref(), Some("0"));
    m.record(&r, &cfg.targets[0]);
    assert_eq!(gauge(&m).as_deref(), Some("1"));
}

#[test]
fn a_warm_cache_check_run_sets_the_cache_gauges_and_stays_out_of_latency() {
    use crate::result::CachePhase;
    let (_dir, cfg) = config();
    let m = Metrics::new(&cfg);
    let lines = |m: &Metrics, name: &str| -> Vec<String> {
        String::from_utf8(m.encode())
            .unwrap()
            .lines()
            .filter(|l| l.starts_with(name))
            .map(str::to_string)
            .collect()
    };
    let mut r = ProbeResult::example();
    r.measured.figures.ttft_ms = Some(400.0);
    let cache = |phase, hit_ratio, ttft_speedup| {
        Some(crate::result::CacheRun {
            phase,
            figures: crate::result::CacheFigures {
                hit_ratio,
                ttft_speedup,
            },
        })
    };
    r.context.cache_check = cache(CachePhase::Cold, None, None);
    m.record(&r, &cfg.targets[0]);
    assert!(
        lines(&m, "llm_canary_prefix_cache").is_empty(),
        "a cold run sets neither"
    );
    r.measured.figures.ttft_ms = Some(100.0);
    r.context.cache_check = cache(CachePhase::Warm, Some(0.99), Some(4.0));
    m.record(&r, &cfg.targets[0]);
    let ratio = lines(&m, "llm_canary_prefix_cache_hit_ratio{");
    assert!(ratio.len() == 1 && ratio[0].ends_with(" 0.99"), "{ratio:?}");
    let speedup = lines(&m, "llm_canary_prefix_cache_ttft_speedup{");
    assert!(
        speedup.len() == 1 && speedup[0].ends_with(" 4"),
        "{speedup:?}"
    );
    // Only the cold run's TTFT is a user's.
    let count = lines(&m, "llm_canary_ttft_seconds_count{");
    assert!(count[0].ends_with(" 1"), "{count:?}");
    let last = lines(&m, "llm_canary_last_ttft_seconds{");
    assert!(last[0].ends_with(" 0.4"), "{last:?}");
    // A server that stops reporting a cached count leaves no ratio behind.
    r.context.cache_check = cache(CachePhase::Warm, None, Some(4.0));
    m.record(&r, &cfg.targets[0]);
    assert!(lines(&m, "llm_canary_prefix_cache_hit_ratio{").is_empty());
    assert_eq!(lines(&m, "llm_canary_prefix_cache_ttft_speedup{").len(), 1);
}

#[test]
fn a_reference_probes_similarity_is_a_gauge_and_others_have_none() {
    let (_dir, cfg) = config();
    let m = Metrics::new(&cfg);
    let lines = |name: &str| -> Vec<String> {
        String::from_utf8(m.encode())
            .unwrap()
            .lines()
            .filter(|l| l.starts_with(name))
            .map(str::to_string)
            .collect()
    };
    let mut r = ProbeResult::example();
    m.record(&r, &cfg.targets[0]);
    assert!(lines("llm_canary_answer_similarity{").is_empty());
    r.judged.similarity = Some(0.42);
    m.record(&r, &cfg.targets[0]);
    let g = lines("llm_canary_answer_similarity{");
    assert!(g.len() == 1 && g[0].ends_with(" 0.42"), "{g:?}");
}

#[test]
fn a_ladders_runs_carry_their_rung_and_other_series_none() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("probes")).unwrap();
    std::fs::write(
        dir.path().join("llm-canary.yaml"),
        "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("probes/p.yaml"),
        "name: p\nladder: {sizes: [512, 2048]}\n",
    )
    .unwrap();
    let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).unwrap();
    let (probe, target) = (&cfg.probes[0], &cfg.targets[0]);
    let m = Metrics::new(&cfg);
    m.init_pair(probe, target);
    let mut r = ProbeResult::example();
    r.measured.figures.ttft_ms = Some(100.0);
    r.id.rung = Some(crate::result::Rung {
        size: 2048,
        prompt_tokens_estimate: 2000,
    });
    r.context.prefill = Some(crate::result::Prefill {
        tokens_per_second: 3000.0,
        source: crate::result::PromptTokens::Estimate,
    });
    r.context.target_changed = true;
    m.record(&r, target);
    // A probe without a ladder, on the same registry.
    r.id.probe = "plain".into();
    (r.id.rung, r.context.prefill) = (None, None);
    m.record(&r, target);
    m.skipped("p", target);
    let text = String::from_utf8(m.encode()).unwrap();
    let has = |line: &str| text.lines().any(|l| l == line);
    for line in [
        "llm_canary_prefill_tokens_per_second{model=\"m\",probe=\"p\",rung=\"2048\",target=\"t\"} 3000",
        "llm_canary_probe_success{model=\"m\",probe=\"p\",rung=\"2048\",target=\"t\"} 1",
        // Made at zero for each rung before it ran.
        "llm_canary_probe_runs_total{model=\"m\",outcome=\"ok\",probe=\"p\",rung=\"512\",target=\"t\"} 0",
        "llm_canary_ttft_seconds_count{model=\"m\",probe=\"p\",rung=\"2048\",target=\"t\"} 1",
        // The firing's and the target's series: no rung.
        "llm_canary_skipped_runs_total{model=\"m\",probe=\"p\",target=\"t\"} 1",
        "llm_canary_target_changes_total{model=\"m\",probe=\"p\",target=\"t\"} 1",
        "llm_canary_probe_success{model=\"m\",probe=\"plain\",target=\"t\"} 1",
        "llm_canary_ttft_seconds_count{model=\"m\",probe=\"plain\",target=\"t\"} 1",
    ] {
        assert!(has(line), "{line} missing from:\n{text}");
    }
    assert!(!text.contains("rung=\"\""), "{text}");
    assert!(
        !text.contains("probe_runs_total{model=\"m\",outcome=\"ok\",probe=\"p\",target"),
        "a ladder's runs all have a rung:\n{text}"
    );
    // The pair leaves: every rung's series go with it.
    m.remove_pair(&m.pair_values("p", target));
    let text = String::from_utf8(m.encode()).unwrap();
    assert!(!text.contains("probe=\"p\""), "{text}");
    assert!(text.contains("probe=\"plain\""), "{text}");
}
