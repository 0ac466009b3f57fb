//! The repetition check's thresholds, as a probe's `checks.repetition` writes them, and their
//! defaults.

use serde::{Deserialize, Serialize};

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
