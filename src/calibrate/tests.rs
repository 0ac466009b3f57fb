//! Reading the server's metrics, and summarising the samples.

use super::figure::{Figure, Reading};
use super::server::*;
use super::summary::*;
use crate::result::ProbeResult;

const BEFORE: &str = "# HELP vllm:time_to_first_token_seconds x\n# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 3\nvllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.15\nvllm:time_to_first_token_seconds_count{model_name=\"m\"} 3\nvllm:inter_token_latency_seconds_sum{model_name=\"m\"} 1.0\nvllm:inter_token_latency_seconds_count{model_name=\"m\"} 100\nvllm:request_queue_time_seconds_sum{model_name=\"m\"} 0.0\nvllm:request_queue_time_seconds_count{model_name=\"m\"} 3\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 3\nvllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 1\n";
const AFTER: &str = "vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.2\nvllm:time_to_first_token_seconds_count{model_name=\"m\"} 4\nvllm:time_to_first_token_seconds_count_other 9\nvllm:inter_token_latency_seconds_sum{model_name=\"m\"} 1.2\nvllm:inter_token_latency_seconds_count{model_name=\"m\"} 120\nvllm:request_queue_time_seconds_sum{model_name=\"m\"} 0.004\nvllm:request_queue_time_seconds_count{model_name=\"m\"} 4\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 4\nvllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 1\n";

fn find(v: &[Reading], figure: Figure) -> Option<&Reading> {
    v.iter().find(|r| r.figure == figure)
}

#[test]
fn totals_sum_every_series_of_exactly_that_name() {
    assert_eq!(total(BEFORE, "vllm:request_success_total"), Some(4.0));
    assert_eq!(
        total(AFTER, "vllm:time_to_first_token_seconds_count"),
        Some(4.0)
    );
    assert_eq!(total(AFTER, "vllm:nothing"), None);
}

#[test]
fn one_request_between_scrapes_is_that_request() {
    assert_eq!(alone_histograms(BEFORE, AFTER, &VLLM), Alone::Yes);
    let v = from_histograms(BEFORE, AFTER, &VLLM);
    assert!((find(&v, Figure::Ttft).unwrap().ms - 50.0).abs() < 1e-9);
    // Twenty gaps of 10 ms: the inter-token histogram counts gaps, not requests.
    let tpot = find(&v, Figure::Tpot).unwrap();
    assert!((tpot.ms - 10.0).abs() < 1e-9);
    assert_eq!(tpot.from, "vllm:inter_token_latency_seconds");
    assert!((find(&v, Figure::Queue).unwrap().ms - 4.0).abs() < 1e-9);
    assert_eq!(find(&v, Figure::E2e), None);
}

#[test]
fn a_counter_that_moved_by_none_or_by_more_leaves_the_sample_out() {
    assert_eq!(alone_histograms(BEFORE, BEFORE, &VLLM), Alone::Uncounted);
    let busy = AFTER.replace(
        "finished_reason=\"length\",model_name=\"m\"} 1",
        "finished_reason=\"length\",model_name=\"m\"} 3",
    );
    assert_eq!(
        alone_histograms(BEFORE, &busy, &VLLM),
        Alone::Shared(Some(3.0))
    );
    // One request finished, but another's first token came meanwhile: not ours alone.
    let started = AFTER.replace(
        "vllm:time_to_first_token_seconds_count{model_name=\"m\"} 4",
        "vllm:time_to_first_token_seconds_count{model_name=\"m\"} 5",
    );
    assert_eq!(
        alone_histograms(BEFORE, &started, &VLLM),
        Alone::Shared(Some(2.0))
    );
    // No request counter: the TTFT histogram's count stands in.
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with("vllm:request_success_total"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        alone_histograms(&strip(BEFORE), &strip(AFTER), &VLLM),
        Alone::Yes
    );
}

#[test]
fn llama_counters_are_ours_when_they_hold_our_token_counts() {
    let before = "llamacpp:prompt_tokens_total 100\nllamacpp:prompt_seconds_total 1.0\nllamacpp:tokens_predicted_total 50\nllamacpp:tokens_predicted_seconds_total 2.0\n";
    let after = "llamacpp:prompt_tokens_total 145\nllamacpp:prompt_seconds_total 1.432\nllamacpp:tokens_predicted_total 75\nllamacpp:tokens_predicted_seconds_total 2.662\n";
    let mut r = ProbeResult::example();
    r.measured.reading.server_timings =
        Some(serde_json::json!({"prompt_n": 45, "predicted_n": 25}));
    assert_eq!(alone_llama(before, after, &r), Alone::Yes);
    let v = from_llama_counters(before, after);
    assert!((find(&v, Figure::Ttft).unwrap().ms - 432.0).abs() < 1e-6);
    // 662 ms over the 24 tokens after the first.
    assert!((find(&v, Figure::Tpot).unwrap().ms - 662.0 / 24.0).abs() < 1e-6);
    r.measured.reading.server_timings =
        Some(serde_json::json!({"prompt_n": 45, "predicted_n": 20}));
    assert_eq!(alone_llama(before, after, &r), Alone::Shared(None));
    assert_eq!(alone_llama(before, before, &r), Alone::Uncounted);
}

#[test]
fn medians_not_means_decide() {
    // One sample slowed by something else: the mean would read +12%, the median does not.
    let pairs = [
        (101.0, 100.0),
        (102.0, 100.0),
        (101.0, 100.0),
        (160.0, 100.0),
        (102.0, 100.0),
    ];
    let c = compare(Figure::Ttft, "x".into(), &pairs, Some(1.0));
    assert_eq!((c.ours_ms, c.theirs_ms), (102.0, 100.0));
    assert!((c.gap_ms - 2.0).abs() < 1e-9);
    assert!((c.unexplained.unwrap() - 0.01).abs() < 1e-9);
    let (agree, verdict) = verdict(&[c], 1.0, 0.05, &Tally::default());
    assert!(agree, "{verdict}");
    assert!(verdict.contains("median"), "{verdict}");
}

#[test]
fn queue_time_is_the_servers_alone() {
    let mut c = Collected::default();
    let mut r = ProbeResult::example();
    r.measured.figures.ttft_ms = Some(52.0);
    c.add(&r, from_histograms(BEFORE, AFTER, &VLLM));
    let (both, theirs) = c.summarise(1.0);
    let figures: Vec<Figure> = both.iter().map(|c| c.figure).collect();
    assert_eq!(figures, [Figure::Ttft]);
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0].figure, Figure::Queue);
    assert_eq!(theirs[0].server_figure, "vllm:request_queue_time_seconds");
    assert!((theirs[0].theirs_ms - 4.0).abs() < 1e-9);
}
