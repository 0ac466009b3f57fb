//! Reading an answer's lines the way a person reads a list: the enumeration marker (`1.`, `a)`,
//! `-`, `•`, `一、`, `（1）`, `第一步：`...) is taken off, so items are compared by what they say
//! and a counter that keeps climbing no longer hides items that come back. Code blocks are left
//! as written, and lines of punctuation alone (`}`, `|---|`) are no items.

use std::sync::LazyLock;

use regex::Regex;

use super::units::is_cjk;

/// An enumeration marker at the start of a line (group 1), followed by a space, the end of the
/// line or, as Chinese writes it, straight by the item (group 2 is that next character).
/// Numbers are ASCII or fullwidth digits: Unicode's `\d` (every script's digits) would make this
/// pattern 120 KB compiled and its search cache 75 KB more, where it is 33 and 28 KB.
static MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        ^\s*(
            [-*+•·●○◦▪▫■□►➢✓✔–—]                                  # bullets
          | \#{1,6}                                                # Markdown headings
          | (?i:(?:step|item|tip|point|no\.?|number)\s*)?[0-9０-９]{1,3}(?:\.[0-9０-９]{1,3})+[.):：]?  # 2.1  2.1.  1.1.2:
          | (?i:(?:step|item|tip|point|no\.?|number)\s*)?[0-9０-９]{1,3}[.)]              # 1.  1)  Step 3.
          | (?i:(?:step|item|tip|point)\s*)[0-9０-９]{1,3}\s*[:：]                        # Step 3:
          | [(（\[][0-9０-９]{1,3}[)）\]]                                   # (1)  （1）  [1]
          | [0-9０-９]{1,3}\s*[、：．）]                                     # 1、  1）
          | [a-zA-Z][.)]                                           # a.  B)
          | (?i:[ivx]{1,4})[.)]                                    # iv.  II)
          | [一二三四五六七八九十]{1,3}[、.．]                          # 一、
          | [(（][一二三四五六七八九十]{1,3}[)）]                       # （一）
          | 第[一二三四五六七八九十0-9]{1,3}[步章节条个点部]?[：:、.．,，]?   # 第一步：
          | [\u{2460}-\u{2473}]                                    # ① .. ⑳
        )(\s|$|.)",
    )
    .expect("the marker pattern compiles")
});

/// Compiles the marker pattern now. Its first use would otherwise compile it inside a run's
/// judging, on a runtime thread, while other threads wanting it wait: a few milliseconds in
/// which the arrival stamps of other runs in flight are late.
pub(crate) fn compile_now() {
    LazyLock::force(&MARKER);
}

/// `line` without its enumeration marker, or the line itself when the marker is all it holds
/// (`1.` alone, or a bare number while counting).
pub(crate) fn strip_marker(line: &str) -> &str {
    let mut rest = line.trim();
    // A marker may stack on another (`- 1. `, `### 2) `): take off two at most.
    for _ in 0..2 {
        let Some(c) = MARKER.captures(rest) else {
            break;
        };
        let (Some(marker), next) = (c.get(1), c.get(2)) else {
            break;
        };
        let next = next.map_or("", |m| m.as_str());
        // A marker followed straight by more text is one only in Chinese (`1.苹果`, `一、苹果`);
        // `3.5kg`, `a.m.` or `e.g.` are not markers.
        let glued = next.chars().next().is_some_and(|c| !c.is_whitespace());
        let cjk_marker = marker.as_str().chars().any(is_cjk)
            || marker.as_str().ends_with(['、', '：', '．', '）']);
        if glued && !next.chars().next().is_some_and(is_cjk) && !cjk_marker {
            break;
        }
        let after = rest[marker.end()..].trim_start();
        if after.is_empty() {
            break;
        }
        rest = after;
    }
    rest
}

/// One line of the answer as a reader compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    /// The line without its marker, in a normal form (lower case, emphasis and trailing
    /// punctuation off, spaces collapsed).
    pub text: String,
    /// It had an enumeration marker: it is an item of a list.
    pub listed: bool,
    /// A Markdown heading (`### Monday`): it starts a section.
    pub heading: bool,
    /// It ends in a colon (`Day 3:`, `**Tuesday**:`, `做法：`): it announces what comes under it.
    pub label: bool,
}

/// Answers from a fixed set, as an answer key gives them: `True`, `no`, `B`, `对`.
const ANSWERS: &[&str] = &[
    "true",
    "false",
    "yes",
    "no",
    "correct",
    "incorrect",
    "right",
    "wrong",
    "对",
    "错",
    "不对",
    "是",
    "否",
    "正确",
    "错误",
];

impl Item {
    /// The item is one answer from a fixed set (`True`, `No`, a choice letter, `对`): an answer
    /// key repeats these by nature (`1. True 2. False 3. True...`), so they are no sign of a
    /// loop among items.
    pub(crate) fn is_answer(&self) -> bool {
        is_answer(&self.text)
    }
}

/// `text` is one answer from a fixed set (`True`, `(B)`, `对`), brackets aside.
pub(crate) fn is_answer(text: &str) -> bool {
    let t = text.trim_matches(|c| matches!(c, '(' | ')' | '[' | ']' | '（' | '）'));
    let mut chars = t.chars();
    let one_letter =
        chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.next().is_none();
    one_letter || ANSWERS.contains(&t)
}

impl AsRef<str> for Item {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

/// Where a line of an answer stands: in its text, on a code fence, or inside a code block.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Text,
    Fence,
    Code,
}

