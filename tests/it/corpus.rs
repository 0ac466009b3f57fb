//! The degeneration detectors against a labeled corpus of real answers (SmolLM2-135M on
//! llama.cpp's server, English and Chinese, regrown by scripts/regrow-corpus and labeled by
//! reading) and hand-written hard negatives (code, tables, JSON, refrains, calendars). Prints
//! precision and recall; fails on any false alarm, or below what the detectors catch today of
//! each batch (all of the first, which they were tuned on). A second reader's blind labels give
//! the agreement between readers and the figures on the answers both label alike.
//! It also measures recall with each rule left out (the detectors, with the shapes that count
//! for `lines`, `ngrams` and `morphemes` apart), prints precision and recall per batch (the
//! samples one regrow wrote, on new prompts, against those the rules were tuned on) and what
//! judging an answer costs, and fails
//! when no real answer needs `item_cycle` (a numbered list whose items cycle while the counter
//! climbs, or a list stuck on two items, is what only it sees), so a change that breaks it
//! cannot pass unnoticed. It guards the corpus's size by distinct prompts, not by samples.
//! The rules that name a broken deployment (`empty_output` for an answer with no letter,
//! `prompt_ignored`) must raise no false alarm on its real answers either.
//! `cargo nextest run --test it corpus:: --no-capture` shows the figures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use llm_canary::testing::checks::repetition::{analyze, Detector, Finding, Thresholds};

/// Every rule, by the name [`Finding::rule`] gives it: the detectors, with the shapes that
/// count for `item_cycle` (two items taking turns), `lines` (templates, table rows,
/// enumerations), `ngrams` (sentences) and `morphemes` (sentence endings) apart.
const RULES: [&str; 13] = [
    "item_cycle",
    "turns",
    "tail_loop",
    "word_tail",
    "lines",
    "template_lines",
    "table_rows",
    "enumerations",
    "ngrams",
    "passages",
    "sentences",
    "morphemes",
    "endings",
];
use serde::Deserialize;

/// The least recall on each batch: what the detectors catch of it today (all of the first,
/// which the rules were tuned on).
const RECALL_FLOORS: [(&str, f64); 7] = [
    ("first", 1.0),
    ("2026-12-01", 0.92),
    ("2026-12-01b", 0.91),
    ("2026-12-01c", 0.83),
    ("2026-12-02", 0.69),
    ("2026-12-02b", 0.74),
    ("2026-12-06", 0.81),
];
const OVERALL_FLOOR: f64 = 0.84;

