//! Loops that hide from exact comparison: a line template said again and again with its
//! numbers climbing, the same rows coming back in a Markdown table, the same few items coming
//! back inside enumerations, and Chinese clauses that keep ending in one morpheme. Pure
//! functions over the answer's items and prose.

use std::collections::{HashMap, HashSet};

use super::super::lists::{self, Item};
use super::super::units::{intern, is_cjk, is_number, is_number_word, periodic_run, repeats};

/// `text` with every number (`12`, `0.62`, `1,000`, `３`) as `#`: lines that differ only in
/// their numbers share a template. A letter that labels the line (`E: 5. snake`) counts on as
/// a number does, and is masked too (`a.` and `b)` are list markers, already off).
pub(super) fn template(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let labelled = b.len() > 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b' ';
    let text = if labelled {
        out.push('#');
        &text[1..]
    } else {
        text
    };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() && !('０'..='９').contains(&c) {
            out.push(c);
            continue;
        }
        while let Some(&d) = chars.peek() {
            let digit = d.is_ascii_digit() || ('０'..='９').contains(&d);
            if digit || matches!(d, '.' | ',') {
                chars.next();
            } else {
                break;
            }
        }
        out.push('#');
    }
    out
}

/// What a template says besides its numbers: words of two letters or more, and CJK characters.
/// `7 x # = #` and `| # | # |` say nothing: a table of figures, not a line said again.
pub(super) fn words(template: &str) -> usize {
    template
        .split(|c: char| !c.is_alphabetic() || is_cjk(c))
        .filter(|w| w.chars().count() >= 2)
        .count()
        + template.chars().filter(|&c| is_cjk(c)).count()
}

/// The numbers in `text`, in order (`1,000` is a thousand).
fn numbers(text: &str) -> Vec<f64> {
    text.split(|c: char| !c.is_ascii_digit() && c != '.' && c != ',')
        .filter_map(|n| n.replace(',', "").trim_matches('.').parse().ok())
        .collect()
}

/// Whether `next` is `prev` with every number moved by the same step, and not by none: the
/// line says nothing but a counter. A table moves its columns by steps of their own (`# km =
/// # miles`: 1 and 0.62; `7 x # = #`: 1 and 7; squares: ever larger).
fn counts_on(prev: &[f64], next: &[f64]) -> bool {
    let Some(step) = next.first().zip(prev.first()).map(|(n, p)| n - p) else {
        return false;
    };
    step != 0.0
        && prev.len() == next.len()
        && prev
            .iter()
            .zip(next)
            .all(|(p, n)| (n - p - step).abs() < 1e-9)
}

/// Each item's [`template`], in order: worked out once for the shapes that compare lines with
/// their numbers masked ([`template_lines`], and items taking turns).
pub(super) fn templates(items: &[Item]) -> Vec<String> {
    items.iter().map(|i| template(&i.text)).collect()
}

/// The longest run of lines that share a template with words in it (numbers masked) while
/// every number in them climbs by one step, as `(lines, items)`: a line said again with a
/// counter (`Le décembre 7: 24`, `Le décembre 8: 25`...), out of the answer's items.
/// `templates` are the items' own, from [`templates`]. A label with something under it
/// (`Week 3:` and then the week's runs) heads its lines, as a Markdown heading does, and does not
/// count; a label with only another label or nothing under it (`Day 3:`, `Tuesday:`, `Day 4:`)
/// says nothing but its counter, and counts.
pub(super) fn template_lines(items: &[Item], templates: &[String]) -> (usize, usize) {
    let mut groups: HashMap<&str, Vec<Vec<f64>>> = HashMap::new();
    for (n, (item, t)) in items.iter().zip(templates).enumerate() {
        let heads = item.label && items.get(n + 1).is_some_and(|next| !next.label);
        if item.heading || heads {
            continue;
        }
        if t.contains('#') && words(t) >= 1 {
            groups.entry(t).or_default().push(numbers(&item.text));
        }
    }
    let best = groups
        .values()
        .map(|lines| {
            let (mut best, mut run) = (1, 1);
            for pair in lines.windows(2) {
                run = if counts_on(&pair[0], &pair[1]) {
                    run + 1
                } else {
                    1
                };
                best = best.max(run);
            }
            best
        })
        .max()
        .unwrap_or(0);
    (best, items.len())
}

