//! The units the degeneration detectors count: a word, one CJK character or other symbol
//! (emoji, full-width punctuation), or a run of one repeated ASCII punctuation mark or rule
//! character — so English and Chinese are measured alike. A "word" longer than any real one is
//! a loop written without spaces (`123456789123456789...`): it is read character by character.

use std::collections::HashMap;

pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3400..=0x4DBF   // CJK Extension A
        | 0x4E00..=0x9FFF   // CJK Unified Ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xF900..=0xFAFF   // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F)
}

/// A unit of ASCII digits alone (`3`, `1922`): a counter or a figure, which loops and data
/// both hold.
pub(crate) fn is_number(unit: &str) -> bool {
    unit.chars().all(|c| c.is_ascii_digit())
}

/// English numbers written as words, up to twenty and the tens.
const CARDINALS: &[&str] = &[
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
    "hundred",
];

/// A word (lower case) that is a number written out, as a count (`three`) or an ordinal
/// (`third`).
pub(crate) fn is_number_word(word: &str) -> bool {
    CARDINALS.contains(&word) || is_ordinal_word(word)
}

/// English ordinals written as words, up to the twentieth.
const ORDINALS: &[&str] = &[
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
];

/// A word (lower case) that is an ordinal written out: `second`, `third` (`On the second
/// day...`, `On the third day...`: a counter in words). Cardinals (`five`, `four`) are not:
/// a counting song's verses (`Five little ducks went out one day...`) differ by them.
pub(crate) fn is_ordinal_word(word: &str) -> bool {
    ORDINALS.contains(&word)
}

/// A character that is a unit by itself: CJK, and symbols outside ASCII (emoji, full-width
/// punctuation) — except the line-drawing characters and dashes that rules are drawn with,
/// whose runs stay one unit like `----`.
fn stands_alone(c: char) -> bool {
    is_cjk(c)
        || (!c.is_ascii()
            && !c.is_alphanumeric()
            && !matches!(c as u32, 0x2010..=0x2015 | 0x2026 | 0x2500..=0x257F))
}

/// Words longer than this are read character by character.
const LONGEST_WORD: usize = 24;

/// Splits text into units: a word (a run of letters and digits), one CJK character, or a run of
/// one repeated punctuation mark (so `----` in a table rule is one unit, not a loop).
pub(crate) fn units(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if c.is_whitespace() {
            continue;
        }
        let mut end = i + c.len_utf8();
        if stands_alone(c) {
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
        let unit = &text[i..end];
        if unit.chars().nth(LONGEST_WORD).is_none() {
            out.push(unit);
        } else if unit.contains('_') {
            // A long snake_case run is read word by word (`LANDLESS_LANDLESS_...`), each
            // underscore a unit of its own.
            let mut start = 0;
            for (j, _) in unit.match_indices('_') {
                push_word(&mut out, &unit[start..j]);
                out.push(&unit[j..j + 1]);
                start = j + 1;
            }
            push_word(&mut out, &unit[start..]);
        } else {
            push_word(&mut out, unit);
        }
    }
    out
}

/// A word as one unit, or, longer than [`LONGEST_WORD`] and all letters and digits (a loop
/// written without spaces), character by character.
fn push_word<'a>(out: &mut Vec<&'a str>, word: &'a str) {
    if word.is_empty() {
        return;
    }
    if word.chars().nth(LONGEST_WORD).is_some() && word.chars().all(char::is_alphanumeric) {
        out.extend(word.char_indices().map(|(j, c)| &word[j..j + c.len_utf8()]));
    } else {
        out.push(word);
    }
}

/// Each distinct value as a small number, in order of first appearance, so sequences compare
/// by integers.
pub(crate) fn intern<'a, T: AsRef<str> + ?Sized + 'a>(
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

/// The shortest period whose back-to-back repeats `accept` (period, units covered): a stretch
/// of `ids` that is one sequence said again and again. `at_tail` looks only at the stretch that
/// ends the sequence; otherwise the longest stretch for each period counts. Returns
/// `(period, start, covered)`.
pub(crate) fn periodic_run(
    ids: &[u32],
    at_tail: bool,
    accept: impl Fn(usize, usize) -> bool,
) -> Option<(usize, usize, usize)> {
    let n = ids.len();
    for p in 1..=n / 2 {
        let (start, covered) = if at_tail {
            let mut run = 0;
            while run + p < n && ids[n - 1 - run] == ids[n - 1 - run - p] {
                run += 1;
            }
            (n - run - p, run + p)
        } else {
            // The longest stretch where ids[i] == ids[i - p].
            let (mut best, mut i) = ((0, 0), p);
            while i < n {
                if ids[i] != ids[i - p] {
                    i += 1;
                    continue;
                }
                let begin = i;
                while i < n && ids[i] == ids[i - p] {
                    i += 1;
                }
                if i - begin + p > best.1 {
                    best = (begin - p, i - begin + p);
                }
            }
            best
        };
        if covered >= p && accept(p, covered) {
            return Some((p, start, covered));
        }
    }
    None
}

/// `periodic_run`'s usual test: at least `repeats` whole repeats over at least `len` ids.
pub(crate) fn repeats(repeats: usize, len: usize) -> impl Fn(usize, usize) -> bool {
    move |p, covered| covered / p >= repeats && covered >= len
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
        // A word no language has: a loop without spaces, read by character.
        assert_eq!(units(&"123".repeat(9)).len(), 27);
        assert_eq!(units("Donaudampfschifffahrt ok").len(), 2);
        // A long snake_case run, word by word; a short one stays one word.
        assert_eq!(
            units("LANDING_LANDLESS_LANDLESS_LANDLESS"),
            vec!["LANDING", "_", "LANDLESS", "_", "LANDLESS", "_", "LANDLESS"]
        );
        assert_eq!(units("max_tokens").len(), 1);
        // Emoji and full-width marks are units of their own; ASCII and line-drawing rules stay one.
        assert_eq!(units("🌊🌊🌊！！"), vec!["🌊", "🌊", "🌊", "！", "！"]);
        assert_eq!(units("━━━━ ==== ……"), vec!["━━━━", "====", "……"]);
    }

    #[test]
    fn periodic_runs_anywhere_or_at_the_tail() {
        let ids = intern(["x", "a", "b", "a", "b", "a", "b", "y"]);
        assert_eq!(periodic_run(&ids, false, repeats(3, 6)), Some((2, 1, 6)));
        assert_eq!(periodic_run(&ids, true, repeats(3, 6)), None);
        let ids = intern(["x", "a", "b", "c", "a", "b", "c", "a", "b", "c", "a"]);
        assert_eq!(periodic_run(&ids, true, repeats(3, 6)), Some((3, 1, 10)));
        // Two repeats are not three.
        let ids = intern(["a", "b", "c", "a", "b", "c"]);
        assert_eq!(periodic_run(&ids, false, repeats(3, 6)), None);
        assert_eq!(periodic_run(&ids, false, repeats(2, 6)), Some((3, 0, 6)));
    }
}
