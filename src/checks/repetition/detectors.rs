//! One function per detector: what it measures of a [`Reading`] of the answer, and its finding
//! when the measure passes its threshold. [`super::analyze`] runs them all and keeps their
//! findings in this order.

use std::collections::HashSet;

use super::items::{self, recurring_ratio};
use super::report::{share, Finding, Tail};
use super::sentences::{self, ENDING_SHARE};
use super::shapes::{self, MIN_CLAUSES};
use super::thresholds::Thresholds;
use crate::checks::lists::{self, Item};
use crate::checks::units::{intern, periodic_run, units};

/// The share of an answer's lines one template must make up to be a loop: two in five, so that
/// a template taking turns with empty labels (`Day 3:`, `• Wednesday:`, `Day 4:`...) or coming
/// after a few lines that differ counts. A label with content under it heads that content and
/// is not counted ([`shapes::template_lines`]): a plan by week is no loop.
const TEMPLATE_SHARE: f64 = 0.4;

/// The fewest lines one template with a climbing counter must take for a loop: eight, where
/// a list needs six items to cycle (`千二年 (1922-1923)` on eight lines).
const TEMPLATE_MIN_LINES: usize = 8;

/// How far into a third saying a long passage must be to count as a loop.
const PASSAGE_RESTART: usize = 4;

/// The answer read the ways the detectors need it, once: the text as a reader sees it (list
/// markers off) in units, its prose (code blocks left out) in units, and its list items.
pub(super) struct Reading<'a> {
    text: &'a str,
    prose: &'a str,
    words: Vec<&'a str>,
    /// `words` as ids, equal units alike.
    pub(super) ids: Vec<u32>,
    prose_units: Vec<&'a str>,
    prose_ids: Vec<u32>,
    pub(super) items: Vec<Item>,
    /// The templates of the list items' lines ([`shapes::templates`]).
    templates: Vec<String>,
}

impl<'a> Reading<'a> {
    /// `plain` is `text` without list markers, `prose` its prose ([`lists`]).
    pub(super) fn new(text: &'a str, plain: &'a str, prose: &'a str) -> Self {
        let words = units(plain);
        let ids = intern(&words);
        let prose_units = units(prose);
        let prose_ids = intern(&prose_units);
        let items = lists::items(text, false);
        let templates = shapes::templates(&items);
        Reading {
            text,
            prose,
            words,
            ids,
            prose_units,
            prose_ids,
            items,
            templates,
        }
    }
}

/// List items that cycle: a period of items back to back.
pub(super) fn item_cycle(r: &Reading, t: &Thresholds) -> Option<Finding> {
    items::item_cycle(&r.items, t).map(|(period, items)| Finding::ItemCycle { period, items })
}

/// Items taking turns (two alternating, or at the end): how many take part.
pub(super) fn taking_turns(r: &Reading, t: &Thresholds) -> (usize, Option<Finding>) {
    let items = items::taking_turns(&r.items, &r.templates, t.list_min_repeats, t.list_min_items);
    (items, (items > 0).then_some(Finding::TakingTurns { items }))
}

/// The text ends in one unit sequence repeated back to back, or in marks alone.
pub(super) fn tail_loop(r: &Reading, t: &Thresholds) -> Option<Finding> {
    let n = r.ids.len();
    let looping = |p: usize, covered: usize| {
        // A long passage said twice and begun a third time is a loop cut short; a few units
        // into the third, so a shared last word or full stop does not count as its start.
        let passage = p >= t.tail_min_units && covered >= 2 * p + PASSAGE_RESTART;
        covered >= t.tail_min_units && (covered / p >= t.tail_min_repeats || passage)
    };
    // `max_tokens` may cut the last word in half: the loop then ends one unit earlier.
    let tail = periodic_run(&r.ids, true, looping)
        .or_else(|| periodic_run(&r.ids[..n.saturating_sub(1)], true, looping));
    // A text that ends in marks alone (`；；；`, `－－！－！！`, emoji) says nothing more, in
    // whatever order they come. Its prose: a table drawn in a code block is no such end.
    let marks = r
        .prose_units
        .iter()
        .rev()
        .take_while(|u| !u.chars().any(char::is_alphanumeric))
        .count();
    let marks = (marks >= t.tail_min_units).then_some(marks);
    tail.map(|(period, _, units)| Tail::Repeated { period, units })
        .or(marks.map(|units| Tail::Marks { units }))
        .map(Finding::TailLoop)
}

/// Words alone, whatever marks lie between them (`B2B！B2B：B2B；`): one repeat more than a
/// tail loop of units needs, over two fifths of its units.
pub(super) fn word_tail(r: &Reading, t: &Thresholds) -> Option<Finding> {
    shapes::word_tail(
        &r.words,
        t.tail_min_repeats + 1,
        (2 * t.tail_min_units).div_ceil(5),
    )
    .map(|(period, words)| Finding::WordTail { period, words })
}

/// List items that keep coming back within their section, in any order: their share.
pub(super) fn recurring_items(r: &Reading, t: &Thresholds) -> (f64, Option<Finding>) {
    let ratio = recurring_ratio(&r.items, t.list_min_repeats, t.list_min_items);
    let found = (ratio >= t.recurring_item_ratio).then_some(Finding::RecurringItems { ratio });
    (ratio, found)
}