/// Rows of the Markdown tables in `prose` that say again what an earlier row said, as
/// `(repeated, rows)`. Header rows (the line above a `|---|` rule) are left out: two tables
/// may share a header. Rows of figures and marks alone repeat by nature (`| Yes | Yes |`), so
/// a row counts only with a word in it that is not a cell of its own elsewhere.
pub(super) fn repeated_rows(prose: &str) -> (usize, usize) {
    let lines: Vec<&str> = prose.lines().map(str::trim).collect();
    let is_row = |l: &str| l.starts_with('|') && l.matches('|').count() >= 2;
    let is_rule = |l: &str| is_row(l) && !l.chars().any(char::is_alphanumeric);
    let mut seen = HashSet::new();
    let (mut repeated, mut rows) = (0, 0);
    for (i, l) in lines.iter().enumerate() {
        let header = lines.get(i + 1).is_some_and(|n| is_rule(n));
        if !is_row(l) || is_rule(l) || header {
            continue;
        }
        rows += 1;
        let cells: Vec<String> = l
            .trim_matches('|')
            .split('|')
            .map(|c| {
                c.split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_lowercase()
            })
            .collect();
        let worded = cells.iter().any(|c| words(&template(c)) >= 1);
        if !seen.insert(cells) && worded {
            repeated += 1;
        }
    }
    (repeated, rows)
}

/// An item of an enumeration is short: four words at most, and at most this many characters.
const ENUMERATION_ITEM_CHARS: usize = 40;

/// Items of enumerations (three items or more on one line of prose, after its label if any:
/// `Dinner: Chicken, Bran, Banana`, `苏苏、英国人、游议`) named `min_repeats` times or more on
/// their line, over the whole answer, as `(mentions, items)`: how many mentions such items
/// take, out of all items. Items are compared in lower case, marks at their ends off; answers
/// (`Yes, No, Yes`) are data, and long items are clauses of prose. A line with a number among
/// its items (`1, 2, Fizz, 4, Buzz`) or numbers in words (`one, two, three, one, two, three`)
/// is a sequence, not a list. A list a person writes names each thing once per line, twice by
/// a slip (`Tokyo, Shinjuku, Shinjuku`); a model stuck on a few words names them again and
/// again (`Chicken, Bran, Bran, Banana, Bran, Banana`, `Je, Je, Je`).
pub(super) fn enumerations(prose: &str, min_repeats: usize) -> (usize, usize) {
    let (mut mentions, mut counted) = (0, 0);
    for line in prose.lines() {
        // Items are separated by a comma and a space, or the Chinese enumeration comma. CSV,
        // whose commas have no space after them, is no enumeration of this kind (a row's cells
        // repeat by nature); nor are semicolons, which separate groups (`Lyon, France; Nice,
        // France`), nor the Chinese clause comma `，`.
        if !line.contains(", ") && !line.contains('、') {
            continue;
        }
        let mut parts: Vec<&str> = line.split('、').flat_map(|p| p.split(", ")).collect();
        if parts.len() < 3 {
            continue;
        }
        // The first item follows the line's label, if any (`Dinner: Chicken`).
        parts[0] = parts[0].rsplit([':', '：']).next().unwrap_or_default();
        let items: Vec<String> = parts
            .iter()
            .map(|p| {
                p.trim_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase()
            })
            .filter(|i| {
                !i.is_empty()
                    && i.split_whitespace().count() <= 4
                    && i.chars().count() <= ENUMERATION_ITEM_CHARS
                    && !lists::is_answer(i)
            })
            .collect();
        let sequence = items.iter().any(|i| is_number(i) || is_number_word(i));
        if items.len() < 3 || sequence {
            continue;
        }
        counted += items.len();
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for i in &items {
            *counts.entry(i).or_default() += 1;
        }
        mentions += counts
            .values()
            .filter(|&&n| n >= min_repeats)
            .sum::<usize>();
    }
    (mentions, counted)
}

/// The fewest Chinese clauses whose endings say anything about a loop.
pub(super) const MIN_CLAUSES: usize = 8;

/// Characters that bind clauses rather than say something: a unit made of them recurs in any
/// Chinese text.
const FUNCTION: &str =
    "的了是在和与及或也就都而着过之其这那个们吗呢吧啊把被从对为以于有我你他她它不一";

/// Chinese clauses (between punctuation marks and line ends), as their CJK characters, when the
/// text is mostly Chinese.
fn clauses(prose: &str) -> Vec<Vec<char>> {
    prose
        .split(|c: char| !is_cjk(c) && !c.is_alphanumeric() && c != ' ')
        .map(|c| c.chars().filter(|&c| is_cjk(c)).collect::<Vec<_>>())
        .filter(|c| c.len() >= 2)
        .collect()
}

