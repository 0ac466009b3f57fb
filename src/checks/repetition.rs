//! Degeneration detectors over generated text, for English and Chinese alike, run over the text
//! as a reader sees it (list markers off, see [`super::lists`]): list items that cycle (one item
//! again and again, two alternating or taking turns at the end, or a block of lines coming
//! back), a tail loop (the text ends in one unit sequence repeated back to back, or in marks
//! alone), list items that keep coming back out of order within their section, and the n-gram
//! repetition ratio seq-rep-4 of the prose with the zlib compression ratio as corroboration.
//! Answers from a fixed set (`True`, `No`, `B`) are no list items to these: an answer key
//! repeats them. Pure functions; the thresholds come from the probe. tests/corpus.rs measures
//! them on real answers, and what each detector adds.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::lists::{self, Item};
pub use super::units::units;
use super::units::{intern, periodic_run, repeats};

/// Thresholds of the repetition check. The defaults flag real loops and leave normal answers,
/// lists whose items differ, counting, tables, code and refrains alone (tests/corpus.rs).
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
    /// come back `list_min_repeats` times or more within their section, in any order.
    pub line_ratio: f64,
    /// The n-gram measures apply only to texts whose prose (code blocks left out) has at least
    /// this many units.
    pub min_units: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            tail_min_repeats: 3,
            tail_min_units: 20,
            list_min_repeats: 3,
            list_min_items: 6,
            ngram_margin: 0.12,
            line_ratio: 0.5,
            min_units: 40,
        }
    }
}

/// The detector that found a loop.
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
    /// Many list items come back again and again, not necessarily back to back.
    Lines,
    /// Repeated 4-grams, corroborated by compression.
    Ngrams,
}

impl Detector {
    /// Every detector, in the order they are asked.
    pub const ALL: [Detector; 4] = [
        Detector::ItemCycle,
        Detector::TailLoop,
        Detector::Lines,
        Detector::Ngrams,
    ];

    /// Its name, as the result record spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Detector::ItemCycle => "item_cycle",
            Detector::TailLoop => "tail_loop",
            Detector::Lines => "lines",
            Detector::Ngrams => "ngrams",
        }
    }
}

/// The set of detectors that fired on a text: the first decides, the others agree. Measuring
/// what each adds (tests/corpus.rs) needs all of them, not only the first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fired(u8);

impl Fired {
    pub fn contains(self, d: Detector) -> bool {
        self.0 & (1 << d as u8) != 0
    }

    /// The detectors in the set, in the order of [`Detector::ALL`].
    pub fn iter(self) -> impl Iterator<Item = Detector> {
        Detector::ALL.into_iter().filter(move |&d| self.contains(d))
    }

    fn with(self, d: Detector, fired: bool) -> Self {
        Self(self.0 | (u8::from(fired) << d as u8))
    }
}

/// What the detectors measured, kept in the result so an on-call engineer sees why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// 0..1: the largest of the item-cycle and tail-loop coverage, seq-rep-4 and the
    /// recurring-item ratio.
    pub score: f64,
    pub degenerate: bool,
    /// Every detector that fired (not in the result record: `detector` names the first).
    #[serde(skip)]
    pub fired: Fired,
    /// The detector that decided (the first that fired, in the order of [`Detector`]), its
    /// period (items for `item_cycle`, units for `tail_loop`) and how often it came back.
    pub detector: Option<Detector>,
    pub period: Option<usize>,
    pub repeats: Option<usize>,
    pub units: usize,
    pub items: usize,
    pub item_cycle_period: Option<usize>,
    pub item_cycle_items: usize,
    pub tail_loop_period: Option<usize>,
    pub tail_loop_units: usize,
    /// seq-rep-4 and the compression ratio are measured on the prose: code blocks left out.
    pub seq_rep_4: f64,
    /// seq-rep-4 of the text's second half alone: a model that got stuck ends in repetition.
    pub late_seq_rep_4: f64,
    /// The share of list items that come back `list_min_repeats` times or more in their
    /// section.
    pub recurring_item_ratio: f64,
    pub compression_ratio: f64,
}

