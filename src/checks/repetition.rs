//! Degeneration detectors over generated text, for English and Chinese alike: a tail-loop
//! detector (the text ends in one unit sequence repeated back to back), the n-gram repetition
//! ratio seq-rep-4, a duplicate-line ratio, and the zlib compression ratio as corroboration.
//! Pure functions; the thresholds come from the probe.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// Thresholds of the repetition check. The defaults flag real loops and leave normal answers,
/// numbered lists, tables, code and counting alone (see the corpus in the tests).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// A tail loop needs at least this many back-to-back repeats of its period...
    pub tail_min_repeats: usize,
    /// ...covering at least this many units.
    pub tail_min_units: usize,
    /// seq-rep-4 (share of 4-grams that repeat an earlier one) at or above this...
    pub ngram_ratio: f64,
    /// ...flags only when zlib also compresses the text to this share of its size or less.
    pub compression_ratio: f64,
    /// Share of (non-trivial) lines that repeat an earlier line.
    pub line_ratio: f64,
    /// The n-gram and line measures apply only to texts of at least this many units.
    pub min_units: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            tail_min_repeats: 3,
            tail_min_units: 20,
            ngram_ratio: 0.5,
            compression_ratio: 0.35,
            line_ratio: 0.5,
            min_units: 40,
        }
    }
}

/// What the detectors measured, kept in the result so an on-call engineer sees why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// 0..1: the largest of the tail-loop coverage, seq-rep-4 and the duplicate-line ratio.
    pub score: f64,
    pub degenerate: bool,
    pub units: usize,
    pub tail_loop_period: Option<usize>,
    pub tail_loop_units: usize,
    pub seq_rep_4: f64,
    pub line_dup_ratio: f64,
    pub compression_ratio: f64,
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3400..=0x4DBF   // CJK Extension A
        | 0x4E00..=0x9FFF   // CJK Unified Ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xF900..=0xFAFF   // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F)
}

/// Splits text into units: a word (a run of letters and digits), one CJK character, or a run of
/// one repeated punctuation mark (so `----` in a table rule is one unit, not a loop).
pub fn units(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if c.is_whitespace() {
            continue;
        }
        let mut end = i + c.len_utf8();
        if is_cjk(c) {
            // One character, one unit.
        } else if c.is_alphanumeric() || c == '_' {
            while let Some(&(j, d)) = iter.peek() {
                if (d.is_alphanumeric() || d == '_' || d == '\'') && !is_cjk(d) {
                    end = j + d.len_utf8();
                    iter.next();
                } else {
                    break;
                }
            }
        } else {
            while let Some(&(j, d)) = iter.peek() {
                if d == c {
                    end = j + d.len_utf8();
                    iter.next();
                } else {
                    break;
                }
            }
        }
        out.push(&text[i..end]);
    }
    out
}

/// The shortest period whose back-to-back repeats cover the end of the text past the thresholds:
/// (period, units covered).
fn tail_loop(ids: &[u32], t: &Thresholds) -> Option<(usize, usize)> {
    let n = ids.len();
    let max_period = n / t.tail_min_repeats.max(2);
    for p in 1..=max_period {
        let mut run = 0;
        while run + p < n && ids[n - 1 - run] == ids[n - 1 - run - p] {
            run += 1;
        }
        let covered = run + p;
        if covered / p >= t.tail_min_repeats && covered >= t.tail_min_units {
            return Some((p, covered));
        }
    }
    None
}

fn seq_rep_4(ids: &[u32]) -> f64 {
    if ids.len() < 4 {
        return 0.0;
    }
    let grams: Vec<&[u32]> = ids.windows(4).collect();
    let unique: HashSet<&[u32]> = grams.iter().copied().collect();
    1.0 - unique.len() as f64 / grams.len() as f64
}

fn line_dup_ratio(text: &str) -> f64 {
    // Short lines (`}`, `---`, `end`) repeat in healthy code and tables; they do not count.
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.chars().count() >= 8)
        .collect();
    if lines.len() < 4 {
        return 0.0;
    }
    let mut seen = HashSet::new();
    let dups = lines.iter().filter(|l| !seen.insert(**l)).count();
    dups as f64 / lines.len() as f64
}

pub fn compression_ratio(text: &str) -> f64 {
    if text.is_empty() {
        return 1.0;
    }
    let packed = miniz_oxide::deflate::compress_to_vec_zlib(text.as_bytes(), 6);
    packed.len() as f64 / text.len() as f64
}

