//! The degeneration detectors against a labeled corpus of real answers (SmolLM2-135M on
//! llama.cpp's server, English and Chinese, regrown by scripts/regrow-corpus and labeled by
//! reading) and hand-written hard negatives (code, tables, JSON, refrains, calendars). Prints
//! precision and recall; fails below 95 % recall on degenerate answers or on any false alarm.
//! `cargo nextest run --test corpus --no-capture` shows the figures.

use std::path::Path;

use llm_canary::checks::repetition::{analyze, Thresholds};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Sample {
    id: String,
    source: String,
    lang: String,
    text: String,
    label: Option<String>,
    reason: Option<String>,
}

fn corpus() -> Vec<Sample> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

#[test]
fn detectors_on_the_labeled_corpus() {
    let samples = corpus();
    let t = Thresholds::default();
    let (mut tp, mut fp, mut fn_, mut tn) = (0, 0, 0, 0);
    let mut misses = Vec::new();
    let mut alarms = Vec::new();
    for s in &samples {
        let degenerate = match s.label.as_deref() {
            Some("degenerate") => true,
            Some("healthy") => false,
            other => panic!("{}: label {other:?}: read it and label it", s.id),
        };
        assert!(
            s.reason.as_deref().is_some_and(|r| !r.trim().is_empty()),
            "{}: a label needs its reason",
            s.id
        );
        let r = analyze(&s.text, &t);
        if std::env::var_os("CORPUS_VERBOSE").is_some() {
            println!(
                "{:<34} {:<10} {:<5} {:?}/{:?}/{:?} score {:.2} tail {:?} cycle {:?} seq4 {:.4} late {:.4} recur {:.2} zip {:.4}",
                s.id,
                s.label.as_deref().unwrap_or_default(),
                r.degenerate,
                r.detector,
                r.period,
                r.repeats,
                r.score,
                r.tail_loop_period.map(|p| (p, r.tail_loop_units)),
                r.item_cycle_period.map(|p| (p, r.item_cycle_items)),
                r.seq_rep_4,
                r.late_seq_rep_4,
                r.recurring_item_ratio,
                r.compression_ratio
            );
        }
        match (degenerate, r.degenerate) {
            (true, true) => tp += 1,
            (true, false) => {
                fn_ += 1;
                misses.push(format!("{} (score {:.2}): {:?}", s.id, r.score, s.reason));
            }
            (false, true) => {
                fp += 1;
                alarms.push(format!("{}: {}", s.id, r.describe().unwrap_or_default()));
            }
            (false, false) => tn += 1,
        }
    }
    let ratio = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
    let (precision, recall) = (ratio(tp, tp + fp), ratio(tp, tp + fn_));
    let real = samples
        .iter()
        .filter(|s| !s.source.starts_with("hand"))
        .count();
    let zh = samples.iter().filter(|s| s.lang == "zh").count();
    println!(
        "corpus: {} samples ({real} real, {} hand-written; {zh} Chinese), {} degenerate, {} healthy",
        samples.len(),
        samples.len() - real,
        tp + fn_,
        fp + tn
    );
    println!(
        "precision {:.1}% recall {:.1}% (tp {tp}, fp {fp}, fn {fn_}, tn {tn})",
        precision * 100.0,
        recall * 100.0
    );
    for m in &misses {
        println!("missed: {m}");
    }
    for a in &alarms {
        println!("false alarm: {a}");
    }
    assert!(real >= 60 && zh >= 15, "the corpus is too small");
    assert!(
        tp + fn_ >= 20,
        "too few degenerate samples to measure recall"
    );
    assert!(
        alarms.is_empty(),
        "false alarms on healthy answers: {alarms:#?}"
    );
    assert!(recall >= 0.95, "recall {recall:.3} below 0.95: {misses:#?}");
}
