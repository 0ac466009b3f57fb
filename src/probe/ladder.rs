//! The context-length ladder's rungs, drawn afresh each firing: a prompt of about each size
//! (estimated at [`CHARS_PER_TOKEN`] characters a token), made of English filler sentences in a
//! random order, so no prefix cache answers from an earlier firing whatever `cache_bust` says.
//! With a needle, a random fact (a six-digit code tied to a name) sits at a random depth of the
//! filler and the prompt ends by asking for it; without one, the probe's own prompt follows the
//! filler. And the prefill speed a rung shows beside the smallest one.

use std::sync::Arc;

use crate::checks::needle::Needle;
use crate::config::ladder::CHARS_PER_TOKEN;
use crate::config::{Ladder, Message, Probe, Prompt, Role};
use crate::result::{Measurement, Prefill, ProbeResult, PromptTokens, Rung};

/// One rung as it is sent: the probe with the rung's prompt, and the needle in its checks.
#[derive(Debug, Clone)]
pub(crate) struct RungPlan {
    pub rung: Rung,
    pub probe: Probe,
}

const SUBJECTS: [&str; 16] = [
    "The old lighthouse keeper",
    "A quiet fisherman",
    "The village baker",
    "Her younger brother",
    "The travelling musician",
    "A patient gardener",
    "The retired teacher",
    "Our new neighbour",
    "The night watchman",
    "A curious student",
    "The ferry captain",
    "The town librarian",
    "A tired shepherd",
    "The potter's apprentice",
    "The market trader",
    "An elderly painter",
];
const DEEDS: [&str; 16] = [
    "walked slowly",
    "sang a little song",
    "mended an old net",
    "counted the grey clouds",
    "read a long letter",
    "watered the tomatoes",
    "painted the wooden fence",
    "fed the hungry geese",
    "swept the stone steps",
    "baked fresh bread",
    "wrote in a notebook",
    "listened to the rain",
    "tied up the small boat",
    "carried a basket of apples",
    "lit a lantern",
    "folded the clean sheets",
];
const PLACES: [&str; 16] = [
    "near the harbour",
    "beside the river",
    "in the narrow lane",
    "behind the chapel",
    "under the chestnut tree",
    "along the sea wall",
    "at the edge of the forest",
    "inside the busy market",
    "on the hill above the town",
    "by the old mill",
    "across the meadow",
    "outside the bakery",
    "in the quiet library",
    "next to the railway bridge",
    "around the village square",
    "beneath the castle walls",
];
const TIMES: [&str; 16] = [
    "before sunrise",
    "every Sunday morning",
    "while the kettle boiled",
    "as the bells rang",
    "late in the evening",
    "after the storm had passed",
    "during the long winter",
    "when the tide went out",
    "on a warm afternoon",
    "before the market opened",
    "as snow began to fall",
    "at the end of summer",
    "while the children slept",
    "after a long day",
    "in the pale moonlight",
    "before the guests arrived",
];
const NAMES: [&str; 24] = [
    "Alvarez",
    "Brennan",
    "Castillo",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Gallagher",
    "Haddad",
    "Ivanova",
    "Jansen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quinn",
    "Rossi",
    "Schneider",
    "Tanaka",
    "Ueda",
    "Varga",
    "Whitfield",
    "Yilmaz",
];

const OPEN: &str = "Read the document below, then answer the question after it.\n\n<document>\n";
const CLOSE: &str = "\n</document>\n\n";

/// The sentence that hides the fact, and the question that asks for it.
pub(crate) fn fact(name: &str, code: &str) -> String {
    format!("The access code for {name} is {code}.")
}

pub(crate) fn question(name: &str) -> String {
    format!("What is the access code for {name}? Answer with the six-digit code only.")
}