/// How Chinese clauses end: the share of them that end in the most common unit of two to four
/// characters (none of them function characters), as `(share, clauses)`; 0 below
/// [`MIN_CLAUSES`] clauses, too few to say. A model babbling
/// around one morpheme (`茶文化`, `系统`) ends clause after clause in it; a poem's rhymes share
/// a final character, its refrain a line in a stanza, not most of its lines.
pub(super) fn clause_endings(prose: &str) -> (f64, usize) {
    let clauses = clauses(prose);
    if clauses.len() < MIN_CLAUSES {
        return (0.0, 0);
    }
    let mut counts: HashMap<&[char], usize> = HashMap::new();
    for c in &clauses {
        // One count per clause: the longest ending it shares is found through the shorter ones.
        for n in 2..=4.min(c.len()) {
            let end = &c[c.len() - n..];
            if end.iter().any(|ch| FUNCTION.contains(*ch)) {
                break;
            }
            // A clause that is no more than the unit is a list item (`北京大学`, `清华大学`):
            // a shared suffix there is a category, not a loop.
            if c.len() > n + 2 {
                *counts.entry(end).or_default() += 1;
            }
        }
    }
    let best = counts.values().copied().max().unwrap_or(0);
    (best as f64 / clauses.len() as f64, clauses.len())
}

/// The loop of words (marks left out) that ends the text, as `(period, words covered)`:
/// `min_repeats` repeats or more over `min_words` words or more. A period of numbers and
/// answers alone (`0 0 0 0`, `True False True False`) is a table's zeros or an answer key.
/// `words` are the text's units; the last may be a word `max_tokens` cut in half.
pub(super) fn word_tail(
    words: &[&str],
    min_repeats: usize,
    min_words: usize,
) -> Option<(usize, usize)> {
    let kept: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .collect();
    let ids = intern(&kept);
    let accept = repeats(min_repeats, min_words);
    let run = |len: usize| periodic_run(&ids[..len], true, &accept).map(|(p, _, c)| (len, p, c));
    let (end, p, covered) = run(ids.len()).or_else(|| run(ids.len().saturating_sub(1)))?;
    let data = kept[end - p..end]
        .iter()
        .all(|w| is_number(w) || lists::is_answer(&w.to_lowercase()));
    (!data).then_some((p, covered))
}

/// Lines of prose must average this many words (or CJK characters) for [`passages`] to read
/// them as paragraphs: an explanation's, not the lines of a poem, a list or a table, whose
/// parallel lines and refrains say phrases again by design.
pub(super) const PARAGRAPH_WORDS: usize = 30;
/// ...and this many for the share of words in recurring runs of four, which short repeated
/// lines (`蒹葭苍苍`) raise fast.
pub(super) const PASSAGE_LINE_WORDS: usize = 40;
/// A phrase of this many words said again and again in paragraphs is a loop (how often:
/// `phrase_min_repeats`). In text mostly in CJK characters, twice as many characters: six
/// characters are a term (`中国传统乐器`), which an answer names as often as it likes.
pub(super) const PHRASE_WORDS: usize = 6;

/// Phrases said again in paragraphs of prose: `(share, repeats)`, the share of words inside a
/// run of four said three times or more (0 for lines under [`PASSAGE_LINE_WORDS`] on average),
/// and how often the most said phrase of [`PHRASE_WORDS`] (or twice as many CJK characters) comes (0 for lines under
/// [`PARAGRAPH_WORDS`]). A model stuck on a phrase says it clause after clause, each time in
/// a new sentence, so no sentence repeats whole (`用来让人们更好地工作`, `we use plants to make
/// things that are not plants`). Words are compared in lower case, and single letters (the
/// initials of `A.I.F.K.E`) are no words of a phrase. Both 0 for texts under `min_words`.
pub(super) fn passages(prose: &str, prose_units: &[&str], min_words: usize) -> (f64, usize) {
    let is_word = |w: &str| w.chars().any(char::is_alphanumeric) && !(w.len() == 1 && w.is_ascii());
    let kept: Vec<&str> = prose_units.iter().copied().filter(|w| is_word(w)).collect();
    let lines = prose.lines().filter(|l| !l.trim().is_empty()).count();
    if kept.len() < min_words.max(PHRASE_WORDS) || kept.len() < PARAGRAPH_WORDS * lines {
        return (0.0, 0);
    }
    let words: Vec<String> = kept.iter().map(|w| w.to_lowercase()).collect();
    let ids = intern(&words);
    let cjk = words
        .iter()
        .filter(|w| w.chars().next().is_some_and(is_cjk))
        .count();
    let phrase = if 2 * cjk > words.len() {
        2 * PHRASE_WORDS
    } else {
        PHRASE_WORDS
    };
    let mut phrases: HashMap<&[u32], usize> = HashMap::new();
    for gram in ids.windows(phrase) {
        *phrases.entry(gram).or_default() += 1;
    }
    let said = phrases.values().copied().max().unwrap_or(0);
    if words.len() < PASSAGE_LINE_WORDS * lines {
        return (0.0, said);
    }
    let mut counts: HashMap<&[u32], usize> = HashMap::new();
    for gram in ids.windows(4) {
        *counts.entry(gram).or_default() += 1;
    }
    let mut covered = vec![false; ids.len()];
    for (i, gram) in ids.windows(4).enumerate() {
        if counts[gram] >= 3 {
            covered[i..i + 4].fill(true);
        }
    }
    let share = covered.iter().filter(|&&c| c).count() as f64 / ids.len() as f64;
    (share, said)
}

