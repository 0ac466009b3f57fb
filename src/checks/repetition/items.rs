//! List items that loop: a cycle of items back to back, two items taking turns, items that
//! keep coming back within their section.

use std::collections::HashMap;

use super::shapes;
use super::thresholds::Thresholds;
use crate::checks::lists::Item;
use crate::checks::units::{periodic_run, repeats};

/// The share of list items whose text comes back at least `times` times within its section
/// (the lines between two lines without a marker, such as `Monday` or `Ingredients:`), over
/// lists of at least `min_items`. A schedule or a checklist may give each day the same tasks;
/// a model stuck on a few items repeats them where it is. Refrains and choruses are lines, not
/// list items: they do not count, nor do answers (`True`, `No`), which an answer key repeats by
/// nature.
pub(super) fn recurring_ratio(items: &[Item], times: usize, min_items: usize) -> f64 {
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

/// Each item as a small number, in order of first appearance, for the items `counts` keeps;
/// every other item gets a number of its own, so it never comes back.
pub(super) fn item_ids(items: &[Item], counts: impl Fn(&Item) -> bool) -> Vec<u32> {
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
pub(super) fn item_cycle(items: &[Item], t: &Thresholds) -> Option<(usize, usize)> {
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
pub(super) fn taking_turns(
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