pub fn analyze(text: &str, t: &Thresholds) -> Report {
    let units = units(text);
    let mut interned: HashMap<&str, u32> = HashMap::new();
    let ids: Vec<u32> = units
        .iter()
        .map(|u| {
            let next = interned.len() as u32;
            *interned.entry(u).or_insert(next)
        })
        .collect();
    let n = ids.len();
    let tail = tail_loop(&ids, t);
    let long_enough = n >= t.min_units;
    let seq_rep_4 = if long_enough { seq_rep_4(&ids) } else { 0.0 };
    let line_dup_ratio = if long_enough {
        line_dup_ratio(text)
    } else {
        0.0
    };
    let compression_ratio = compression_ratio(text);
    let tail_units = tail.map_or(0, |(_, c)| c);
    let tail_share = if n == 0 {
        0.0
    } else {
        tail_units as f64 / n as f64
    };
    let degenerate = tail.is_some()
        || (long_enough && seq_rep_4 >= t.ngram_ratio && compression_ratio <= t.compression_ratio)
        || (long_enough && line_dup_ratio >= t.line_ratio);
    Report {
        score: tail_share.max(seq_rep_4).max(line_dup_ratio),
        degenerate,
        units: n,
        tail_loop_period: tail.map(|(p, _)| p),
        tail_loop_units: tail_units,
        seq_rep_4,
        line_dup_ratio,
        compression_ratio,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flagged(text: &str) -> bool {
        analyze(text, &Thresholds::default()).degenerate
    }

    #[test]
    fn units_split_words_cjk_and_punctuation_runs() {
        assert_eq!(
            units("Hello, world--ok 巴黎是首都。"),
            vec!["Hello", ",", "world", "--", "ok", "巴", "黎", "是", "首", "都", "。"]
        );
        assert_eq!(units("don't |---|"), vec!["don't", "|", "---", "|"]);
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
    ];

    const DEGENERATE: &[&str] = &[
        "The capital of France is Paris. The capital of France is Paris. The capital of France is Paris. The capital of France is Paris.",
        "Paris is the capital. I think I think I think I think I think I think I think I think I think I think I think",
        "巴黎是法国的首都。我爱巴黎。我爱巴黎。我爱巴黎。我爱巴黎。我爱巴黎。我爱巴黎。",
        "好的好的好的好的好的好的好的好的好的好的好的好的",
        "the the the the the the the the the the the the the the the the the the the the the the",
        "Sure! Here is the answer:\n\nParis is nice.\nParis is nice.\nParis is nice.\nParis is nice.\nParis is nice.\nParis is nice.",
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
    fn each_detector_alone() {
        let t = Thresholds::default();
        // Tail loop: period and coverage of the repeated end.
        let r = analyze(
            "Paris is lovely. ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha",
            &t,
        );
        assert_eq!(r.tail_loop_period, Some(1));
        assert_eq!(r.tail_loop_units, 22);
        let r = analyze("开始。我爱你我爱你我爱你我爱你我爱你我爱你我爱你", &t);
        assert_eq!(r.tail_loop_period, Some(3));
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
        // Lines: the same line again and again, with other lines between.
        let lines = "Paris is the capital.\nBerlin is in Germany.\nParis is the capital.\nRome is in Italy.\nParis is the capital.\nParis is the capital.\nMadrid is in Spain.\nParis is the capital.";
        let r = analyze(&format!("{lines}\n{lines}"), &t);
        assert!(r.line_dup_ratio >= 0.5 && r.degenerate, "{r:?}");
        // Short texts are never judged by n-grams or lines.
        let r = analyze("Yes yes yes. No no.", &t);
        assert_eq!(
            (r.seq_rep_4, r.line_dup_ratio, r.degenerate),
            (0.0, 0.0, false)
        );
    }

    #[test]
    fn thresholds_are_honoured() {
        let t = Thresholds {
            tail_min_repeats: 10,
            tail_min_units: 200,
            ngram_ratio: 1.1,
            line_ratio: 1.1,
            ..Thresholds::default()
        };
        assert!(!analyze(DEGENERATE[0], &t).degenerate);
        assert!(flagged(DEGENERATE[0]));
    }

    #[test]
    fn compression_ratio_separates_loops_from_prose() {
        assert!(compression_ratio(&"abc def ".repeat(50)) < 0.1);
        assert!(compression_ratio(HEALTHY[0]) > 0.6);
    }
}
