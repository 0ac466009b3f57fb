//! What the detectors found and measured in one text ([`Report`]), and how the result record
//! spells it: the `repetition` object is a public contract, flat, with the deciding detector's
//! period and repeats beside each detector's own figures.

use serde::{Serialize, Serializer};

/// A detector, by the name the result record gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Detector {
    /// A period of list items (lines, markers off) repeated back to back: anywhere in a list,
    /// or at the text's end for lines without markers; or two items coming back in any order
    /// at the end.
    ItemCycle,
    /// The text ends in one unit sequence repeated back to back, or in a run of punctuation
    /// and symbols alone.
    TailLoop,
    /// Many list items come back again and again, not necessarily back to back. The record
    /// calls it `lines`, and the threshold is `line_ratio`.
    #[serde(rename = "lines")]
    RecurringItems,
    /// Repeated 4-grams, corroborated by compression.
    Ngrams,
    /// Chinese clauses that keep ending in one unit of two to four characters.
    Morphemes,
}

impl Detector {
    /// Every detector, in the order they are asked: the first that fires decides.
    pub const ALL: [Detector; 5] = [
        Detector::ItemCycle,
        Detector::TailLoop,
        Detector::RecurringItems,
        Detector::Ngrams,
        Detector::Morphemes,
    ];

    /// Its name, as the result record spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Detector::ItemCycle => "item_cycle",
            Detector::TailLoop => "tail_loop",
            Detector::RecurringItems => "lines",
            Detector::Ngrams => "ngrams",
            Detector::Morphemes => "morphemes",
        }
    }
}

/// How a text ends in a loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tail {
    /// One sequence of `period` units repeated back to back over the last `units` units.
    Repeated { period: usize, units: usize },
    /// The last `units` units are punctuation and symbols alone, in any order: no period.
    Marks { units: usize },
}

impl Tail {
    /// How many units at the end the loop covers.
    pub fn units(self) -> usize {
        match self {
            Tail::Repeated { units, .. } | Tail::Marks { units } => units,
        }
    }
}

/// `part` of `whole`, 0 when there is no whole.
pub(super) fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// What one detector found, with its own figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Finding {
    /// A block of `period` list items repeated back to back over `items` items.
    ItemCycle {
        period: usize,
        items: usize,
    },
    TailLoop(Tail),
    /// The text ends in a period of `period` words (marks left out) repeated back to back over
    /// `words` words (`tail_loop` detector, `word_tail` rule).
    WordTail {
        period: usize,
        words: usize,
    },
    /// This share of the list items come back again and again in their section.
    RecurringItems {
        ratio: f64,
    },
    /// One line template (numbers masked) on `lines` of the answer's `items` lines, each line
    /// different: the counter climbs while the line is said again (`lines` detector).
    TemplateLines {
        lines: usize,
        items: usize,
    },
    /// Table rows that say again what an earlier row said: a block of rows come back, or one
    /// row twice (`lines` detector).
    RepeatedRows {
        repeated: usize,
        rows: usize,
    },
    /// In paragraphs of prose, this share of the words lie in runs of four said three times or
    /// more, or (`phrase`) one phrase of six words comes this often (`ngrams` detector,
    /// `passages` rule).
    Passages {
        ratio: f64,
        phrase: Option<usize>,
    },
    /// Sentences of prose said word for word again, out of the sentences long enough to count
    /// (`ngrams` detector: the text repeats itself).
    RepeatedSentences {
        repeated: usize,
        sentences: usize,
    },
    /// `alike` of the answer's `sentences` end in the same last words (`morphemes` detector:
    /// one unit closes clause after clause).
    SentenceEndings {
        alike: usize,
        sentences: usize,
    },
    /// Two list items, numbers masked, taking turns in any order over `items` items in a row,
    /// anywhere in the answer (`item_cycle` detector, `turns` rule).
    TakingTurns {
        items: usize,
    },
    /// `mentions` of the `items` in enumerations on one line (`Chicken, Bran, Bran, Banana`)
    /// name an item that their line names `list_min_repeats` times or more (`lines` detector,
    /// `enumerations` rule).
    EnumerationRepeats {
        mentions: usize,
        items: usize,
    },
    /// This share of Chinese clauses end in the same unit of two to four characters.
    ClauseEndings {
        ratio: f64,
        clauses: usize,
    },
    /// seq-rep-4 (of the whole prose or its second half, the higher) beside the compression
    /// ratio it exceeded by the margin.
    Ngrams {
        seq_rep_4: f64,
        compression_ratio: f64,
    },
}

