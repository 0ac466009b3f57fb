//! Answers that do not depend on the question (`prompt_ignored`): the latest answer of each
//! (target, probe), so a run's answer can be set beside the other probes' answers on its target.
//! A wrong chat template, a prompt path that drops the messages, or a cache serving the wrong
//! entry all give every prompt the same text; two different prompts answered nearly alike
//! within [`WINDOW`] name that fault. Short answers may rightly coincide (`Yes`, `42`) and do
//! not count, nor do probes that ask the same prompt or a ladder's rungs (drawn afresh each
//! firing). Bounded: at most [`MAX_PAIRS`] answers are kept, the oldest forgotten first.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::checks::is_invisible;
use crate::checks::similarity::{self, Grams};

/// How recent another probe's answer must be to count.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Answers this close (chrF) to another prompt's are the same answer.
pub const MIN_SIMILARITY: f64 = 0.9;
/// Answers with fewer visible characters may rightly coincide.
pub const MIN_VISIBLE_CHARS: usize = 64;
/// The most (target, probe) answers kept.
const MAX_PAIRS: usize = 4096;

/// Another probe's answer that a run's answer repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct Echo {
    pub other_probe: String,
    pub similarity: f64,
}

impl Echo {
    /// The run's sentence.
    pub fn sentence(&self) -> String {
        format!(
            "the answer is nearly the same as probe {}'s, which asks another prompt on this target (similarity {:.3}): the answers do not depend on the prompt",
            self.other_probe,
            similarity::rounded(self.similarity)
        )
    }
}

struct Kept {
    /// The prompt's text, hashed: probes that ask the same prompt are not compared.
    prompt: u64,
    answer: Arc<str>,
    /// The characters chrF reads, for [`similarity::bound`].
    chars: usize,
    at: Instant,
}

/// The latest answer of each (target, probe).
#[derive(Default)]
pub struct Echoes(HashMap<(String, String), Kept>);

/// What a run brings to [`Echoes::keep`].
pub struct Said<'a> {
    pub target: &'a str,
    pub probe: &'a str,
    /// The prompt's text, hashed.
    pub prompt: u64,
    pub answer: &'a Arc<str>,
    pub at: Instant,
}

/// Another probe's recent answer on the run's target, worth comparing with the run's.
pub struct Other {
    probe: String,
    answer: Arc<str>,
}

impl Echoes {
    /// Keeps the run's answer as its pair's latest, and hands back the other probes' recent
    /// answers on the same target that it could repeat: cheap, so it is done under the runner's
    /// lock, and the comparing ([`closest`]) outside it.
    pub fn keep(&mut self, said: Said) -> Vec<Other> {
        let visible = said.answer.chars().filter(|c| !is_invisible(*c)).count();
        if visible < MIN_VISIBLE_CHARS {
            // Too short to tell; and the pair's older, longer answer is no longer its latest.
            self.0
                .remove(&(said.target.to_string(), said.probe.to_string()));
            return Vec::new();
        }
        let chars = similarity::char_count(said.answer);
        let others = self
            .0
            .iter()
            .filter(|((t, p), k)| {
                t == said.target
                    && p != said.probe
                    && k.prompt != said.prompt
                    && said.at.saturating_duration_since(k.at) <= WINDOW
                    // Lengths that alone keep the pair below the bound: no comparing.
                    && similarity::bound(chars, k.chars) >= MIN_SIMILARITY
            })
            .map(|((_, p), k)| Other {
                probe: p.clone(),
                answer: k.answer.clone(),
            })
            .collect();
        if self.0.len() >= MAX_PAIRS {
            self.0
                .retain(|_, k| said.at.saturating_duration_since(k.at) <= WINDOW);
        }
        if self.0.len() >= MAX_PAIRS {
            let oldest = self
                .0
                .iter()
                .min_by_key(|(_, k)| k.at)
                .map(|(key, _)| key.clone());
            if let Some(key) = oldest {
                self.0.remove(&key);
            }
        }
        self.0.insert(
            (said.target.to_string(), said.probe.to_string()),
            Kept {
                prompt: said.prompt,
                answer: said.answer.clone(),
                chars,
                at: said.at,
            },
        );
        others
    }
}