/// False alarms the detectors are known to raise on healthy answers, each with why, in file
/// order. The test fails on any other, and on one of these once it is no longer raised (take it
/// off the list).
const KNOWN_FALSE_ALARMS: [(&str, &str); 3] = [
    (
        "explain-magnets-t0.7-s1",
        "`the North pole of the magnet` in sentence after sentence, each saying something else: \
         `passages` counts the six words six times; healthy to one reader, borderline to the other",
    ),
    (
        "explain-passwords-t0.7-s1",
        "every paragraph opens `Using a unique password for every website can`, each with another \
         claim: `passages` counts the six words four times; healthy to one reader, borderline to \
         the other",
    ),
    (
        "explain-seasons-t0.7-s1",
        "a sentence of 17 words said again once, four sentences later, as the explanation starts \
         over and max_tokens cuts it: `sentences` calls one repeat a loop, both readers a slip",
    ),
];

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
    /// The day a regrow wrote it; the samples without one came first, and tuned the rules.
    batch: Option<String>,
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
    // Per rule: the real degenerate answers it decided, those it alone caught, and those it
    // fired on at all.
    let mut decided: BTreeMap<&str, usize> = BTreeMap::new();
    let mut alone: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut fires: BTreeMap<&str, usize> = BTreeMap::new();
    // Per batch: (tp, fp, fn, tn).
    let mut batches: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    // What judging costs: every detector runs on every answer of every probe.
    let (mut judging, mut slowest) = (Duration::ZERO, (Duration::ZERO, 0));
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
        let start = Instant::now();
        let r = analyze(&s.text, &t);
        let took = start.elapsed();
        judging += took;
        slowest = slowest.max((took, s.text.len()));
        let m = &r.measures;
        let fired: Vec<&str> = r.findings.iter().map(Finding::rule).collect();
        if degenerate && !s.source.starts_with("hand") {
            if let Some(d) = fired.first() {
                *decided.entry(d).or_default() += 1;
            }
            if let [d] = fired[..] {
                alone.entry(d).or_default().push(&s.id);
            }
            for d in &fired {
                *fires.entry(d).or_default() += 1;
            }
        }
        let batch = batches
            .entry(s.batch.as_deref().unwrap_or("first"))
            .or_default();
        batch[match (degenerate, r.degenerate()) {
            (true, true) => 0,
            (false, true) => 1,
            (true, false) => 2,
            (false, false) => 3,
        }] += 1;
        if std::env::var_os("CORPUS_VERBOSE").is_some() {
            println!(
                "{:<34} {:<10} {:<5} {:?} score {:.2} tail {:?} cycle {:?} seq4 {:.4} late {:.4} recur {:.2} zip {:.4}",
                s.id,
                s.label.as_deref().unwrap_or_default(),
                r.degenerate(),
                r.findings,
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
                alarms.push((s.id.as_str(), r.describe().unwrap_or_default()));
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
    for (batch, [tp, fp, fn_, tn]) in &batches {
        let prompts: BTreeSet<&str> = real
            .iter()
            .filter(|s| s.batch.as_deref().unwrap_or("first") == *batch)
            .filter_map(|s| s.prompt.as_deref())
            .collect();
        println!(
            "batch {batch}: {} samples on {} prompts, precision {:.1}% recall {:.1}% (tp {tp}, fp {fp}, fn {fn_}, tn {tn})",
            tp + fp + fn_ + tn,
            prompts.len(),
            ratio(*tp, tp + fp) * 100.0,
            ratio(*tp, tp + fn_) * 100.0
        );
    }
    // Leaving a rule out loses the degenerate answers only it caught (the hand-written
    // samples are all healthy). `template_lines` and `table_rows` are the `lines` detector's
    // new shapes, measured on their own.
    for d in RULES {
        let lost = alone.get(d).map_or(&[][..], |v| &v[..]);
        println!(
            "without {d:<14} recall {:.1}% (fires on {}, decides {} real loops, alone on {}: {lost:?})",
            ratio(tp - lost.len(), tp + fn_) * 100.0,
            fires.get(d).copied().unwrap_or(0),
            decided.get(d).copied().unwrap_or(0),
            lost.len()
        );
    }
    let chars: usize = samples.iter().map(|s| s.text.len()).sum();
    println!(
        "judging: {:.0} µs per answer on average ({} bytes), the slowest {:.0} µs ({} bytes); {} build",
        judging.as_secs_f64() * 1e6 / samples.len() as f64,
        chars / samples.len(),
        slowest.0.as_secs_f64() * 1e6,
        slowest.1,
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    for m in &misses {
        println!("missed: {m}");
    }
    for (id, why) in &alarms {
        println!("false alarm: {id}: {why}");
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
    let known: Vec<&str> = KNOWN_FALSE_ALARMS.iter().map(|(id, _)| *id).collect();
    let raised: Vec<&str> = alarms.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        raised, known,
        "false alarms on healthy answers other than the known ones: {alarms:#?}"
    );
    // The bars, batch by batch. The first batch tuned the rules. The second was labelled blind
    // and later tuned on too; the third was grown on new prompts after the first rules were
    // set and labelled before any detector ran on it; later rules were written with all three
    // in view. The fourth was grown after all of them and labelled by two readers who never
    // saw a verdict; two changes followed its one false alarm and one of its misses, and the
    // rules for items taking turns and enumerations came after it too. The fifth was grown
    // after those and labelled the same way; both rules were narrowed after it, to leave
    // two-valued data, blocks, sequences and groups alone, and line templates were widened
    // (two lines in five, a letter label masked). The sixth was grown after that and labelled
    // the same way, and nothing was tuned on it; nor on the seventh, prose explanations grown
    // to see whether a long sentence said again once is a slip more often than a loop (it
    // was neither there). Each batch is held to what the detectors
    // catch of it today, so a change that loses any of it fails, while the rest of 95 % is
    // open work (docs/detectors.md lists the shapes missed).
    for (batch, floor) in RECALL_FLOORS {
        let [tp, _, fn_, _] = batches.get(batch).copied().unwrap_or_default();
        let recall = ratio(tp, tp + fn_);
        assert!(
            tp + fn_ > 0 && recall >= floor,
            "recall {recall:.3} on batch {batch} fell below {floor}: {misses:#?}"
        );
    }
    assert!(
        recall >= OVERALL_FLOOR,
        "recall {recall:.3} below {OVERALL_FLOOR} overall: {misses:#?}"
    );
    // item_cycle must decide on real answers, and be the only detector to see some of them:
    // otherwise a change that breaks it would pass here unnoticed.
    assert!(
        decided.get("item_cycle").is_some_and(|&n| n >= 1)
            && alone.get("item_cycle").is_some_and(|v| !v.is_empty()),
        "no real degenerate answer needs item_cycle: {decided:?} {alone:?}"
    );
    // A rule for a shape exact comparison misses fires on three real loops at least: no rule
    // stands on a single sample.
    for (rule, least) in [
        ("template_lines", 3),
        ("table_rows", 3),
        ("sentences", 3),
        ("morphemes", 3),
        ("endings", 3),
        ("word_tail", 3),
        ("passages", 3),
        ("turns", 3),
        ("enumerations", 3),
    ] {
        let n = fires.get(rule).copied().unwrap_or(0);
        assert!(
            n >= least,
            "{rule} fires on {n} real loops, fewer than {least}"
        );
    }
    assert_eq!(
        RULES
            .iter()
            .filter(|r| Detector::ALL.iter().any(|d| d.as_str() == **r))
            .count(),
        Detector::ALL.len(),
        "every detector is a rule"
    );
}

/// A second reader's labels for every real answer, given blind: the prompt, the sampling
/// settings, the finish reason and the text, never the first label nor any detector's verdict.
/// `borderline` where the reader could not decide.
#[derive(Debug, Deserialize)]
struct SecondLabel {
    id: String,
    label: String,
    reason: String,
}

/// The least recall on the clear cases, the answers both readers label alike: what the
/// detectors catch of them today.
const CLEAR_FLOOR: f64 = 0.85;

#[test]
fn second_reader_agreement_and_clear_cases() {
    let samples = corpus();
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus-second-reader.jsonl");
    let second: BTreeMap<String, SecondLabel> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| {
            let s: SecondLabel = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            (s.id.clone(), s)
        })
        .collect();
    let t = Thresholds::default();
    // Both readers' labels on each real answer, and the detectors' verdict.
    let mut pairs = Vec::new();
    for s in samples.iter().filter(|s| !s.source.starts_with("hand")) {
        let other = second
            .get(&s.id)
            .unwrap_or_else(|| panic!("{}: no second reader's label", s.id));
        assert!(
            matches!(
                other.label.as_str(),
                "healthy" | "degenerate" | "borderline"
            ) && !other.reason.trim().is_empty(),
            "{}: second label {:?} needs one of healthy, degenerate, borderline and a reason",
            s.id,
            other.label
        );
        let first = s.label.as_deref() == Some("degenerate");
        pairs.push((s, first, other, analyze(&s.text, &t).degenerate()));
    }
    assert_eq!(
        pairs.len(),
        second.len(),
        "second labels for answers the corpus no longer has"
    );
    let decided: Vec<_> = pairs
        .iter()
        .filter(|(_, _, o, _)| o.label != "borderline")
        .collect();
    let agree = decided
        .iter()
        .filter(|(_, f, o, _)| *f == (o.label == "degenerate"))
        .count();
    // Cohen's kappa: agreement beyond what two readers with these label rates reach by chance.
    let n = decided.len() as f64;
    let p1 = decided.iter().filter(|(_, f, _, _)| *f).count() as f64 / n;
    let p2 = decided
        .iter()
        .filter(|(_, _, o, _)| o.label == "degenerate")
        .count() as f64
        / n;
    let chance = p1 * p2 + (1.0 - p1) * (1.0 - p2);
    let observed = agree as f64 / n;
    let kappa = (observed - chance) / (1.0 - chance);
    println!(
        "second reader: {} answers, {} borderline; agrees with the first on {agree} of {} ({:.1}%), Cohen's kappa {kappa:.2}",
        pairs.len(),
        pairs.len() - decided.len(),
        decided.len(),
        observed * 100.0
    );
    let score = |rows: &[&(&Sample, bool, &SecondLabel, bool)],
                 truth: &dyn Fn(bool, &str) -> bool| {
        let mut c = [0usize; 4];
        for (_, f, o, d) in rows {
            c[match (truth(*f, &o.label), *d) {
                (true, true) => 0,
                (false, true) => 1,
                (true, false) => 2,
                (false, false) => 3,
            }] += 1;
        }
        c
    };
    let clear: Vec<_> = decided
        .iter()
        .copied()
        .filter(|(_, f, o, _)| *f == (o.label == "degenerate"))
        .collect();
    let [tp, fp, fn_, tn] = score(&clear, &|f, _| f);
    let recall = tp as f64 / (tp + fn_) as f64;
    println!(
        "clear cases (both readers agree): {} answers, precision {:.1}% recall {:.1}% (tp {tp}, fp {fp}, fn {fn_}, tn {tn})",
        clear.len(),
        tp as f64 / (tp + fp).max(1) as f64 * 100.0,
        recall * 100.0
    );
    let [tp2, fp2, fn2, tn2] = score(&decided, &|_, o| o == "degenerate");
    println!(
        "by the second reader's labels: precision {:.1}% recall {:.1}% (tp {tp2}, fp {fp2}, fn {fn2}, tn {tn2})",
        tp2 as f64 / (tp2 + fp2).max(1) as f64 * 100.0,
        tp2 as f64 / (tp2 + fn2).max(1) as f64 * 100.0
    );
    if std::env::var_os("CORPUS_VERBOSE").is_some() {
        for (s, f, o, d) in &pairs {
            if *f != (o.label == "degenerate") || o.label == "borderline" {
                println!(
                    "readers differ: {} first {} second {} (flagged {d}): {}",
                    s.id,
                    if *f { "degenerate" } else { "healthy" },
                    o.label,
                    o.reason
                );
            }
        }
    }
    let missed: Vec<&str> = clear
        .iter()
        .filter(|(_, f, _, d)| *f && !*d)
        .map(|(s, ..)| s.id.as_str())
        .collect();
    let alarms: Vec<&str> = clear
        .iter()
        .filter(|(_, f, _, d)| !*f && *d)
        .map(|(s, ..)| s.id.as_str())
        .collect();
    assert!(
        alarms
            .iter()
            .all(|id| KNOWN_FALSE_ALARMS.iter().any(|(k, _)| k == id)),
        "false alarms on answers both readers call healthy: {alarms:#?}"
    );
    assert!(
        recall >= CLEAR_FLOOR,
        "recall {recall:.3} on the clear cases fell below {CLEAR_FLOOR}: {missed:#?}"
    );
}

/// The rules that name a broken deployment rather than a bad answer, on the corpus's real
/// answers: no healthy answer is `empty_output` (no letter, digit or CJK character), and no
/// healthy answer is `prompt_ignored`. Each batch is what one server answered in one sitting,
/// every prompt at three settings, so it stands for one target's answers within the window:
/// each answer is kept as its own probe's latest, and the batch is noted twice, so every answer
/// is set beside every other (chrF is not symmetric). Prints the closest two healthy answers
/// to different prompts, the margin below the bound.
#[test]
fn deployment_rules_raise_no_false_alarm_on_the_corpus() {
    use llm_canary::testing::checks::{judge, similarity, Answer, CheckSpec};
    use llm_canary::testing::outcome::Outcome;
    use llm_canary::testing::runner::echo::{self, Echoes, Said};
    use std::sync::Arc;

    let samples: Vec<Sample> = corpus()
        .into_iter()
        .filter(|s| !s.source.starts_with("hand"))
        .collect();
    let healthy = |s: &Sample| s.label.as_deref() == Some("healthy");
    let spec = CheckSpec::default();
    let mut empty = Vec::new();
    for s in &samples {
        let j = judge(
            &spec,
            &Answer {
                text: &s.text,
                finish_reason: None,
                tool_calls: &[],
                stopped_early: false,
                show_text: false,
            },
        );
        if j.failures.iter().any(|f| f.outcome == Outcome::EmptyOutput) {
            empty.push((s.id.as_str(), s.label.as_deref()));
        }
    }
    println!("empty_output on the corpus: {empty:?}");
    assert!(
        empty.iter().all(|(_, label)| *label != Some("healthy")),
        "empty_output on healthy answers: {empty:?}"
    );

    let mut batches: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in &samples {
        batches
            .entry(s.batch.as_deref().unwrap_or("first"))
            .or_default()
            .push(s);
    }
    let start = Instant::now();
    let (mut alarms, mut flagged_loops, mut compared) = (BTreeSet::new(), BTreeSet::new(), 0);
    let mut closest = (0.0, "", "");
    for (batch, answers) in &batches {
        let mut echoes = Echoes::default();
        let texts: Vec<Arc<str>> = answers.iter().map(|s| Arc::from(s.text.as_str())).collect();
        for _ in 0..2 {
            for (s, text) in answers.iter().zip(&texts) {
                let prompt = s.prompt.as_deref().unwrap_or(&s.id);
                let said = Said {
                    target: batch,
                    probe: &s.id,
                    prompt: echo::prompt_key([prompt]),
                    answer: text,
                    at: start,
                };
                let others = echoes.keep(said);
                if let Some(e) = echo::closest(text, &others) {
                    match healthy(s) {
                        true => alarms.insert(format!(
                            "{} ~ {} ({:.3})",
                            s.id, e.other_probe, e.similarity
                        )),
                        false => flagged_loops.insert(s.id.as_str()),
                    };
                }
            }
        }
        // Every ordered pair of healthy answers to different prompts, each answer's n-grams
        // taken once.
        let kept: Vec<(&Sample, similarity::Grams)> = answers
            .iter()
            .filter(|s| healthy(s))
            .map(|s| (*s, similarity::Grams::new(&s.text)))
            .collect();
        for (a, a_grams) in &kept {
            for (b, b_grams) in kept.iter().filter(|(b, _)| b.prompt != a.prompt) {
                compared += 1;
                // Lengths that cannot beat the closest so far need no comparing.
                if similarity::bound(a_grams.chars(), b_grams.chars()) <= closest.0 {
                    continue;
                }
                let sim = a_grams.chrf(b_grams);
                if sim > closest.0 {
                    closest = (sim, a.id.as_str(), b.id.as_str());
                }
            }
        }
    }
    println!(
        "prompt_ignored on the corpus: {} healthy answers flagged, {} degenerate; the closest \
         two healthy answers to different prompts of one batch: {:.3} ({} ~ {}), of {compared} \
         pairs; bound {}",
        alarms.len(),
        flagged_loops.len(),
        closest.0,
        closest.1,
        closest.2,
        echo::MIN_SIMILARITY
    );
    assert!(
        alarms.is_empty(),
        "prompt_ignored on healthy answers: {alarms:#?}"
    );
    assert!(
        closest.0 < echo::MIN_SIMILARITY,
        "two healthy answers to different prompts are {:.3} alike: {} ~ {}",
        closest.0,
        closest.1,
        closest.2
    );
}
