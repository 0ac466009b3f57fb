//! Degeneration detectors over generated text, for English and Chinese alike, run over the text
//! as a reader sees it (list markers off, see [`super::lists`]): list items that cycle (one item
//! again and again, two alternating or taking turns at the end, or anywhere with their counter
//! climbing, or a block of lines coming back), a tail loop (the text ends in one unit sequence
//! repeated back to back, or in marks alone), list items that keep coming back out of order
//! within their section, and the n-gram repetition ratio seq-rep-4 of the prose with the zlib
//! compression ratio as corroboration;
//! and the shapes that hide from exact comparison of units (`shapes.rs`, `sentences.rs`).
//! Answers from a fixed set (`True`, `No`, `B`) are no list items to these: an answer key
//! repeats them. Pure functions; the thresholds come from the probe. tests/it/corpus.rs measures
//! them on real answers, and what each detector adds.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

mod detectors;
mod report;
mod sentences;
mod shapes;

use super::lists::{self, Item};
pub use super::units::units;
use super::units::{intern, periodic_run, repeats};
use detectors::Reading;
pub use report::{Detector, Finding, Measures, Report, Tail};

/// Thresholds of the repetition check. The defaults flag real loops and leave normal answers,
/// lists whose items differ, counting, tables, code and refrains alone (tests/it/corpus.rs).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// A tail loop needs at least this many back-to-back repeats of its period (a period at
    /// least `tail_min_units` long, a passage said again, needs two and the start of a third)...
    pub tail_min_repeats: usize,
    /// ...covering at least this many units. A text that ends in this many units of
    /// punctuation and symbols alone (`；；；`, `－！－－！`, emoji), in any order, loops too.
    pub tail_min_units: usize,
    /// List items cycle when a period of one or more items comes back to back this often...
    pub list_min_repeats: usize,
    /// ...over at least this many items (short items count: `Apple` is one).
    pub list_min_items: usize,
    /// The n-gram detector fires when seq-rep-4 (the share of 4-grams that repeat an earlier
    /// one, over the whole text or its second half, whichever is higher) exceeds the zlib
    /// compression ratio by this much: the text repeats itself more than it carries news.
    /// Refrains and structured text (JSON, tables) compress well but repeat less.
    pub ngram_margin: f64,
    /// Share of a list's items (lines with a marker, at least `list_min_items` of them) that
    /// come back `list_min_repeats` times or more within their section, in any order
    /// (`line_ratio` in the probe file).
    #[serde(rename = "line_ratio")]
    pub recurring_item_ratio: f64,
    /// The n-gram measures apply only to texts whose prose (code blocks left out) has at least
    /// this many units.
    pub min_units: usize,
    /// A sentence of prose with at least this many words (or CJK characters), ended by a full
    /// stop of its own and said word for word again, is a loop: a refrain or a chorus line is
    /// shorter, and repeats without a full stop.
    pub sentence_min_units: usize,
    /// Sentences that end in the same last four words, at least this many and at least two
    /// fifths of the answer's sentences, are a loop (`..., which is a must-do in Paris.`).
    pub ending_min_sentences: usize,
    /// In paragraphs of prose (lines of 40 words or CJK characters on average), runs of four
    /// words said three times or more that cover this share of the words are a loop: a model
    /// stuck on a phrase says it again in every new sentence.
    pub passage_ratio: f64,
    /// In paragraphs of prose (lines of 30 words or more on average), a phrase of six words
    /// said this many times is a loop.
    pub phrase_min_repeats: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            tail_min_repeats: 3,
            tail_min_units: 20,
            list_min_repeats: 3,
            list_min_items: 6,
            ngram_margin: 0.12,
            recurring_item_ratio: 0.5,
            min_units: 40,
            sentence_min_units: 8,
            ending_min_sentences: 4,
            passage_ratio: 0.5,
            phrase_min_repeats: 4,
        }
    }
}

fn seq_rep_4(ids: &[u32]) -> f64 {
    if ids.len() < 4 {
        return 0.0;
    }
    let grams: Vec<&[u32]> = ids.windows(4).collect();
    let unique: HashSet<&[u32]> = grams.iter().copied().collect();
    1.0 - unique.len() as f64 / grams.len() as f64
}

/// The share of list items whose text comes back at least `times` times within its section
/// (the lines between two lines without a marker, such as `Monday` or `Ingredients:`), over
/// lists of at least `min_items`. A schedule or a checklist may give each day the same tasks;
/// a model stuck on a few items repeats them where it is. Refrains and choruses are lines, not
/// list items: they do not count, nor do answers (`True`, `No`), which an answer key repeats by
/// nature.
fn recurring_ratio(items: &[Item], times: usize, min_items: usize) -> f64 {
    let mut section = 0;
    let listed: Vec<(usize, &str)> = items
        .iter()
        .filter_map(|i| {
            // A line without a marker, or a heading (`### Monday`), starts a section.
            section += usize::from(!i.listed || i.heading);
            (i.listed && !i.heading && !i.is_answer()).then_some((section, i.text.as_str()))
        })
        .collect();
    if listed.len() < min_items.max(1) {
        return 0.0;
    }
    let mut counts: HashMap<(usize, &str), usize> = HashMap::new();
    for &i in &listed {
        *counts.entry(i).or_default() += 1;
    }
    let recurring = listed.iter().filter(|i| counts[*i] >= times).count();
    recurring as f64 / listed.len() as f64
}