/// A template said on eight lines or more, and on two in five of the answer's: the share of
/// lines it takes.
pub(super) fn template_lines(r: &Reading) -> (f64, Option<Finding>) {
    let (lines, _) = shapes::template_lines(&r.items, &r.templates);
    // A counter needs three lines at least to be seen climbing.
    let ratio = if lines >= 3 {
        share(lines, r.items.len())
    } else {
        0.0
    };
    let found = (lines >= TEMPLATE_MIN_LINES && ratio >= TEMPLATE_SHARE).then_some(
        Finding::TemplateLines {
            lines,
            items: r.items.len(),
        },
    );
    (ratio, found)
}

/// Table rows said again: how many. One row said again once is a slip, as one list item said
/// twice is.
pub(super) fn repeated_rows(r: &Reading) -> (usize, Option<Finding>) {
    let (repeated, rows) = shapes::repeated_rows(r.prose);
    let found = (repeated >= 2).then_some(Finding::RepeatedRows { repeated, rows });
    (repeated, found)
}

/// Items named again and again on their line, as many mentions as a list needs items to
/// cycle: how many mentions.
pub(super) fn enumerations(r: &Reading, t: &Thresholds) -> (usize, Option<Finding>) {
    let (mentions, items) = shapes::enumerations(r.prose, t.list_min_repeats);
    let found =
        (mentions >= t.list_min_items).then_some(Finding::EnumerationRepeats { mentions, items });
    (mentions, found)
}

/// The n-gram detector's measures of the prose.
pub(super) struct Ngrams {
    pub(super) seq_rep_4: f64,
    /// seq-rep-4 of the prose's second half.
    pub(super) late_seq_rep_4: f64,
    pub(super) compression_ratio: f64,
}

/// The prose repeats its 4-grams more than it compresses: it says more than it carries news.
pub(super) fn ngrams(r: &Reading, t: &Thresholds) -> (Ngrams, Option<Finding>) {
    let m = r.prose_ids.len();
    let long_enough = m >= t.min_units;
    let (whole, late) = if long_enough {
        (seq_rep_4(&r.prose_ids), seq_rep_4(&r.prose_ids[m / 2..]))
    } else {
        (0.0, 0.0)
    };
    let compression_ratio = compression_ratio(r.prose);
    let most = whole.max(late);
    let found =
        (long_enough && most - compression_ratio >= t.ngram_margin).then_some(Finding::Ngrams {
            seq_rep_4: most,
            compression_ratio,
        });
    let measures = Ngrams {
        seq_rep_4: whole,
        late_seq_rep_4: late,
        compression_ratio,
    };
    (measures, found)
}

/// Paragraphs of prose whose phrases come back: runs of four words covering a share of them,
/// or one phrase of six words said again and again.
pub(super) fn passages(r: &Reading, t: &Thresholds) -> Option<Finding> {
    let (ratio, phrase_repeats) = shapes::passages(r.prose, &r.prose_units, t.min_units);
    (ratio >= t.passage_ratio || phrase_repeats >= t.phrase_min_repeats).then_some(
        Finding::Passages {
            ratio,
            // Named when it alone fired.
            phrase: (ratio < t.passage_ratio).then_some(phrase_repeats),
        },
    )
}

/// A sentence of prose said word for word a second time: how many are.
pub(super) fn repeated_sentences(r: &Reading, t: &Thresholds) -> (usize, Option<Finding>) {
    let (repeated, sentences) = sentences::repeated_sentences(r.text, t.sentence_min_units);
    let found = (repeated >= 1).then_some(Finding::RepeatedSentences {
        repeated,
        sentences,
    });
    (repeated, found)
}

/// Clauses that end alike: their share.
pub(super) fn clause_endings(r: &Reading, t: &Thresholds) -> (f64, Option<Finding>) {
    let (ratio, clauses) = shapes::clause_endings(r.prose);
    let found = (clauses >= MIN_CLAUSES && ratio >= t.recurring_item_ratio)
        .then_some(Finding::ClauseEndings { ratio, clauses });
    (ratio, found)
}

/// Sentences that end in the same last four words: their share.
pub(super) fn sentence_endings(r: &Reading, t: &Thresholds) -> (f64, Option<Finding>) {
    let (alike, ended) = sentences::endings(r.text);
    // One sentence ends alike with itself: the share says something from two on.
    let ratio = if alike >= 2 { share(alike, ended) } else { 0.0 };
    let found = (alike >= t.ending_min_sentences && ratio >= ENDING_SHARE).then_some(
        Finding::SentenceEndings {
            alike,
            sentences: ended,
        },
    );
    (ratio, found)
}

/// The share of 4-grams that repeat an earlier one.
fn seq_rep_4(ids: &[u32]) -> f64 {
    if ids.len() < 4 {
        return 0.0;
    }
    let grams: Vec<&[u32]> = ids.windows(4).collect();
    let unique: HashSet<&[u32]> = grams.iter().copied().collect();
    1.0 - unique.len() as f64 / grams.len() as f64
}

/// How much zlib packs the text: packed bytes over plain bytes (1 for an empty text).
pub fn compression_ratio(text: &str) -> f64 {
    if text.is_empty() {
        return 1.0;
    }
    let packed = miniz_oxide::deflate::compress_to_vec_zlib(text.as_bytes(), 6);
    packed.len() as f64 / text.len() as f64
}
