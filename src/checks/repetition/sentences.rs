//! Loops a reader sees sentence by sentence: a whole sentence said again word for word, and
//! sentence after sentence ending in the same words. Both hide from the unit detectors when
//! the model says something new between the repeats, so that no unit sequence comes back to
//! back and the 4-grams that repeat stay below the compression ratio. Pure functions over the
//! answer's lines outside code, one pass each.

use std::collections::{HashMap, HashSet};

use super::super::lists;
use super::super::units::{is_number, is_ordinal_word, units};

/// How many words (or CJK characters) end a sentence in [`endings`].
pub(super) const ENDING_UNITS: usize = 4;

/// The least share of the sentences that end alike for a loop: most sentences of a paragraph
/// stuck on a phrase end in it, where a recipe's or a plan's few shared endings are fewer.
pub(super) const ENDING_SHARE: f64 = 0.4;

fn is_end(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '。' | '！' | '？')
}

/// The sentences of the answer's lines outside code, each with whether it ends in a mark of its
/// own (a line end is no full stop) and whether its line, marker off, says again a whole line
/// said before.
fn sentences(text: &str) -> impl Iterator<Item = (&str, bool, bool)> {
    let mut lines = HashSet::new();
    lists::text_lines(text).flat_map(move |(line, _)| {
        let line = line.trim();
        let again = !line.is_empty() && !lines.insert(line);
        // Split after every run of end marks, keeping them with their sentence.
        let mut parts = Vec::new();
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if is_end(c)
                && !chars
                    .peek()
                    .is_some_and(|&(_, d)| is_end(d) || d == '"' || d == '”')
            {
                let end = i + c.len_utf8();
                let next = chars.peek().map_or(line.len(), |&(j, _)| j);
                // A decimal point or an abbreviation glued to the next word is no end (`3.5`).
                let glued = line[next..]
                    .chars()
                    .next()
                    .is_some_and(|d| d.is_alphanumeric())
                    && c == '.';
                if !glued {
                    parts.push(&line[start..end]);
                    start = end;
                }
            }
        }
        parts.push(&line[start..]);
        parts
            .into_iter()
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(move |p| {
                let marked = p.trim_end_matches(['"', '”', '\'', ')']).ends_with(is_end);
                (p, marked, again)
            })
    })
}

/// A sentence's words and CJK characters, lower case: what it says, marks aside.
fn words(sentence: &str) -> Vec<String> {
    units(sentence)
        .into_iter()
        .filter(|u| u.chars().any(char::is_alphanumeric))
        .map(str::to_lowercase)
        .collect()
}

/// Sentences of at least `min_units` words (a refrain or a chorus line is shorter: the
/// corpus's longest is seven) that end in a mark of their own and say
/// word for word what an earlier one said, as `(repeated, sentences)`. A whole line said again
/// is left to the line detectors (an outline may close on the same line twice), unless the
/// answer says nothing else: one sentence said twice, and no more, is no answer.
pub(super) fn repeated_sentences(text: &str, min_units: usize) -> (usize, usize) {
    let mut lines = lists::text_lines(text)
        .map(|(line, _)| line.trim())
        .filter(|l| !l.is_empty())
        .peekable();
    let first = lines.next();
    let one_line = lines.peek().is_some() && lines.all(|l| Some(l) == first);
    let mut seen = HashSet::new();
    let (mut repeated, mut counted) = (0, 0);
    for (sentence, marked, line_again) in sentences(text) {
        if !marked || (line_again && !one_line) {
            continue;
        }
        // Numbers masked, figures or ordinals: the same sentence with a counter in it
        // (`你可以在3日内...`, `你可以在4日内...`, `On the second day, plan a new adventure.`)
        // is said again all the same.
        let mut words = words(sentence);
        for w in &mut words {
            if is_number(w) || is_ordinal_word(w) {
                "#".clone_into(w);
            }
        }
        if words.len() < min_units {
            continue;
        }
        counted += 1;
        if !seen.insert(words) {
            repeated += 1;
        }
    }
    (repeated, counted)
}