impl Finding {
    pub fn detector(&self) -> Detector {
        match self {
            Finding::ItemCycle { .. } | Finding::TakingTurns { .. } => Detector::ItemCycle,
            Finding::TailLoop(_) | Finding::WordTail { .. } => Detector::TailLoop,
            Finding::RecurringItems { .. } => Detector::RecurringItems,
            Finding::TemplateLines { .. }
            | Finding::RepeatedRows { .. }
            | Finding::EnumerationRepeats { .. } => Detector::RecurringItems,
            Finding::Ngrams { .. }
            | Finding::RepeatedSentences { .. }
            | Finding::Passages { .. } => Detector::Ngrams,
            Finding::ClauseEndings { .. } | Finding::SentenceEndings { .. } => Detector::Morphemes,
        }
    }

    /// The rule that found it: a detector's name, or for the `lines` detector's new shapes
    /// their own (`template_lines`, `table_rows`), so each can be measured on its own.
    pub fn rule(&self) -> &'static str {
        match self {
            Finding::TemplateLines { .. } => "template_lines",
            Finding::RepeatedRows { .. } => "table_rows",
            Finding::RepeatedSentences { .. } => "sentences",
            Finding::SentenceEndings { .. } => "endings",
            Finding::WordTail { .. } => "word_tail",
            Finding::Passages { .. } => "passages",
            Finding::TakingTurns { .. } => "turns",
            Finding::EnumerationRepeats { .. } => "enumerations",
            f => f.detector().as_str(),
        }
    }

    /// How much of the text it covers, 0..1, for `repetition_score`: the share of the units
    /// (of `units`) or of the items (of `items`) in the loop, or the rule's own share. The
    /// n-grams count through seq-rep-4, which the score takes whether or not they fired.
    pub fn share(&self, units: usize, items: usize) -> f64 {
        match *self {
            Finding::ItemCycle { items: c, .. } | Finding::TakingTurns { items: c } => {
                share(c, items)
            }
            Finding::TailLoop(tail) => share(tail.units(), units),
            Finding::WordTail { words, .. } => share(words, units),
            Finding::RecurringItems { ratio }
            | Finding::Passages { ratio, .. }
            | Finding::ClauseEndings { ratio, .. } => ratio,
            Finding::TemplateLines { lines, items } => share(lines, items),
            Finding::RepeatedRows { repeated, rows } => share(repeated, rows),
            Finding::EnumerationRepeats { mentions, items } => share(mentions, items),
            Finding::RepeatedSentences {
                repeated,
                sentences,
            } => share(repeated, sentences),
            Finding::SentenceEndings { alike, sentences } => share(alike, sentences),
            Finding::Ngrams { .. } => 0.0,
        }
    }

    /// The period that repeats (items or units) and how often it came back, for the detectors
    /// that find one.
    pub fn period(&self) -> Option<(usize, usize)> {
        match *self {
            Finding::ItemCycle { period, items } => Some((period, items / period)),
            Finding::TailLoop(Tail::Repeated { period, units }) => Some((period, units / period)),
            Finding::TemplateLines { lines, .. } => Some((1, lines)),
            Finding::WordTail { period, words } => Some((period, words / period)),
            Finding::TakingTurns { items } => Some((2, items / 2)),
            _ => None,
        }
    }

    /// One sentence for people: what was found, on what period.
    pub fn describe(&self) -> String {
        match *self {
            Finding::ItemCycle { period: 1, items } => {
                format!("one list item repeated {items} times in a row")
            }
            Finding::ItemCycle { period: 2, items } => {
                format!("two list items coming back {} times", items / 2)
            }
            Finding::ItemCycle { period, items } => {
                format!(
                    "a block of {period} list items repeated {} times",
                    items / period
                )
            }
            Finding::TailLoop(Tail::Marks { units }) => {
                format!("the text ends in {units} units of punctuation and symbols alone")
            }
            Finding::TailLoop(Tail::Repeated { period, units }) => format!(
                "the text ends in a loop of {period} units repeated {} times",
                units / period
            ),
            Finding::RecurringItems { ratio } => format!(
                "{:.0}% of the list items come back again and again",
                ratio * 100.0
            ),
            Finding::TemplateLines { lines, items } => {
                format!("one line template, numbers aside, on {lines} of {items} lines")
            }
            Finding::WordTail { period: 1, words } => {
                format!("the text ends in one word said {words} times, marks aside")
            }
            Finding::WordTail { period, words } => format!(
                "the text ends in a loop of {period} words repeated {} times, marks aside",
                words / period
            ),
            Finding::Passages {
                phrase: Some(times),
                ..
            } => format!("a phrase of six words said {times} times in the paragraphs"),
            Finding::Passages { ratio, .. } => format!(
                "{:.0}% of the paragraphs' words are phrases said three times or more",
                ratio * 100.0
            ),
            Finding::TakingTurns { items } => {
                format!("two list items, numbers aside, taking turns over {items} items")
            }
            Finding::EnumerationRepeats { mentions, items } => format!(
                "{mentions} of {items} items of enumerations name what their line names again and again"
            ),
            Finding::RepeatedRows { repeated, rows } => {
                format!("{repeated} of {rows} table rows say again what an earlier row said")
            }
            Finding::RepeatedSentences {
                repeated,
                sentences,
            } => format!("{repeated} of {sentences} sentences say word for word an earlier one"),
            Finding::SentenceEndings { alike, sentences } => {
                format!("{alike} of {sentences} sentences end in the same words")
            }
            Finding::ClauseEndings { ratio, clauses } => format!(
                "{:.0}% of {clauses} Chinese clauses end in the same word",
                ratio * 100.0
            ),
            Finding::Ngrams {
                seq_rep_4,
                compression_ratio,
            } => format!(
                "{:.0}% of 4-grams repeat, and it compresses to {:.0}%",
                seq_rep_4 * 100.0,
                compression_ratio * 100.0
            ),
        }
    }
}

