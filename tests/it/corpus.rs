//! The degeneration detectors against a labeled corpus of real answers (SmolLM2-135M on
//! llama.cpp's server, English and Chinese, regrown by scripts/regrow-corpus and labeled by
//! reading) and hand-written hard negatives (code, tables, JSON, refrains, calendars). Prints
//! precision and recall; fails below 95 % recall on degenerate answers or on any false alarm.
//! It also measures recall with each detector left out, and fails when no real answer needs
//! `item_cycle` (a numbered list whose items cycle while the counter climbs, or a list stuck on
//! two items, is what only it sees), so a change that breaks it cannot pass unnoticed. It
//! guards the corpus's size by distinct prompts, not by samples.
//! `cargo nextest run --test it corpus:: --no-capture` shows the figures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use llm_canary::checks::repetition::{analyze, Detector, Thresholds};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Sample {
    id: String,
    source: String,
    lang: String,
    prompt: Option<String>,
    params: Option<Params>,
    text: String,
    label: Option<String>,
    reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Params {
    temperature: f64,
    seed: u64,
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
    // Per detector: the real degenerate answers it decided, and those it alone caught.
    let mut decided: BTreeMap<&str, usize> = BTreeMap::new();
    let mut alone: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
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
        let m = &r.measures;
        let fired: Vec<Detector> = r.fired().collect();
        if degenerate && !s.source.starts_with("hand") {
            if let Some(d) = fired.first() {
                *decided.entry(d.as_str()).or_default() += 1;
            }
            if let [d] = fired[..] {
                alone.entry(d.as_str()).or_default().push(&s.id);
            }
        }
        if std::env::var_os("CORPUS_VERBOSE").is_some() {
            println!(
                "{:<34} {:<10} {:<5} {:?} score {:.2} tail {:?} cycle {:?} seq4 {:.4} late {:.4} recur {:.2} zip {:.4}",
                s.id,
                s.label.as_deref().unwrap_or_default(),
                r.degenerate(),
                r.decided(),
                m.score,
                r.tail(),
                r.item_cycle(),
                m.seq_rep_4,
                m.late_seq_rep_4,
                m.recurring_item_ratio,
                m.compression_ratio
            );
        }
        match (degenerate, r.degenerate()) {
            (true, true) => tp += 1,
            (true, false) => {
                fn_ += 1;
                misses.push(format!("{} (score {:.2}): {:?}", s.id, m.score, s.reason));
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
    let real: Vec<&Sample> = samples
        .iter()
        .filter(|s| !s.source.starts_with("hand"))
        .collect();
    let prompts: BTreeSet<&str> = real.iter().filter_map(|s| s.prompt.as_deref()).collect();
    let zh_prompts: BTreeSet<&str> = real
        .iter()
        .filter(|s| s.lang == "zh")
        .filter_map(|s| s.prompt.as_deref())
        .collect();
    let mut settings: BTreeMap<String, usize> = BTreeMap::new();
    for p in real.iter().filter_map(|s| s.params.as_ref()) {
        *settings
            .entry(format!("t{} s{}", p.temperature, p.seed))
            .or_default() += 1;
    }
    let zh = samples.iter().filter(|s| s.lang == "zh").count();
    println!(
        "corpus: {} samples ({} real, {} hand-written; {zh} Chinese), {} degenerate, {} healthy",
        samples.len(),
        real.len(),
        samples.len() - real.len(),
        tp + fn_,
        fp + tn
    );
    println!(
        "real answers: {} distinct prompts ({} Chinese); per temperature and seed: {settings:?}",
        prompts.len(),
        zh_prompts.len()
    );
    println!(
        "precision {:.1}% recall {:.1}% (tp {tp}, fp {fp}, fn {fn_}, tn {tn})",
        precision * 100.0,
        recall * 100.0
    );
    // Leaving a detector out loses the degenerate answers only it caught (the hand-written
    // samples are all healthy).
    for d in Detector::ALL {
        let lost = alone.get(d.as_str()).map_or(&[][..], |v| &v[..]);
        println!(
            "without {:<10} recall {:.1}% (decides {} real loops, alone on {}: {lost:?})",
            d.as_str(),
            ratio(tp - lost.len(), tp + fn_) * 100.0,
            decided.get(d.as_str()).copied().unwrap_or(0),
            lost.len()
        );
    }
    for m in &misses {
        println!("missed: {m}");
    }
    for a in &alarms {
        println!("false alarm: {a}");
    }
    assert!(
        prompts.len() >= 60 && zh_prompts.len() >= 15 && zh >= 15,
        "the corpus is too small: {} prompts ({} Chinese)",
        prompts.len(),
        zh_prompts.len()
    );
    assert!(
        tp + fn_ >= 20,
        "too few degenerate samples to measure recall"
    );
    assert!(
        alarms.is_empty(),
        "false alarms on healthy answers: {alarms:#?}"
    );
    assert!(recall >= 0.95, "recall {recall:.3} below 0.95: {misses:#?}");
    // item_cycle must decide on real answers, and be the only detector to see some of them:
    // otherwise a change that breaks it would pass here unnoticed.
    assert!(
        decided.get("item_cycle").is_some_and(|&n| n >= 1)
            && alone.get("item_cycle").is_some_and(|v| !v.is_empty()),
        "no real degenerate answer needs item_cycle: {decided:?} {alone:?}"
    );
}