/// Which of `others` the answer repeats (the closest at [`MIN_SIMILARITY`] or more), if any;
/// the answer's n-grams are taken once.
pub fn closest(answer: &str, others: &[Other]) -> Option<Echo> {
    if others.is_empty() {
        return None;
    }
    let grams = Grams::new(answer);
    others
        .iter()
        .map(|o| Echo {
            other_probe: o.probe.clone(),
            similarity: grams.chrf(&Grams::new(&o.answer)),
        })
        .filter(|e| e.similarity >= MIN_SIMILARITY)
        .max_by(|a, b| {
            a.similarity
                .total_cmp(&b.similarity)
                .then_with(|| b.other_probe.cmp(&a.other_probe))
        })
}

/// A prompt's text (its messages' contents, in order), hashed, to tell probes that ask the
/// same prompt; hashed part by part, with no joined copy of a long prompt on every run.
pub fn prompt_key<'a>(parts: impl IntoIterator<Item = &'a str>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for part in parts {
        part.hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAME: &str = "018. The company has a long-term plan to grow its business in the region, and the board agreed.";

    fn note(
        e: &mut Echoes,
        target: &str,
        probe: &str,
        prompt: &str,
        answer: &str,
        at: Instant,
    ) -> Option<Echo> {
        let answer = Arc::from(answer);
        let others = e.keep(Said {
            target,
            probe,
            prompt: prompt_key([prompt]),
            answer: &answer,
            at,
        });
        closest(&answer, &others)
    }

    #[test]
    fn the_same_answer_to_another_prompt_is_an_echo_naming_the_probe() {
        let mut e = Echoes::default();
        let t0 = Instant::now();
        assert_eq!(
            note(&mut e, "t", "sky", "Why is the sky blue?", SAME, t0),
            None
        );
        let echo = note(&mut e, "t", "computer", "What is a computer?", SAME, t0).unwrap();
        assert_eq!(echo.other_probe, "sky");
        assert!(echo.similarity > 0.99, "{echo:?}");
        assert!(
            echo.sentence().contains("probe sky's"),
            "{}",
            echo.sentence()
        );
        assert!(
            echo.sentence().contains("similarity 1.000"),
            "{}",
            echo.sentence()
        );
    }

    #[test]
    fn different_answers_short_answers_shared_prompts_other_targets_and_old_answers_are_not() {
        let t0 = Instant::now();
        let sky = "The sky is blue because the air scatters blue sunlight more than it scatters red light.";
        let computer = "A computer is a machine that follows a program of instructions to process data quickly.";
        let mut e = Echoes::default();
        note(&mut e, "t", "sky", "Why is the sky blue?", sky, t0);
        assert_eq!(
            note(&mut e, "t", "computer", "What is a computer?", computer, t0),
            None
        );
        // Short answers may rightly coincide.
        let mut e = Echoes::default();
        note(&mut e, "t", "a", "Is water wet?", "Yes, it is.", t0);
        assert_eq!(
            note(&mut e, "t", "b", "Is fire hot?", "Yes, it is.", t0),
            None
        );
        // Probes that ask the same prompt answer alike.
        let mut e = Echoes::default();
        note(&mut e, "t", "sky", "Why is the sky blue?", sky, t0);
        assert_eq!(
            note(&mut e, "t", "sky-again", "Why is the sky blue?", sky, t0),
            None
        );
        // Another target's answer is another server's.
        let mut e = Echoes::default();
        note(&mut e, "t1", "sky", "Why is the sky blue?", SAME, t0);
        assert_eq!(
            note(&mut e, "t2", "computer", "What is a computer?", SAME, t0),
            None
        );
        // Outside the window.
        let mut e = Echoes::default();
        note(&mut e, "t", "sky", "Why is the sky blue?", SAME, t0);
        let later = t0 + WINDOW + Duration::from_secs(1);
        assert_eq!(
            note(&mut e, "t", "computer", "What is a computer?", SAME, later),
            None
        );
    }

    #[test]
    fn it_stays_bounded() {
        let mut e = Echoes::default();
        let t0 = Instant::now();
        // One probe per target, so no answer is compared and the test stays quick.
        for i in 0..MAX_PAIRS + 10 {
            let at = t0 + Duration::from_millis(i as u64);
            note(&mut e, &format!("t{i}"), "p", "q", SAME, at);
        }
        assert!(e.0.len() <= MAX_PAIRS);
        // The newest is kept, the oldest forgotten.
        let key = |i: usize| (format!("t{i}"), "p".to_string());
        assert!(e.0.contains_key(&key(MAX_PAIRS + 9)));
        assert!(!e.0.contains_key(&key(0)));
    }
}