/// What the detectors measure on every text, whether or not one fires.
#[derive(Debug, Clone, PartialEq)]
pub struct Measures {
    /// 0..1: the largest of the item-cycle and tail-loop coverage, seq-rep-4 and the
    /// recurring-item ratio.
    pub score: f64,
    pub units: usize,
    pub items: usize,
    /// seq-rep-4 and the compression ratio are measured on the prose: code blocks left out.
    pub seq_rep_4: f64,
    /// seq-rep-4 of the text's second half alone: a model that got stuck ends in repetition.
    pub late_seq_rep_4: f64,
    /// The share of list items that come back `list_min_repeats` times or more in their
    /// section.
    pub recurring_item_ratio: f64,
    pub compression_ratio: f64,
    /// The share of lines that share the most common template with its numbers masked.
    pub template_line_ratio: f64,
    /// Table rows that repeat an earlier row (header rows aside).
    pub repeated_rows: usize,
    /// The share of Chinese clauses that end in the most common unit of two to four
    /// characters.
    pub clause_ending_ratio: f64,
    /// Sentences of prose that say word for word an earlier one.
    pub repeated_sentences: usize,
    /// The share of sentences that end in the most common last four words, when two or more
    /// do.
    pub sentence_ending_ratio: f64,
    /// The most list items in a row taking turns between two texts (numbers masked), when a
    /// run long enough for `item_cycle` was found; else 0.
    pub turn_items: usize,
    /// Mentions of items that their line's enumeration names `list_min_repeats` times or more.
    pub enumeration_repeats: usize,
}