/// Filler sentences (no digits, so the code is the only number) of `chars` characters at most.
pub(super) fn filler(rng: &mut fastrand::Rng, chars: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut len = 0;
    loop {
        let pick = |rng: &mut fastrand::Rng, words: &[&'static str; 16]| words[rng.usize(..16)];
        let s = format!(
            "{} {} {} {}.",
            pick(rng, &SUBJECTS),
            pick(rng, &DEEDS),
            pick(rng, &PLACES),
            pick(rng, &TIMES)
        );
        if len + s.len() + 1 > chars {
            return out;
        }
        len += s.len() + 1;
        out.push(s);
    }
}

/// The rungs of one firing of `probe`, smallest first, each with a fresh fact and filler.
pub(crate) fn rungs(probe: &Probe, ladder: &Ladder) -> Vec<RungPlan> {
    rungs_with(probe, ladder, &mut fastrand::Rng::new())
}

pub(crate) fn rungs_with(probe: &Probe, ladder: &Ladder, rng: &mut fastrand::Rng) -> Vec<RungPlan> {
    ladder
        .sizes
        .iter()
        .map(|&size| rung(probe, ladder.needle, size, rng))
        .collect()
}

fn chars(messages: &[Message]) -> usize {
    messages.iter().map(|m| m.content.chars().count()).sum()
}

fn rung(probe: &Probe, needle: bool, size: u32, rng: &mut fastrand::Rng) -> RungPlan {
    let budget = size as usize * CHARS_PER_TOKEN;
    let mut messages = probe.prompt.messages.clone();
    let mut checks = probe.checks.clone();
    let frame = OPEN.len() + CLOSE.len();
    if needle {
        let name = NAMES[rng.usize(..NAMES.len())];
        let code = rng.u32(100_000..1_000_000).to_string();
        let (fact, question) = (fact(name, &code), question(name));
        let room =
            budget.saturating_sub(chars(&messages) + frame + fact.len() + 1 + question.len());
        let mut sentences = filler(rng, room);
        let at = rng.usize(..=sentences.len());
        let depth_percent = (at * 100).checked_div(sentences.len()).unwrap_or(0) as u8;
        sentences.insert(at, fact);
        messages.push(Message {
            role: Role::User,
            content: format!("{OPEN}{}{CLOSE}{question}", sentences.join(" ")),
        });
        checks.needle = Some(Needle {
            name: name.to_string(),
            code,
            depth_percent,
        });
    } else {
        let room = budget.saturating_sub(chars(&messages) + frame);
        let text = filler(rng, room).join(" ");
        // The filler goes before the last user message, so the prompt still ends on it.
        if let Some(last) = messages.iter_mut().rev().find(|m| m.role == Role::User) {
            last.content = format!("{OPEN}{text}{CLOSE}{}", last.content);
        }
    }
    let estimate = chars(&messages).div_ceil(CHARS_PER_TOKEN) as u64;
    let mut probe = probe.clone();
    probe.prompt = Arc::new(Prompt {
        name: format!("{} (rung {size})", probe.prompt.name),
        messages,
    });
    probe.checks = checks;
    RungPlan {
        rung: Rung {
            size,
            prompt_tokens_estimate: estimate,
        },
        probe,
    }
}

/// The prefill speed a rung's run shows beside the ladder's smallest rung of the same firing
/// (`base`): the prompt tokens it added over the smallest, over the time to first token it
/// added. The smallest rung is the baseline, so what both pay alike (connecting, queueing, the
/// chat template, the first decode step) drops out. Counted in the server's prompt tokens when
/// both runs report them, else in the estimates. None for the smallest rung itself, when either
/// run saw no first token, when the baseline was a cold start, or when the bigger prompt was
/// not slower.
pub(crate) fn prefill(base: &ProbeResult, m: &Measurement) -> Option<Prefill> {
    let (Some(base_rung), Some(rung)) = (base.id.rung, m.id.rung) else {
        return None;
    };
    if base.context.warmup || rung.size <= base_rung.size {
        return None;
    }
    let base_ttft = base.measured.figures.ttft_ms?;
    let ttft = m.measured.figures.ttft_ms?;
    let input = |m: &crate::result::Measured| m.reading.input_tokens;
    let (tokens, source) = match (input(&base.measured), input(&m.measured)) {
        (Some(b), Some(n)) => (n.checked_sub(b)?, PromptTokens::Usage),
        _ => (
            rung.prompt_tokens_estimate
                .checked_sub(base_rung.prompt_tokens_estimate)?,
            PromptTokens::Estimate,
        ),
    };
    let seconds = (ttft - base_ttft) / 1000.0;
    (seconds > 0.0 && tokens > 0).then(|| Prefill {
        tokens_per_second: (tokens as f64 / seconds * 10.0).round() / 10.0,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::probe_for;

    fn ladder(sizes: &[u32], needle: bool) -> Ladder {
        Ladder {
            sizes: sizes.to_vec(),
            needle,
        }
    }

    #[test]
    fn a_needle_rung_is_its_size_hides_one_fact_and_asks_for_it() {
        let probe = probe_for(Prompt {
            name: String::new(),
            messages: vec![],
        });
        let mut rng = fastrand::Rng::with_seed(3);
        let rungs = rungs_with(&probe, &ladder(&[512, 2048, 8192], true), &mut rng);
        assert_eq!(rungs.len(), 3);
        let mut codes = Vec::new();
        for r in &rungs {
            let text = r.probe.prompt.as_text();
            let chars = text.chars().count();
            let budget = r.rung.size as usize * CHARS_PER_TOKEN;
            // Within one filler sentence of its size, never over it.
            assert!(
                chars <= budget && chars + 120 > budget,
                "{chars} for {budget}"
            );
            assert_eq!(r.rung.prompt_tokens_estimate, chars.div_ceil(4) as u64);
            let n = r.probe.checks.needle.clone().expect("a needle");
            assert!(text.contains(&fact(&n.name, &n.code)));
            assert!(text.ends_with(&question(&n.name)));
            // The code is the only number in the prompt.
            let numbers = text
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .count();
            assert_eq!(numbers, 1, "{text}");
            codes.push(n.code);
        }
        codes.dedup();
        assert_eq!(codes.len(), 3, "each rung has its own fact");
        // Another firing draws other filler, from its first sentence on.
        let again = rungs_with(&probe, &ladder(&[512], true), &mut rng);
        let (a, b) = (
            rungs[0].probe.prompt.as_text(),
            again[0].probe.prompt.as_text(),
        );
        assert_ne!(
            a[OPEN.len()..OPEN.len() + 40],
            b[OPEN.len()..OPEN.len() + 40]
        );
    }

    #[test]
    fn without_a_needle_the_probes_prompt_ends_the_padded_one() {
        let probe = probe_for(Prompt::user("q", "What is the capital of France?"));
        let rungs = rungs(&probe, &ladder(&[256], false));
        let text = rungs[0].probe.prompt.as_text();
        assert!(text.ends_with("</document>\n\nWhat is the capital of France?"));
        assert!(text.chars().count() > 900 && text.chars().count() <= 1024);
        assert!(rungs[0].probe.checks.needle.is_none());
    }

    fn run(rung: u32, estimate: u64, ttft_ms: f64, input: Option<u64>) -> Measurement {
        let mut m = Measurement::example();
        m.id.rung = Some(Rung {
            size: rung,
            prompt_tokens_estimate: estimate,
        });
        m.measured.figures.ttft_ms = Some(ttft_ms);
        m.measured.reading.input_tokens = input;
        m
    }

    #[test]
    fn prefill_is_the_tokens_added_over_the_time_added_beside_the_smallest_rung() {
        let ctx = crate::result::RunContext::default();
        let base = ProbeResult::new(run(512, 500, 100.0, Some(520)), ctx.clone());
        // 1,500 more tokens (the server's count) in 0.5 s more.
        let p = prefill(&base, &run(2048, 2000, 600.0, Some(2020))).unwrap();
        assert_eq!(
            (p.tokens_per_second, p.source),
            (3000.0, PromptTokens::Usage)
        );
        // No count from the server: the estimates, and said so.
        let p = prefill(&base, &run(2048, 2000, 600.0, None)).unwrap();
        assert_eq!(
            (p.tokens_per_second, p.source),
            (3000.0, PromptTokens::Estimate)
        );
        // Not slower than the smallest rung: no figure; nor for the smallest rung itself.
        assert!(prefill(&base, &run(2048, 2000, 90.0, Some(2020))).is_none());
        assert!(prefill(&base, &run(512, 500, 100.0, Some(520))).is_none());
        // A cold baseline would make every other rung look fast.
        let mut cold = base.clone();
        cold.context.warmup = true;
        assert!(prefill(&cold, &run(2048, 2000, 600.0, Some(2020))).is_none());
    }
}