/// Each line of `text` with its place. Only a closed block is code: after a fence that never
/// closes (a model that writes ```json and then loops) the lines are read as text. No
/// allocation: it runs while a stream is read when a probe stops on a certain loop.
fn lines_placed(text: &str) -> impl Iterator<Item = (&str, Place)> {
    let is_fence = |line: &str| line.trim_start().starts_with("```");
    let fences = text.lines().filter(|l| is_fence(l)).count();
    // With an odd count, the last fence opens nothing.
    let paired = fences - fences % 2;
    let (mut seen, mut in_code) = (0, false);
    text.lines().map(move |line| {
        if is_fence(line) {
            seen += 1;
            in_code ^= seen <= paired;
            (line, Place::Fence)
        } else if in_code {
            (line, Place::Code)
        } else {
            (line, Place::Text)
        }
    })
}

/// The answer's items: every line outside code blocks, marker off. Blank lines and lines of
/// punctuation alone are skipped. `complete_only` leaves out a last line still being written.
pub(crate) fn items(text: &str, complete_only: bool) -> Vec<Item> {
    let unfinished = complete_only && !text.is_empty() && !text.ends_with('\n');
    let complete = text.lines().count() - usize::from(unfinished);
    let mut out = Vec::new();
    for (line, place) in lines_placed(text).take(complete) {
        if place != Place::Text {
            continue;
        }
        let stripped = strip_marker(line);
        let item = normal_form(stripped);
        if item.chars().any(|c| c.is_alphanumeric()) {
            out.push(Item {
                text: item,
                listed: stripped.len() < line.trim().len(),
                heading: line.trim_start().starts_with('#'),
                label: stripped.trim_end_matches(['*', ' ']).ends_with([':', '：']),
            });
        }
    }
    out
}

/// The text with every list marker off (code blocks as written), for the unit detectors: a
/// numbered list whose items cycle is then a plain loop.
pub(crate) fn without_markers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (line, place) in lines_placed(text) {
        out.push_str(match place {
            Place::Text => strip_marker(line),
            _ => line,
        });
        out.push('\n');
    }
    out
}

/// The prose of the answer: markers off as in [`without_markers`], code blocks left out. Code
/// repeats itself by nature (tags, keywords, the same call on line after line); a loop inside
/// code is still a loop at the text's end.
pub(crate) fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (line, place) in lines_placed(text) {
        if place == Place::Text {
            out.push_str(strip_marker(line));
            out.push('\n');
        }
    }
    out
}

/// The answer's lines outside code blocks, marker off, each with whether it had one (an item of
/// a list). Blank lines are kept: they end a paragraph.
pub(crate) fn text_lines(text: &str) -> impl Iterator<Item = (&str, bool)> {
    lines_placed(text)
        .filter(|&(_, place)| place == Place::Text)
        .map(|(line, _)| {
            let stripped = strip_marker(line);
            (stripped, stripped.len() < line.trim().len())
        })
}

fn normal_form(item: &str) -> String {
    let words: Vec<&str> = item.split_whitespace().collect();
    let joined = words.join(" ").replace(['*', '`'], "");
    joined
        .trim_end_matches(|c: char| ".,;:!?。，；：！？、".contains(c))
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_come_off_in_every_style() {
        for (line, item) in [
            ("1. Apple", "Apple"),
            ("12) Apple", "Apple"),
            ("  - Apple", "Apple"),
            ("* Apple", "Apple"),
            ("• Apple", "Apple"),
            ("a. Apple", "Apple"),
            ("IV. Apple", "Apple"),
            ("2.1 Apple", "Apple"),
            ("2. 1.1.2: Apple", "Apple"),
            ("Step 3: Apple", "Apple"),
            ("- 1. Apple", "Apple"),
            ("### 2) Apple", "Apple"),
            ("一、苹果", "苹果"),
            ("（1）苹果", "苹果"),
            ("(二) 苹果", "苹果"),
            ("1、苹果", "苹果"),
            ("1.苹果", "苹果"),
            ("第一步：洗菜", "洗菜"),
            ("① 苹果", "苹果"),
        ] {
            assert_eq!(strip_marker(line), item, "{line}");
        }
    }

    #[test]
    fn what_is_not_a_marker_stays() {
        for line in [
            "3.5kg of flour",
            "e.g. this",
            "1.",
            "7",
            "**Bold** start",
            "-5 degrees",
            "10 apples",
            "a.m. is morning",
            "A: What's this?",
        ] {
            assert_eq!(strip_marker(line), line.trim(), "{line}");
        }
    }

    #[test]
    fn items_skip_code_blanks_and_punctuation() {
        let text =
            "Fruits:\n\n1. **Apple**.\n2. *Pear*!\n```\n- not an item\n```\n|---|---|\n}\n3. Plum";
        let texts = |v: Vec<Item>| v.into_iter().map(|i| i.text).collect::<Vec<_>>();
        assert_eq!(
            texts(items(text, false)),
            vec!["fruits", "apple", "pear", "plum"]
        );
        assert_eq!(texts(items(text, true)), vec!["fruits", "apple", "pear"]);
        let listed: Vec<bool> = items(text, false).iter().map(|i| i.listed).collect();
        assert_eq!(listed, vec![false, true, true, true]);
        assert_eq!(without_markers("1. a\n2. b"), "a\nb\n");
        assert_eq!(prose("1. a\n```\n1. code\n```\n2. b"), "a\nb\n");
    }

    #[test]
    fn answers_from_a_fixed_set() {
        let answer = |line: &str| items(line, false)[0].is_answer();
        for line in [
            "1. True",
            "2) **False**.",
            "- yes",
            "3. B",
            "(c)",
            "4. 对",
            "正确",
        ] {
            assert!(answer(line), "{line}");
        }
        for line in ["1. True story", "2. Paris", "3. Bo", "4. 对的"] {
            assert!(!answer(line), "{line}");
        }
    }
}