#[cfg(test)]
mod tests {
    use super::super::super::lists;
    use super::*;

    #[test]
    fn templates_mask_numbers() {
        assert_eq!(template("le décembre 12: 29"), "le décembre #: #");
        assert_eq!(
            template("1 km = 0.62 miles, 1,000 m"),
            "# km = # miles, # m"
        );
        assert_eq!(words("# x # = #"), 0);
        assert_eq!(words("en especie #, la mesa"), 4);
        assert_eq!(words("第#天：学习"), 4);
        // A letter that labels the line is masked; a word in front is not.
        assert_eq!(template("E: 5. snake"), "#: # snake");
        assert_eq!(template("Eat 5 apples"), "Eat # apples");
    }

    fn template_lines_of(text: &str) -> (usize, usize) {
        let items = lists::items(text, false);
        template_lines(&items, &templates(&items))
    }

    #[test]
    fn template_lines_count_distinct_lines() {
        let text: String = (1..=13)
            .map(|n| format!("Le décembre {n}: {}\n", n + 17))
            .collect();
        assert_eq!(template_lines_of(&text), (13, 13));
        // A conversion table moves its columns by steps of their own.
        let km: String = (1..=12)
            .map(|n| format!("{n} km = {:.2} miles\n", n as f64 * 0.621))
            .collect();
        assert_eq!(template_lines_of(&km).0, 1);
        assert_eq!(numbers("1,000 m is 1.5 km."), vec![1000.0, 1.5]);
        let table: String = (1..=10).map(|n| format!("7 x {n} = {}\n", 7 * n)).collect();
        assert_eq!(template_lines_of(&table).0, 0);
    }

    #[test]
    fn repeated_rows_skip_headers_and_figures() {
        let planets = "| Planet | Moons |\n|---|---|\n| Jupiter | 95 |\n| Saturn | 146 |\n\n| Planet | Moons |\n|---|---|\n| Jupiter | 95 |\n| Saturn | 146 |";
        assert_eq!(repeated_rows(planets), (2, 4));
        let figures = "| a | b |\n|---|---|\n| 1 | 2 |\n| 1 | 2 |";
        assert_eq!(repeated_rows(figures), (0, 2));
    }

    #[test]
    fn enumerations_count_items_named_again_and_again_on_their_line() {
        let meals = "Dinner: Chicken, Bran, Shrimp, Bran, Bran, Chicken, Banana, Chai\nLunch: Banana, Chicken, Banana, Chicken, Banana";
        assert_eq!(enumerations(meals, 3), (6, 13));
        let days = "Jeu: Je, Je, Je, Je, Je,\nLa: La, La, La,";
        assert_eq!(enumerations(days, 3), (8, 8));
        // A name said twice on a line is a slip; the next line may name it again.
        let slips = "Japan: Tokyo, Shinjuku, Shinjuku, Tokyo\nIndia: Mumbai, New Delhi, Mumbai\nIndia: Mumbai, Chennai, Pune";
        assert_eq!(enumerations(slips, 3), (0, 10));
        // Answers, sequences, CSV cells, groups between semicolons, Chinese clauses and clauses
        // of prose are no items said again.
        let data = "Key: Yes, No, Yes, Yes\nScores: 10, 10, 12, 10\n1, 2, Fizz, 4, Buzz, Fizz, 7, 8, Fizz, Buzz\nOne, two, three, one, two, three, one, two, three\nalice,30,engineer,engineer,engineer\nStops: Lyon, France; Nice, France; Paris, France\n加油，加油，加油！\nWe went to the old market on the hill, then we went to the old market on the hill, then we went to the old market on the hill.";
        assert_eq!(enumerations(data, 3).0, 0);
        let names = "草梨、美博、苏苏、英国人、苏苏、游议、宇派、苏苏、英国人、苏苏";
        assert_eq!(enumerations(names, 3), (4, 10));
    }