impl Report {
    /// One sentence for people: which detector fired, on what period.
    pub fn describe(&self) -> Option<String> {
        let (p, r) = (self.period.unwrap_or(0), self.repeats.unwrap_or(0));
        Some(match self.detector? {
            Detector::ItemCycle if p == 1 => format!("one list item repeated {r} times in a row"),
            Detector::ItemCycle if p == 2 => format!("two list items coming back {r} times"),
            Detector::ItemCycle => format!("a block of {p} list items repeated {r} times"),
            Detector::TailLoop if self.period.is_none() => format!(
                "the text ends in {} units of punctuation and symbols alone",
                self.tail_loop_units
            ),
            Detector::TailLoop => {
                format!("the text ends in a loop of {p} units repeated {r} times")
            }
            Detector::Lines => format!(
                "{:.0}% of the list items come back again and again",
                self.recurring_item_ratio * 100.0
            ),
            Detector::Ngrams => format!(
                "{:.0}% of 4-grams repeat, and it compresses to {:.0}%",
                self.seq_rep_4.max(self.late_seq_rep_4) * 100.0,
                self.compression_ratio * 100.0
            ),
        })
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

/// How far into a third saying a long passage must be to count as a loop.
const PASSAGE_RESTART: usize = 4;

pub fn analyze(text: &str, t: &Thresholds) -> Report {
    let plain = lists::without_markers(text);
    let words = units(&plain);
    let ids = intern(&words);
    let prose = lists::prose(text);
    let prose_units = units(&prose);
    let prose_ids = intern(&prose_units);
    let items = lists::items(text, false);
    let n = ids.len();
    let cycle = item_cycle(&items, t);
    let looping = |p: usize, covered: usize| {
        // A long passage said twice and begun a third time is a loop cut short; a few units
        // into the third, so a shared last word or full stop does not count as its start.
        let passage = p >= t.tail_min_units && covered >= 2 * p + PASSAGE_RESTART;
        covered >= t.tail_min_units && (covered / p >= t.tail_min_repeats || passage)
    };
    // `max_tokens` may cut the last word in half: the loop then ends one unit earlier.
    let tail = periodic_run(&ids, true, looping)
        .or_else(|| periodic_run(&ids[..n.saturating_sub(1)], true, looping));
    // A text that ends in marks alone (`；；；`, `－－！－！！`, emoji) says nothing more, in
    // whatever order they come. Its prose: a table drawn in a code block is no such end.
    let marks = prose_units
        .iter()
        .rev()
        .take_while(|u| !u.chars().any(char::is_alphanumeric))
        .count();
    let marks = (marks >= t.tail_min_units).then_some(marks);
    let m = prose_ids.len();
    let long_enough = m >= t.min_units;
    let seq_rep_4 = if long_enough {
        seq_rep_4(&prose_ids)
    } else {
        0.0
    };
    let late_seq_rep_4 = if long_enough {
        self::seq_rep_4(&prose_ids[m / 2..])
    } else {
        0.0
    };
    let recurring_item_ratio = recurring_ratio(&items, t.list_min_repeats, t.list_min_items);
    let compression_ratio = compression_ratio(&prose);
    let share = |part: usize, whole: usize| {
        if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        }
    };
    let tail_units = tail.map_or(marks.unwrap_or(0), |(_, _, c)| c);
    let cycle_items = cycle.map_or(0, |(_, c)| c);
    let all = [
        cycle.map(|(p, c)| (Detector::ItemCycle, Some(p), Some(c / p))),
        tail.map(|(p, _, c)| (Detector::TailLoop, Some(p), Some(c / p)))
            .or(marks.map(|_| (Detector::TailLoop, None, None))),
        (recurring_item_ratio >= t.line_ratio).then_some((Detector::Lines, None, None)),
        (long_enough && seq_rep_4.max(late_seq_rep_4) - compression_ratio >= t.ngram_margin)
            .then_some((Detector::Ngrams, None, None)),
    ];
    let fired_set = all
        .iter()
        .zip(Detector::ALL)
        .fold(Fired::default(), |set, (f, d)| set.with(d, f.is_some()));
    let fired = all.into_iter().flatten().next();
    Report {
        score: share(tail_units, n)
            .max(share(cycle_items, items.len()))
            .max(seq_rep_4)
            .max(recurring_item_ratio),
        degenerate: fired.is_some(),
        fired: fired_set,
        detector: fired.map(|f| f.0),
        period: fired.and_then(|f| f.1),
        repeats: fired.and_then(|f| f.2),
        units: n,
        items: items.len(),
        item_cycle_period: cycle.map(|(p, _)| p),
        item_cycle_items: cycle_items,
        tail_loop_period: tail.map(|(p, _, _)| p),
        tail_loop_units: tail_units,
        seq_rep_4,
        late_seq_rep_4,
        recurring_item_ratio,
        compression_ratio,
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
mod tests {
    use super::*;

    fn flagged(text: &str) -> bool {
        analyze(text, &Thresholds::default()).degenerate
    }

    const HEALTHY: &[&str] = &[
        "The capital of France is Paris. It has been the country's political and cultural centre for centuries, and today it is home to about two million people within the city limits.",
        "法国的首都是巴黎。巴黎位于法国北部的塞纳河畔，是法国的政治、经济和文化中心，也是世界上最著名的旅游城市之一，每年吸引数千万游客。",
        "Here are the steps:\n1. Preheat the oven to 180°C.\n2. Mix the flour, sugar and eggs in a bowl.\n3. Pour the batter into a greased tin.\n4. Bake for 30 minutes.\n5. Let it cool before serving.",
        "| City | Country | Population |\n|------|---------|------------|\n| Paris | France | 2.1M |\n| Berlin | Germany | 3.6M |\n| Madrid | Spain | 3.3M |\n| Rome | Italy | 2.8M |\n| Vienna | Austria | 1.9M |",
        "```python\ndef fib(n):\n    if n < 2:\n        return n\n    a, b = 0, 1\n    for _ in range(n - 1):\n        a, b = b, a + b\n    return b\n\n\nfor i in range(10):\n    print(i, fib(i))\n```\nThis prints the first ten Fibonacci numbers.",
        "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30",
        "一、二、三、四、五、六、七、八、九、十、十一、十二、十三、十四、十五、十六、十七、十八、十九、二十",
        "{\"name\": \"Paris\", \"country\": \"France\", \"population\": 2102650, \"landmarks\": [\"Eiffel Tower\", \"Louvre\", \"Notre-Dame\"]}",
        "Yes.",
        "Ha ha ha, that's a good one!",
        "- apples\n- pears\n- plums\n- cherries\n- apricots\n- peaches\n- grapes",
        "Step 1: open the lid. Step 2: remove the filter. Step 3: rinse it under warm water. Step 4: let it dry. Step 5: put it back and close the lid.",
        "1. January\n2. February\n3. March\n4. April\n5. May\n6. June\n7. July\n8. August\n9. September\n10. October\n11. November\n12. December",
        "1\n2\n3\n4\n5\n6\n7\n8\n9\n10",
        "一、春\n二、夏\n三、秋\n四、冬",
        "```c\n}\n}\n}\n}\n}\n}\n```",
    ];

    const DEGENERATE: &[&str] = &[
        "The capital of France is Paris. The capital of France is Paris. The capital of France is Paris. The capital of France is Paris.",
        "Paris is the capital. I think I think I think I think I think I think I think I think I think I think I think",
        "巴黎是法国的首都。我爱巴黎。我爱巴黎。我爱巴黎。我爱巴黎。我爱巴黎。我爱巴黎。",
        "好的好的好的好的好的好的好的好的好的好的好的好的",
        "the the the the the the the the the the the the the the the the the the the the the the",
        "Sure! Here is the answer:\n\nParis is nice.\nParis is nice.\nParis is nice.\nParis is nice.\nParis is nice.\nParis is nice.",
        // A numbered list whose items cycle while the counter climbs.
        "Fruits:\n1. Apple\n2. Banana\n3. Cherry\n4. Apple\n5. Banana\n6. Cherry\n7. Apple\n8. Banana\n9. Cherry\n10. Apple",
        // Two near-identical items alternating.
        "- The sun is bright.\n- The sun is very bright.\n- The sun is bright.\n- The sun is very bright.\n- The sun is bright.\n- The sun is very bright.",
        // A block under a repeated heading.
        "Colors:\n1. Red\n2. Blue\n\nColors:\n1. Red\n2. Blue\n\nColors:\n1. Red\n2. Blue\n\nColors:\n1. Red",
        "水果：\n1. 苹果\n2. 香蕉\n3. 苹果\n4. 香蕉\n5. 苹果\n6. 香蕉\n7. 苹果",
    ];

    #[test]
    fn healthy_texts_are_left_alone() {
        for t in HEALTHY {
            let r = analyze(t, &Thresholds::default());
            assert!(!r.degenerate, "false alarm on {t:?}: {r:?}");
        }
    }

    #[test]
    fn real_loops_are_flagged() {
        for t in DEGENERATE {
            let r = analyze(t, &Thresholds::default());
            assert!(r.degenerate, "missed loop in {t:?}: {r:?}");
            assert!(r.score > 0.3, "{r:?}");
        }
    }

    #[test]
    fn loop_that_is_not_at_the_tail_is_caught_by_ngrams_and_compression() {
        let body = "Paris is the capital of France and the capital of France is Paris. ".repeat(8);
        let text = format!("{body}In short: Paris.");
        let r = analyze(&text, &Thresholds::default());
        assert!(r.tail_loop_period.is_none(), "{r:?}");
        assert!(r.degenerate, "{r:?}");
    }

    #[test]
    fn detector_names_are_the_records() {
        for d in Detector::ALL {
            assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
        }
    }

    #[test]
    fn code_fences_headings_and_marks() {
        let t = Thresholds::default();
        // A fence that never closes opens no code block: the loop after it is read.
        let looping_list = (1..=12)
            .map(|i| format!("{i}. {}\n", ["Apple", "Pear", "Plum"][i % 3]))
            .collect::<String>();
        assert!(analyze(&format!("```json\n{looping_list}"), &t).degenerate);
        // A closed block is still code.
        let code = "```python\nx = 0\nx += 1\nx += 1\nx += 1\nx += 1\nx += 1\nx += 1\nprint(x)\n```\nThis adds one six times.";
        assert!(!analyze(code, &t).degenerate);
        // Each day under its own heading with the same tasks: sections, not a loop.
        let days = ["Monday", "Tuesday", "Wednesday", "Thursday"]
            .iter()
            .map(|d| format!("### {d}\n- Warm up for 10 minutes\n- Stretch\n- Run 5 km\n"))
            .collect::<String>();
        assert!(!analyze(&days, &t).degenerate, "{:?}", analyze(&days, &t));
        // A table drawn in a code block ends in rule characters: no end in marks.
        let table = format!(
            "Here is the grid:\n```\n{}```\n",
            "+--+--+--+--+--+--+--+--+--+--+\n|  |  |  |  |  |  |  |  |  |  |\n".repeat(2)
        );
        assert!(!analyze(&table, &t).degenerate, "{:?}", analyze(&table, &t));
    }

    #[test]
    fn each_detector_alone() {
        let t = Thresholds::default();
        // Item cycles: the period in items, and which detector decided.
        let r = analyze(DEGENERATE[6], &t);
        assert_eq!(
            (r.detector, r.period, r.repeats, r.item_cycle_items),
            (Some(Detector::ItemCycle), Some(3), Some(3), 10)
        );
        assert_eq!(
            r.describe().as_deref(),
            Some("a block of 3 list items repeated 3 times")
        );
        let r = analyze(DEGENERATE[7], &t);
        assert_eq!((r.detector, r.period), (Some(Detector::ItemCycle), Some(2)));
        let r = analyze(DEGENERATE[8], &t);
        assert_eq!((r.detector, r.period), (Some(Detector::ItemCycle), Some(3)));
        // Tail loop: period and coverage of the repeated end.
        let r = analyze(
            "Paris is lovely. ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha",
            &t,
        );
        assert_eq!(r.tail_loop_period, Some(1));
        assert_eq!(r.tail_loop_units, 22);
        assert_eq!(
            (r.detector, r.describe().as_deref()),
            (
                Some(Detector::TailLoop),
                Some("the text ends in a loop of 1 units repeated 22 times")
            )
        );
        let r = analyze("开始。我爱你我爱你我爱你我爱你我爱你我爱你我爱你", &t);
        assert_eq!(r.tail_loop_period, Some(3));
        // A long passage said twice and begun a third time is a loop cut short; said twice and
        // ended, it may be a refrain.
        let passage = "The city of Paris lies on the river Seine and has been the capital of France for a very long time. ";
        let r = analyze(&format!("Hello. {passage}{passage}The city of Paris"), &t);
        assert_eq!((r.detector, r.period), (Some(Detector::TailLoop), Some(22)));
        assert!(!analyze(&format!("Hello. {passage}{passage}"), &t).degenerate);
        // Too few repeats at the end: no tail loop, even if the period is long.
        assert_eq!(
            analyze(
                "one two three four five six seven eight. one two three four five six seven eight.",
                &t
            )
            .tail_loop_period,
            None
        );
        // N-grams: a paragraph said twice over with a different ending.
        let twice = format!("{0} {0} And that is all.", HEALTHY[0]);
        let r = analyze(&twice, &t);
        assert!(r.seq_rep_4 > 0.4 && r.seq_rep_4 < 0.55, "{r:?}");
        // Lines: the same list items again and again, in no fixed order.
        let list = [
            "Paris", "Rome", "Paris", "Oslo", "Rome", "Paris", "Rome", "Lima",
        ];
        let list: String = list
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{}. {c}\n", i + 1))
            .collect();
        let r = analyze(&list, &t);
        assert_eq!(
            (r.detector, r.recurring_item_ratio),
            (Some(Detector::Lines), 0.75)
        );
        // A refrain is lines, not list items.
        let refrain = list.replace(". ", " is nice, ");
        assert!(!analyze(&refrain, &t).degenerate);
        // Short texts are never judged by n-grams.
        let r = analyze("Yes yes yes. No no.", &t);
        assert_eq!((r.seq_rep_4, r.degenerate), (0.0, false));
    }

    #[test]
    fn code_answer_keys_and_schedules_are_not_loops() {
        let t = Thresholds::default();
        // Lines without markers that repeat and then stop are code (or a refrain); running to
        // the end of the text, or to a line cut off half way, they are a loop.
        let function = format!("def add_seven(x):\n{}", "    x += 1\n".repeat(7));
        assert!(!analyze(&format!("{function}    return x"), &t).degenerate);
        for looping in [function.clone(), format!("{function}    x +")] {
            let r = analyze(&looping, &t);
            assert_eq!((r.detector, r.period), (Some(Detector::ItemCycle), Some(1)));
        }
        // An answer key repeats its answers; the same shape with items is a loop.
        let key = |a: &str, b: &str| -> String {
            (1..=8)
                .map(|i| format!("{i}. {}\n", if i % 2 == 1 { a } else { b }))
                .collect()
        };
        for (a, b) in [("True", "False"), ("Yes", "No"), ("B", "C"), ("对", "错")] {
            assert!(!analyze(&key(a, b), &t).degenerate, "{a}/{b}");
        }
        assert!(analyze(&key("Apple", "Pear"), &t).degenerate);
        // The same tasks under each day's heading are a schedule; in one list, a loop.
        let day = "- [x] Water the plants\n- [ ] Feed the cat\n";
        let week = format!("Monday\n{day}Tuesday\n{day}Wednesday\n{day}");
        assert!(!analyze(&week, &t).degenerate);
        let r = analyze(
            &format!("Tasks:\n{}", day.repeat(2) + "- [x] Feed the cat\n" + day),
            &t,
        );
        assert_eq!(r.detector, Some(Detector::Lines), "{r:?}");
    }

    #[test]
    fn ngrams_read_the_prose() {
        let t = Thresholds::default();
        // A fenced HTML list said twice is code, not a loop: its tags repeat by nature.
        let html = "<ul>\n  <li>Item1</li>\n  <li>Item2</li>\n  <li>Item3</li>\n</ul>\n";
        let page = format!("```html\n<h2>Items</h2>\n{html}<h2>Items</h2>\n{html}```\n");
        let r = analyze(&page, &t);
        assert_eq!((r.seq_rep_4, r.degenerate), (0.0, false));
        // With prose enough to judge, the prose alone is judged.
        let explained = format!("{page}{} {}", HEALTHY[0], HEALTHY[11]);
        let r = analyze(&explained, &t);
        assert!(r.seq_rep_4 < 0.05 && !r.degenerate, "{r:?}");
        // Read as prose, the tags would make over a quarter of its 4-grams repeats.
        let r = analyze(&explained.replace("```html\n", "").replace("```\n", ""), &t);
        assert!(r.seq_rep_4 > 0.25, "{r:?}");
    }

    #[test]
    fn a_list_stuck_on_two_items_or_a_text_ending_in_marks() {
        let t = Thresholds::default();
        // Two items taking turns in no fixed order, at the end of the list.
        let stuck =
            "Chile\nPeru\nYemen\nZimbabwe\nZimbabwe\nZimbabwe\nYemen\nYemen\nZimbabwe\nZimbabwe";
        let r = analyze(stuck, &t);
        assert_eq!(
            (r.detector, r.period, r.item_cycle_items),
            (Some(Detector::ItemCycle), Some(2), 8)
        );
        assert_eq!(
            r.describe().as_deref(),
            Some("two list items coming back 4 times")
        );
        assert!(!analyze(&format!("{stuck}\nOman\nQatar"), &t).degenerate);
        // A run of marks in any order; code that ends in a few braces is not one.
        let r = analyze(
            "你知道如何－－－－－－－－！－－－！－－！－！！！！！－－－！",
            &t,
        );
        assert_eq!(
            (r.detector, r.period, r.tail_loop_units),
            (Some(Detector::TailLoop), None, 26)
        );
        assert_eq!(
            r.describe().as_deref(),
            Some("the text ends in 26 units of punctuation and symbols alone")
        );
        assert!(!analyze("Wow！！！！！", &t).degenerate);
    }

    #[test]
    fn every_detector_that_fired_is_kept() {
        let t = Thresholds::default();
        // A numbered list stuck on one item: item cycle, lines and a tail loop all see it.
        let r = analyze(
            &(1..=30).map(|i| format!("{i}. Fish\n")).collect::<String>(),
            &t,
        );
        let fired: Vec<Detector> = r.fired.iter().collect();
        assert_eq!(
            fired,
            [Detector::ItemCycle, Detector::TailLoop, Detector::Lines]
        );
        assert_eq!(r.detector, Some(Detector::ItemCycle));
        assert_eq!(analyze(HEALTHY[0], &t).fired, Fired::default());
    }

    #[test]
    fn thresholds_are_honoured() {
        let t = Thresholds {
            tail_min_repeats: 10,
            tail_min_units: 200,
            list_min_repeats: 10,
            ngram_margin: 1.1,
            line_ratio: 1.1,
            ..Thresholds::default()
        };
        assert!(!analyze(DEGENERATE[0], &t).degenerate);
        assert!(flagged(DEGENERATE[0]));
        assert!(!analyze(DEGENERATE[6], &t).degenerate);
    }

    #[test]
    fn a_loop_is_certain_at_twice_the_thresholds() {
        let t = Thresholds::default();
        let looping = |n: usize| format!("Hello. {}", "I think that ".repeat(n));
        assert!(analyze(&looping(8), &t).degenerate);
        assert!(!certain_loop(&looping(8), &t));
        assert!(certain_loop(&looping(20), &t));
        let list = |n: usize| {
            (1..=n)
                .map(|i| format!("{i}. {}\n", ["Apple", "Pear"][i % 2]))
                .collect::<String>()
        };
        assert!(!certain_loop(&list(8), &t));
        assert!(certain_loop(&list(12), &t));
        // The last line is still being written: it does not count yet.
        assert!(!certain_loop(list(12).trim_end(), &t));
    }

    #[test]
    fn compression_ratio_separates_loops_from_prose() {
        assert!(compression_ratio(&"abc def ".repeat(50)) < 0.1);
        assert!(compression_ratio(HEALTHY[0]) > 0.6);
    }

    /// The `repetition` object of the result record is a public contract: it serializes byte
    /// for byte as it always has, whichever detectors fired.
    #[test]
    fn the_records_repetition_object_is_unchanged() {
        let t = Thresholds::default();
        let numbered = |items: &[&str]| -> String {
            items
                .iter()
                .enumerate()
                .map(|(i, x)| format!("{}. {x}\n", i + 1))
                .collect()
        };
        let cases = [
            // Every detector fires; the item cycle decides.
            (
                numbered(&["Fish and chips today"; 30]),
                r#"{"score":1.0,"degenerate":true,"detector":"item_cycle","period":1,"repeats":30,"units":120,"items":30,"item_cycle_period":1,"item_cycle_items":30,"tail_loop_period":4,"tail_loop_units":120,"seq_rep_4":0.9658119658119658,"late_seq_rep_4":0.9298245614035088,"recurring_item_ratio":1.0,"compression_ratio":0.0746031746031746}"#,
            ),
            // A tail loop decides, the n-grams agree.
            (
                format!("Hello there. {}", "Fish and chips today. ".repeat(10)),
                r#"{"score":0.9622641509433962,"degenerate":true,"detector":"tail_loop","period":5,"repeats":10,"units":53,"items":1,"item_cycle_period":null,"item_cycle_items":0,"tail_loop_period":5,"tail_loop_units":51,"seq_rep_4":0.86,"late_seq_rep_4":0.7916666666666666,"recurring_item_ratio":0.0,"compression_ratio":0.2317596566523605}"#,
            ),
            // The text ends in marks alone: a tail loop with no period.
            (
                "你知道如何－－－－－－－－！－－－！－－！－！！！！！－－－！".to_string(),
                r#"{"score":0.8387096774193549,"degenerate":true,"detector":"tail_loop","period":null,"repeats":null,"units":31,"items":1,"item_cycle_period":null,"item_cycle_items":0,"tail_loop_period":null,"tail_loop_units":26,"seq_rep_4":0.0,"late_seq_rep_4":0.0,"recurring_item_ratio":0.0,"compression_ratio":0.5851063829787234}"#,
            ),
            // List items coming back out of order.
            (
                numbered(&[
                    "Paris", "Rome", "Paris", "Oslo", "Rome", "Paris", "Rome", "Lima",
                ]),
                r#"{"score":0.75,"degenerate":true,"detector":"lines","period":null,"repeats":null,"units":8,"items":8,"item_cycle_period":null,"item_cycle_items":0,"tail_loop_period":null,"tail_loop_units":0,"seq_rep_4":0.0,"late_seq_rep_4":0.0,"recurring_item_ratio":0.75,"compression_ratio":0.7906976744186046}"#,
            ),
            // Nothing fires.
            (
                HEALTHY[0].to_string(),
                r#"{"score":0.0,"degenerate":false,"detector":null,"period":null,"repeats":null,"units":34,"items":1,"item_cycle_period":null,"item_cycle_items":0,"tail_loop_period":null,"tail_loop_units":0,"seq_rep_4":0.0,"late_seq_rep_4":0.0,"recurring_item_ratio":0.0,"compression_ratio":0.7556818181818182}"#,
            ),
        ];
        for (text, want) in cases {
            let r = analyze(&text, &t);
            assert_eq!(serde_json::to_string(&r).unwrap(), want, "{text:?}");
        }
        let all = analyze(&numbered(&["Fish and chips today"; 30]), &t);
        assert_eq!(all.fired.iter().count(), Detector::ALL.len());
    }
}
