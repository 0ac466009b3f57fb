//! Degeneration detectors over generated text, for English and Chinese alike, run over the text
//! as a reader sees it (list markers off, see [`super::lists`]): list items that cycle (one item
//! again and again, two alternating or taking turns at the end, or anywhere with their counter
//! climbing, or a block of lines coming back), a tail loop (the text ends in one unit sequence
//! repeated back to back, or in marks alone), list items that keep coming back out of order
//! within their section, and the n-gram repetition ratio seq-rep-4 of the prose with the zlib
//! compression ratio as corroboration;
//! and the shapes that hide from exact comparison of units (`shapes.rs`, `sentences.rs`).
//! `analyze` reads the answer once and runs one function per detector (`detectors.rs`); the
//! list items' detectors are in `items.rs`, the thresholds in `thresholds.rs`.
//! Answers from a fixed set (`True`, `No`, `B`) are no list items to these: an answer key
//! repeats them. Pure functions; the thresholds come from the probe. tests/it/corpus.rs measures
//! them on real answers, and what each detector adds.

mod detectors;
mod items;
mod report;
mod sentences;
mod shapes;
mod thresholds;

use super::lists;
use super::units::{intern, periodic_run, repeats, units};
pub use detectors::compression_ratio;
use detectors::Reading;
use items::item_ids;
pub use report::{Detector, Finding, Measures, Report, Tail};
pub use thresholds::Thresholds;

/// Runs every detector over `text` ([`detectors`]) and reports their measures and findings.
pub fn analyze(text: &str, t: &Thresholds) -> Report {
    let (plain, prose) = (lists::without_markers(text), lists::prose(text));
    let r = Reading::new(text, &plain, &prose);
    let (turn_items, taking_turns) = detectors::taking_turns(&r, t);
    let (recurring_item_ratio, recurring_items) = detectors::recurring_items(&r, t);
    let (template_line_ratio, template_lines) = detectors::template_lines(&r);
    let (repeated_rows, rows) = detectors::repeated_rows(&r);
    let (enumeration_repeats, enumerations) = detectors::enumerations(&r, t);
    let (ngrams, ngram_finding) = detectors::ngrams(&r, t);
    let (repeated_sentences, sentences) = detectors::repeated_sentences(&r, t);
    let (clause_ending_ratio, clause_endings) = detectors::clause_endings(&r, t);
    let (sentence_ending_ratio, sentence_endings) = detectors::sentence_endings(&r, t);
    let findings: Vec<Finding> = [
        detectors::item_cycle(&r, t),
        taking_turns,
        detectors::tail_loop(&r, t),
        detectors::word_tail(&r, t),
        recurring_items,
        template_lines,
        rows,
        enumerations,
        ngram_finding,
        detectors::passages(&r, t),
        sentences,
        clause_endings,
        sentence_endings,
    ]
    .into_iter()
    .flatten()
    .collect();
    let (n, items) = (r.ids.len(), r.items.len());
    Report {
        measures: Measures {
            score: findings
                .iter()
                .map(|f| f.share(n, items))
                .fold(ngrams.seq_rep_4.max(recurring_item_ratio), f64::max),
            units: n,
            items,
            seq_rep_4: ngrams.seq_rep_4,
            late_seq_rep_4: ngrams.late_seq_rep_4,
            recurring_item_ratio,
            compression_ratio: ngrams.compression_ratio,
            template_line_ratio,
            repeated_rows,
            clause_ending_ratio,
            repeated_sentences,
            sentence_ending_ratio,
            turn_items,
            enumeration_repeats,
        },
        findings,
    }
}

/// Whether a text still being generated already ends in a loop beyond doubt: a tail loop or a
/// cycle of list items (complete lines only) at twice the thresholds. Reading may stop there.
pub fn certain_loop(text: &str, t: &Thresholds) -> bool {
    let plain = lists::without_markers(text);
    let ids = intern(units(&plain));
    let twice = |v: usize| v.saturating_mul(2);
    let tail = repeats(twice(t.tail_min_repeats), twice(t.tail_min_units));
    let cycle = repeats(twice(t.list_min_repeats), twice(t.list_min_items));
    // The last unit may be a word still being written.
    let words = &ids[..ids.len().saturating_sub(1)];
    periodic_run(words, true, tail).is_some()
        || periodic_run(
            &item_ids(&lists::items(text, true), |i| !i.is_answer()),
            true,
            cycle,
        )
        .is_some()
}

#[cfg(test)]
mod tests;