    fn word_tail8(words: &[&str]) -> Option<(usize, usize)> {
        word_tail(words, 4, 8)
    }

    #[test]
    fn word_tail_sees_words_through_changing_marks() {
        let words = |t: &'static str| crate::checks::units::units(t);
        // Eight times B2B, between marks that change: a tail loop of units sees no period.
        let b2b = "说B2B是一个技术：\n2.B2B！B2B！：B2B！B2B！B2B！；B2B！；；B2B！B2B";
        assert_eq!(word_tail8(&words(b2b)), Some((1, 8)));
        // Four words, said four times, the last cut by max_tokens.
        let names = "夏雨、苏苏、英国人、游议、苏苏、英国人、游议、苏苏、英国人、游议、苏苏、英国人、游议、苏";
        assert!(word_tail8(&words(names)).is_some());
        // Seven times is not yet a loop; zeros ending a table and an answer key are data.
        assert_eq!(word_tail8(&words("ha ha ha ha ha ha ha")), None);
        let zeros = "| a | 0 | 0 | 0 | 0 |\n| b | 0 | 0 | 0 | 0 |\n| c | 0 | 0 | 0 | 0 |";
        assert_eq!(word_tail8(&words(zeros)), None);
        let key = "1. True\n2. False\n3. True\n4. False\n5. True\n6. False\n7. True\n8. False";
        assert_eq!(word_tail8(&words(key)), None);
    }

    fn passages_of(prose: &str) -> (f64, usize) {
        passages(prose, &crate::checks::units::units(prose), 40)
    }

    #[test]
    fn passages_need_paragraphs_and_phrases_said_three_times() {
        let stuck = "人工智能是一种新的技术，用来让人们更好地工作，不仅是让人更好地工作，还有其他的技术，其中有人工智能的实现方式，是用来让人们更好地工作。人工智能是一种新的技术，用来让人们更好地工作，还有其他技术。";
        let (share, said) = passages_of(stuck);
        assert!(share >= 0.5, "{share}");
        // In Chinese a phrase is twelve characters: `用来让人们更好地工作` is ten.
        assert!(said < 3, "{said}");
        // A term of six characters named four times is the answer's topic, not a loop.
        let term = "中国传统乐器有很多种，古筝是一种中国传统乐器，琵琶也是一种中国传统乐器，二胡是北方常见的中国传统乐器，笛子用竹子做成，也是中国传统乐器里最常见的一种，学起来不难。";
        assert_eq!(passages_of(term).1, 1);
        // The same words as verse, a line each: parallel lines and refrains are by design.
        let verse = stuck.replace('，', "\n");
        assert_eq!(passages_of(&verse), (0.0, 0));
        let news = "熊猫生活在四川的山林里，主要吃竹子，每天要花十几个小时进食。它们性情温和，行动缓慢，冬天也不冬眠。科学家估计野生熊猫约有一千八百只，保护区的建立让数量逐年回升。";
        assert!(passages_of(news).0 < 0.3);
        assert!(passages_of(news).1 < 2);
        // A phrase of six words said four times in English paragraphs, in other sentences.
        let plants = "So, we use plants to make things that are not plants. It is a big job for the leaves of every green plant on earth, and the sun helps. When we use plants to make things that are not plants we call it photosynthesis, and it feeds us.\nWe use plants to make things that are not plants, and the roots take water from the ground to help them. So, we use plants to make things that are not plants, and it goes on.";
        assert_eq!(passages_of(plants).1, 4);
    }

    #[test]
    fn clause_endings_find_the_morpheme() {
        let salad = "中国的茶文化，是一种古老茶文化，人们喜欢喝茶文化，茶叶来自茶文化，饮茶成为茶文化，泡茶讲究茶文化，茶具体现茶文化，茶馆传承茶文化。";
        let (share, n) = clause_endings(salad);
        assert_eq!(n, 8);
        assert!(share > 0.8, "{share}");
        let list = "北京大学、清华大学、复旦大学、南京大学、浙江大学、武汉大学";
        assert_eq!(clause_endings(list).0, 0.0);
    }
}
