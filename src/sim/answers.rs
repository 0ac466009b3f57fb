//! What the simulated replica says: canned answers chosen by the prompt (English, Chinese,
//! JSON, a summary of a long text) and by the scenario (loops, refusals, rambling), split into
//! tokens the way a tokenizer roughly would.

/// Splits text into token-like pieces: a word with its leading space, one CJK character, or one
/// punctuation mark.
pub(super) fn tokenize(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        let cjk = matches!(c as u32, 0x3000..=0x9FFF | 0xFF00..=0xFFEF);
        if cjk || (c.is_ascii_punctuation() && c != '\'') {
            if !cur.is_empty() && !cur.trim().is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            cur.push(c);
            out.push(std::mem::take(&mut cur));
        } else if c.is_whitespace() {
            if !cur.trim().is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            cur.push(c);
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

pub(super) const ENGLISH: &str = "The capital of France is Paris. It lies on the Seine in the north of the country and has been its political and cultural centre for centuries.";
pub(super) const CHINESE: &str =
    "法国的首都是巴黎。巴黎位于法国北部的塞纳河畔，是法国的政治、经济和文化中心。";
pub(super) const JSON: &str =
    "{\"city\": \"Paris\", \"country\": \"France\", \"population_millions\": 2.1}";
pub(super) const SUMMARY: &str = "The text describes how the Eiffel Tower was built for the 1889 World's Fair, the criticism it first met, and how it became the best-known symbol of Paris.";
pub(super) const FORBIDDEN: &str =
    "As an AI language model, I cannot browse the internet, but the capital of France is Paris.";
pub(super) const MISMATCH: &str =
    "I am not sure which country you are asking about; could you say more?";
pub(super) const SHORT: &str = "Paris.";
/// JSON as a careless model writes it: a trailing comma.
pub(super) const JSON_BROKEN: &str = "{\"city\": \"Paris\", \"country\": \"France\",}";
/// A model that answers instead of calling the tool it was offered.
pub(super) const NO_CALL: &str =
    "I cannot look up live weather, but Paris is usually mild in spring, around 15°C.";
/// The arguments of a good call, and of one its schema refuses.
pub(super) const CALL_ARGUMENTS: &str = "{\"city\": \"Paris\", \"unit\": \"celsius\"}";
pub(super) const BAD_CALL_ARGUMENTS: &str = "{\"city\": 42}";

/// The healthy answer to a prompt: Chinese for a Chinese prompt, JSON when asked for JSON, a
/// summary for a long text it is asked to summarize, otherwise the English one. A long prompt
/// that asks something else (a cache check's filler before its question) gets that answer: a
/// healthy server answers the question, and two prompts answered alike are `prompt_ignored`.
pub(super) fn healthy(prompt: &str) -> &'static str {
    if prompt.chars().any(|c| matches!(c as u32, 0x4E00..=0x9FFF)) {
        CHINESE
    } else if prompt.contains("JSON") {
        JSON
    } else if prompt.chars().count() > 2000 && prompt.to_lowercase().contains("summar") {
        SUMMARY
    } else {
        ENGLISH
    }
}

/// The answer to a context ladder's needle question ("What is the access code for NAME?"):
/// the code its document gave that name, read back as a model that found it would.
pub(super) fn recall(prompt: &str) -> Option<String> {
    const ASKED: &str = "What is the access code for ";
    let asked = &prompt[prompt.rfind(ASKED)? + ASKED.len()..];
    let name = &asked[..asked.find('?')?];
    let said = format!("The access code for {name} is ");
    let at = prompt.find(&said)? + said.len();
    let code: String = prompt[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!code.is_empty()).then(|| format!("The access code for {name} is {code}."))
}

/// Text corrupted as a server that mishandles long prompts returns it: every digit shifted by
/// seven, so the words read right and the facts are wrong.
pub(super) fn corrupt(text: &str) -> String {
    text.chars()
        .map(|c| match c.to_digit(10) {
            Some(d) => char::from_digit((d + 7) % 10, 10).unwrap_or(c),
            None => c,
        })
        .collect()
}

/// What a server with a wrong chat template answered to every prompt: the model never saw the
/// question.
pub(super) const SAME_ANSWER: &str = "018. The company has a long-term plan to expand its operations in the region over the next five years, and the board has approved the budget for it.";

/// Word salad as a model with a wrong RoPE setting writes it: fragments of words and code that
/// never make a sentence, drawn from a fixed seed so no phrase repeats in order.
pub(super) fn word_salad(tokens: usize) -> String {
    const BITS: [&str; 24] = [
        "You", "wis", "-__", "print", "(1,", "L_", "ocr", "ately", "Theth", "ond", "::", "ingly",
        "]]", "Bre", "ynam", "_x", "olt", "seud", "\\n", "quar", "ipt", "4r", "ÃĤ", "cem",
    ];
    let mut rng = fastrand::Rng::with_seed(7);
    let mut s = String::new();
    while tokenize(&s).len() < tokens + 8 {
        s.push_str(BITS[rng.usize(..BITS.len())]);
        if rng.u8(..4) == 0 {
            s.push(' ');
        }
    }
    s
}

/// An English loop as small models produce it: a start, then one phrase over and over.
pub(super) fn looping(chinese: bool, tokens: usize) -> String {
    let (start, phrase) = if chinese {
        ("巴黎是法国的首都。", "我爱巴黎。")
    } else {
        ("The capital of France is Paris.", " I think that")
    };
    let mut s = start.to_string();
    while tokenize(&s).len() < tokens + 8 {
        s.push_str(phrase);
    }
    s
}

/// A numbered list as small models loop in one: the same few items come back in the same
/// order while the counter keeps climbing.
pub(super) fn looping_list(tokens: usize) -> String {
    const ITEMS: [&str; 3] = ["Apple", "Banana", "Cherry"];
    let mut s = String::from("Here are some fruits:\n");
    let mut i = 0;
    while tokenize(&s).len() < tokens + 8 {
        s.push_str(&format!("{}. {}\n", i + 1, ITEMS[i % ITEMS.len()]));
        i += 1;
    }
    s
}

/// Varied text that never loops, for `too_long`: words drawn from a fixed seed.
pub(super) fn rambling(tokens: usize) -> String {
    const WORDS: [&str; 48] = [
        "river", "stone", "bridge", "garden", "market", "window", "autumn", "letter", "harbor",
        "lantern", "meadow", "silver", "candle", "forest", "violin", "paper", "orchard", "thunder",
        "pebble", "canvas", "station", "ribbon", "island", "copper", "feather", "valley", "mirror",
        "saddle", "velvet", "compass", "quarry", "tunnel", "glacier", "pepper", "marble", "anchor",
        "blossom", "chimney", "fabric", "gravel", "hollow", "jasmine", "kettle", "ladder",
        "needle", "oyster", "parlor", "quill",
    ];
    let mut rng = fastrand::Rng::with_seed(42);
    let mut s = String::from("Paris");
    for i in 1..tokens {
        s.push(' ');
        s.push_str(WORDS[rng.usize(..WORDS.len())]);
        if i % 12 == 11 {
            s.push('.');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_needle_is_recalled_from_the_prompt_and_corruption_changes_its_digits() {
        let prompt = "<document>\nA b c. The access code for Quinn is 120934. D e f.\n</document>\n\nWhat is the access code for Quinn? Answer with the six-digit code only.";
        let a = recall(prompt).unwrap();
        assert_eq!(a, "The access code for Quinn is 120934.");
        assert_eq!(corrupt(&a), "The access code for Quinn is 897601.");
        assert_eq!(recall("What is the capital of France?"), None);
    }

    #[test]
    fn tokens_rejoin_to_the_text() {
        for t in [ENGLISH, CHINESE, JSON, SUMMARY] {
            assert_eq!(tokenize(t).concat(), t);
        }
        assert_eq!(tokenize("Hi, you."), vec!["Hi", ",", " you", "."]);
        assert_eq!(tokenize("巴黎。"), vec!["巴", "黎", "。"]);
    }

    #[test]
    fn canned_texts_are_what_the_detectors_expect() {
        use crate::checks::repetition::{analyze, Thresholds};
        let t = Thresholds::default();
        assert!(analyze(&looping(false, 64), &t).degenerate());
        assert!(analyze(&looping(true, 64), &t).degenerate());
        assert!(analyze(&looping_list(64), &t).degenerate());
        // The list loops by its items alone: with the markers the text never repeats itself.
        assert_eq!(
            analyze(&looping_list(64), &t).fired().next(),
            Some(crate::checks::repetition::Detector::ItemCycle)
        );
        for healthy in [ENGLISH, CHINESE, JSON, SUMMARY, &rambling(400)] {
            assert!(!analyze(healthy, &t).degenerate(), "{healthy}");
        }
    }
}