/// How many sentences (or lines) end in the answer's most common last [`ENDING_UNITS`] words,
/// out of those long enough to have an ending beside it, as `(alike, sentences)`. A model
/// stuck on a phrase closes sentence after sentence with it (`..., which is a must-do in
/// Paris.`); an ending with a figure in it is a table's or a checklist's column.
pub(super) fn endings(text: &str) -> (usize, usize) {
    let mut counts: HashMap<Vec<String>, usize> = HashMap::new();
    let mut counted = 0;
    for (sentence, _, _) in sentences(text) {
        let mut words = words(sentence);
        if words.len() < ENDING_UNITS + 2 {
            continue;
        }
        counted += 1;
        let ending = words.split_off(words.len() - ENDING_UNITS);
        if ending.iter().any(|w| w.chars().any(|c| c.is_numeric())) {
            continue;
        }
        *counts.entry(ending).or_default() += 1;
    }
    (counts.into_values().max().unwrap_or(0), counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_said_again_counts_once_it_is_long() {
        let twice = "The Silk Road was a network of trade routes. It ran from China to Rome.\n\nThe Silk Road was a network of trade routes. It is long gone.";
        assert_eq!(repeated_sentences(twice, 8), (1, 2));
        // A refrain line is shorter than a sentence of prose.
        let refrain = "Spring is here, the birds sing.\nThe rain falls down.\nSpring is here, the birds sing.";
        assert_eq!(repeated_sentences(refrain, 8).0, 0);
        // A whole line said again is the line detectors' to judge...
        let outline = "Outline:\n7. Conclusion: this essay will summarize the main points of the essay.\n8. Conclusion: this essay will summarize the main points of the essay.";
        assert_eq!(repeated_sentences(outline, 8).0, 0);
        // ...unless the answer is that line and nothing else.
        let only = "Je ne comprends pas de la langue française.\n\nJe ne comprends pas de la langue française.";
        assert_eq!(repeated_sentences(only, 8), (1, 2));
        // A line without a full stop (a chorus line) is no sentence said again.
        let chorus = "We will stand together through the rain and sun\nWe will stand together through the rain and sun";
        assert_eq!(repeated_sentences(chorus, 8).0, 0);
    }

    #[test]
    fn a_sentence_with_only_its_counter_changed_is_said_again() {
        let days = "你可以在3日内去北京的故宫看一看日超红的风景。你可以在4日内去北京的故宫看一看日超红的风景。";
        assert_eq!(repeated_sentences(days, 8), (1, 2));
        let plan = "On day 1 we walk along the river to the old town. On day 2 we take the train up into the hills.";
        assert_eq!(repeated_sentences(plan, 8).0, 0);
        // A counter in words is masked as one in figures is.
        let adventure = "On the second day, plan a new adventure in town. On the third day, plan a new adventure in town.";
        assert_eq!(repeated_sentences(adventure, 8), (1, 2));
        let days = "On the second day, walk along the river to the old town. On the third day, take the train up into the hills.";
        assert_eq!(repeated_sentences(days, 8).0, 0);
        // A counting song's verses differ by a number in words, which is no counter.
        let ducks = "Five little ducks went out one day, over the hill and far away. Four little ducks went out one day, over the hill and far away.";
        assert_eq!(repeated_sentences(ducks, 8).0, 0);
    }

    #[test]
    fn endings_find_the_phrase_that_closes_every_sentence() {
        let paris = "I'll book a hotel, which is a must-do in Paris. I'll see a show, which is a must-do in Paris. I'll tour the Louvre, which is a must-do in Paris. I'll climb the tower, which is a must-do in Paris.";
        assert_eq!(endings(paris), (4, 4));
        let table = "| Apples | 2 kg | 3 euros |\n| Pears | 2 kg | 3 euros |";
        assert_eq!(endings(table).0, 0);
    }
}