/// What the detectors measured and found, kept in the result so an on-call engineer sees why.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub measures: Measures,
    /// Every detector that fired, in the order of [`Detector::ALL`]: the first decides, the
    /// others agree (measuring what each adds, tests/it/corpus.rs, needs them all).
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn degenerate(&self) -> bool {
        !self.findings.is_empty()
    }

    /// The finding that decided: the first detector that fired.
    pub fn decided(&self) -> Option<&Finding> {
        self.findings.first()
    }

    /// The detectors that fired, each once, in the order they are asked.
    pub fn fired(&self) -> impl Iterator<Item = Detector> + '_ {
        let mut seen = Vec::with_capacity(Detector::ALL.len());
        self.findings
            .iter()
            .map(Finding::detector)
            .filter(move |d| {
                let first = !seen.contains(d);
                if first {
                    seen.push(*d);
                }
                first
            })
    }

    /// The item cycle, when one was found: `(period, items covered)`.
    pub fn item_cycle(&self) -> Option<(usize, usize)> {
        self.findings.iter().find_map(|f| match *f {
            Finding::ItemCycle { period, items } => Some((period, items)),
            _ => None,
        })
    }

    /// How the text ends in a loop, when it does.
    pub fn tail(&self) -> Option<Tail> {
        self.findings.iter().find_map(|f| match *f {
            Finding::TailLoop(t) => Some(t),
            _ => None,
        })
    }

    /// One sentence for people: which detector decided, on what period.
    pub fn describe(&self) -> Option<String> {
        self.decided().map(Finding::describe)
    }
}

/// The record's flat `repetition` object.
impl Serialize for Report {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Record {
            score: f64,
            degenerate: bool,
            detector: Option<Detector>,
            period: Option<usize>,
            repeats: Option<usize>,
            units: usize,
            items: usize,
            item_cycle_period: Option<usize>,
            item_cycle_items: usize,
            tail_loop_period: Option<usize>,
            tail_loop_units: usize,
            seq_rep_4: f64,
            late_seq_rep_4: f64,
            recurring_item_ratio: f64,
            compression_ratio: f64,
            template_line_ratio: f64,
            repeated_rows: usize,
            clause_ending_ratio: f64,
            repeated_sentences: usize,
            sentence_ending_ratio: f64,
            turn_items: usize,
            enumeration_repeats: usize,
        }
        let m = &self.measures;
        let decided = self.decided().and_then(Finding::period);
        let cycle = self.item_cycle();
        let tail = self.tail();
        Record {
            score: m.score,
            degenerate: self.degenerate(),
            detector: self.decided().map(Finding::detector),
            period: decided.map(|d| d.0),
            repeats: decided.map(|d| d.1),
            units: m.units,
            items: m.items,
            item_cycle_period: cycle.map(|c| c.0),
            item_cycle_items: cycle.map_or(0, |c| c.1),
            tail_loop_period: match tail {
                Some(Tail::Repeated { period, .. }) => Some(period),
                _ => None,
            },
            tail_loop_units: tail.map_or(0, Tail::units),
            seq_rep_4: m.seq_rep_4,
            late_seq_rep_4: m.late_seq_rep_4,
            recurring_item_ratio: m.recurring_item_ratio,
            compression_ratio: m.compression_ratio,
            template_line_ratio: m.template_line_ratio,
            repeated_rows: m.repeated_rows,
            clause_ending_ratio: m.clause_ending_ratio,
            repeated_sentences: m.repeated_sentences,
            sentence_ending_ratio: m.sentence_ending_ratio,
            turn_items: m.turn_items,
            enumeration_repeats: m.enumeration_repeats,
        }
        .serialize(s)
    }
}
