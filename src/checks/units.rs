//! The units the degeneration detectors count: a word, one CJK character, or a run of one
//! repeated punctuation mark — so English and Chinese are measured alike.

use std::collections::HashMap;

pub fn is_cjk(c: char) -> bool {
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

/// Each distinct value as a small number, in order of first appearance, so sequences compare
/// by integers.
pub fn intern<'a, T: AsRef<str> + ?Sized + 'a>(
    values: impl IntoIterator<Item = &'a T>,
) -> Vec<u32> {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    values
        .into_iter()
        .map(|v| {
            let next = ids.len() as u32;
            *ids.entry(v.as_ref()).or_insert(next)
        })
        .collect()
}

/// The longest stretch of `ids` that is one period repeated back to back, for the shortest
/// period that reaches `min_repeats` whole repeats over at least `min_len` ids:
/// `(period, start, covered)`. `at_tail` looks only at the stretch that ends the sequence.
pub fn periodic_run(
    ids: &[u32],
    min_repeats: usize,
    min_len: usize,
    at_tail: bool,
) -> Option<(usize, usize, usize)> {
    let n = ids.len();
    let max_period = n / min_repeats.max(2);
    for p in 1..=max_period {
        let mut best: Option<(usize, usize)> = None;
        if at_tail {
            let mut run = 0;
            while run + p < n && ids[n - 1 - run] == ids[n - 1 - run - p] {
                run += 1;
            }
            best = Some((n - run - p, run + p));
        } else {
            // Every maximal stretch where ids[i] == ids[i - p].
            let mut i = p;
            while i < n {
                if ids[i] != ids[i - p] {
                    i += 1;
                    continue;
                }
                let begin = i;
                while i < n && ids[i] == ids[i - p] {
                    i += 1;
                }
                let covered = i - begin + p;
                if best.is_none_or(|(_, c)| covered > c) {
                    best = Some((begin - p, covered));
                }
            }
        }
        if let Some((start, covered)) = best {
            if covered / p >= min_repeats && covered >= min_len {
                return Some((p, start, covered));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_split_words_cjk_and_punctuation_runs() {
        assert_eq!(
            units("Hello, world--ok 巴黎是首都。"),
            vec!["Hello", ",", "world", "--", "ok", "巴", "黎", "是", "首", "都", "。"]
        );
        assert_eq!(units("don't |---|"), vec!["don't", "|", "---", "|"]);
    }

    #[test]
    fn periodic_runs_anywhere_or_at_the_tail() {
        let ids = intern(["x", "a", "b", "a", "b", "a", "b", "y"]);
        assert_eq!(periodic_run(&ids, 3, 6, false), Some((2, 1, 6)));
        assert_eq!(periodic_run(&ids, 3, 6, true), None);
        let ids = intern(["x", "a", "b", "c", "a", "b", "c", "a", "b", "c", "a"]);
        assert_eq!(periodic_run(&ids, 3, 6, true), Some((3, 1, 10)));
        // Two repeats are not three.
        let ids = intern(["a", "b", "c", "a", "b", "c"]);
        assert_eq!(periodic_run(&ids, 3, 6, false), None);
        assert_eq!(periodic_run(&ids, 2, 6, false), Some((3, 0, 6)));
    }
}