pub fn compression_ratio(text: &str) -> f64 {
    if text.is_empty() {
        return 1.0;
    }
    let packed = miniz_oxide::deflate::compress_to_vec_zlib(text.as_bytes(), 6);
    packed.len() as f64 / text.len() as f64
}

/// Each item as a small number, in order of first appearance, for the items `counts` keeps;
/// every other item gets a number of its own, so it never comes back.
fn item_ids(items: &[Item], counts: impl Fn(&Item) -> bool) -> Vec<u32> {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            if counts(item) {
                let next = ids.len() as u32;
                *ids.entry(item.text.as_str()).or_insert(next)
            } else {
                u32::MAX - i as u32
            }
        })
        .collect()
}

/// How many items at the end of `ids` take turns between two values, in any order, each at
/// least `min_repeats` times: a list stuck on two items (`Zimbabwe`, `Yemen`, `Zimbabwe`...).
fn two_at_the_end(ids: &[u32], min_repeats: usize) -> Option<usize> {
    let mut seen: Vec<(u32, usize)> = Vec::with_capacity(2);
    let mut len = 0;
    for &id in ids.iter().rev() {
        if let Some((_, n)) = seen.iter_mut().find(|(s, _)| *s == id) {
            *n += 1;
        } else if seen.len() < 2 {
            seen.push((id, 1));
        } else {
            break;
        }
        len += 1;
    }
    (seen.len() == 2 && seen.iter().all(|&(_, n)| n >= min_repeats)).then_some(len)
}

/// A cycle of items, as `(period, items covered)`. Anywhere among list items (lines with a
/// marker: the counter climbs while the items come back); among other lines only where it
/// ends the text, since lines without markers that repeat and then stop are code or a refrain,
/// and a model stuck in a loop does not get out of it. At the end, two items coming back in any
/// order count as a cycle of two. Answers (`True`, `B`) never count: an answer key repeats them.
fn item_cycle(items: &[Item], t: &Thresholds) -> Option<(usize, usize)> {
    let accept = repeats(t.list_min_repeats, t.list_min_items);
    let listed = item_ids(items, |i| i.listed && !i.is_answer());
    if let Some((p, _, c)) = periodic_run(&listed, false, &accept) {
        return Some((p, c));
    }
    let mut all = item_ids(items, |i| !i.is_answer());
    // A last line that begins one said before is being cut off by `max_tokens`: left out.
    if let Some((last, before)) = items.split_last() {
        if before
            .iter()
            .any(|i| i.text.len() > last.text.len() && i.text.starts_with(&last.text))
        {
            all.pop();
        }
    }
    if let Some((p, _, c)) = periodic_run(&all, true, &accept) {
        return Some((p, c));
    }
    two_at_the_end(&all, t.list_min_repeats)
        .filter(|&c| c >= t.list_min_items)
        .map(|c| (2, c))
}

/// Words a line must say besides its numbers to take turns in [`taking_turns`]: a line of one
/// or two words and a number (`Flip 3: Heads`, `7 is odd`, `Test 2: PASS`) is data, one of two
/// values on purpose.
const TURN_WORDS: usize = 3;

/// The most items in a row, anywhere in the answer, that take turns between two texts with
/// their numbers masked, each at least `min_repeats` times and switching from one to the other
/// at least `min_repeats` times, over at least `min_items` items: a list stuck on two entries
/// while its counter climbs (`River 3: The Amazon`, `River 4: The Nile`, `River 5: The
/// Amazon`...). Only lines of a list or with a number in them count (a song's two lines taking
/// turns are a refrain), with [`TURN_WORDS`] words or more (rows of figures and two-valued
/// data are no loop), and never table rows or answers (`True`, `B`). Two blocks one after the
/// other (three sets of push-ups, then three of squats) switch once: a plan, not turns.
/// `templates` are the items' own, from [`shapes::templates`].
fn taking_turns(
    items: &[Item],
    templates: &[String],
    min_repeats: usize,
    min_items: usize,
) -> usize {
    let texts: Vec<Option<&str>> = items
        .iter()
        .zip(templates)
        .map(|(i, t)| {
            let counted = !i.heading
                && !i.text.starts_with('|')
                && (i.listed || t.contains('#'))
                && !i.is_answer()
                && shapes::words(t) >= TURN_WORDS;
            counted.then_some(t.as_str())
        })
        .collect();
    // The widest windows of at most two texts, slid over the items, with the number of
    // switches between neighbours inside each.
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let (mut best, mut start, mut switches) = (0, 0, 0);
    for (end, text) in texts.iter().enumerate() {
        let Some(text) = text else {
            counts.clear();
            (start, switches) = (end + 1, 0);
            continue;
        };
        if end > start && texts[end - 1] != Some(text) {
            switches += 1;
        }
        *counts.entry(text).or_default() += 1;
        while counts.len() > 2 {
            let first = texts[start].unwrap_or_default();
            if let Some(n) = counts.get_mut(first) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(first);
                }
            }
            if texts[start + 1] != texts[start] {
                switches -= 1;
            }
            start += 1;
        }
        let len = end + 1 - start;
        if counts.len() == 2
            && counts.values().all(|&n| n >= min_repeats)
            && switches >= min_repeats
            && len >= min_items
        {
            best = best.max(len);
        }
    }
    best
}

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
