//! A cache check (`cache_check: {prefix_chars}`): one firing sends a long prefix, unique to the
//! firing, before the probe's prompt, twice: cold (no server has seen the prefix) and warm (the
//! identical request again, which a working prefix cache serves). What the two runs show side
//! by side is [`CacheFigures`]: the share of the warm prompt the server says it took from its
//! cache, and how much sooner the warm run's first token came.

use super::request::build_with_prefix;
use crate::config::{Api, CacheCheck, Probe, Target};
use crate::result::Measurement;
pub use crate::result::{CacheFigures, CachePhase, CacheRun};

/// A prefix of `chars` characters (at most): a line unique to this firing, so no cache holds
/// it yet, then the same filler prose every firing (the context ladder's sentences, which every
/// tokenizer splits into ordinary words), then the prompt.
pub fn prefix(chars: usize) -> String {
    const END: &str = "\n\nEnd of the notes.";
    let mut s = format!(
        "[canary {:016x}] Background notes, not needed for the answer:\n",
        fastrand::u64(..)
    );
    let room = chars.saturating_sub(s.len() + END.len());
    // A fixed seed: the filler is the same from firing to firing, only the first line differs.
    let sentences = super::ladder::filler(&mut fastrand::Rng::with_seed(0), room);
    s.push_str(&sentences.join(" "));
    s.push_str(END);
    s
}

/// One firing of a cache check: the cold run, then the warm one, each as any run is measured.
pub async fn run(
    client: &reqwest::Client,
    probe: &Probe,
    target: &Target,
    check: CacheCheck,
    show_output: bool,
) -> [Measurement; 2] {
    let cold = build_with_prefix(probe, target, &prefix(check.prefix_chars));
    let warm = cold.again();
    let cold = super::measure(client, probe, target, cold, show_output, None).await;
    let warm = super::measure(client, probe, target, warm, show_output, None).await;
    [cold, warm]
}

/// The warm run beside the cold one, on `api`.
pub fn compare(api: Api, cold: &Measurement, warm: &Measurement) -> CacheFigures {
    let ttft_speedup = match (cold.figures.ttft_ms, warm.figures.ttft_ms) {
        (Some(c), Some(w)) if w > 0.0 => Some(c / w),
        _ => None,
    };
    CacheFigures {
        hit_ratio: hit_ratio(api, cold, warm),
        ttft_speedup,
    }
}

/// The cached share of the warm run's prompt. Anthropic's `input_tokens` leaves the cached
/// tokens out; Ollama reports no cached count, but its `prompt_eval_count` counts only the
/// tokens it evaluated, so what the warm run did not evaluate of the cold run's count was
/// cached.
fn hit_ratio(api: Api, cold: &Measurement, warm: &Measurement) -> Option<f64> {
    let (cached, prompt) = match (warm.cached_tokens, api) {
        (Some(c), Api::AnthropicMessages) => (c, warm.input_tokens? + c),
        (Some(c), _) => (c, warm.input_tokens?),
        (None, Api::Ollama) => {
            let (c, w) = (cold.input_tokens?, warm.input_tokens?);
            (c.saturating_sub(w), c)
        }
        (None, _) => return None,
    };
    (prompt > 0).then(|| (cached as f64 / prompt as f64).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_as_long_as_asked_unique_and_prose() {
        let (a, b) = (prefix(4000), prefix(4000));
        assert!((3900..=4000).contains(&a.chars().count()), "{}", a.len());
        assert_ne!(a, b, "unique to the firing");
        // The unique part comes first: nothing before it can be shared with the last firing.
        assert_eq!(a.find(']'), Some(24));
        let body = &a[a.find('\n').unwrap() + 1..];
        assert_eq!(
            body,
            &b[b.find('\n').unwrap() + 1..],
            "the filler is the same"
        );
        let words = body.split_whitespace().count();
        assert!(
            (4.0..8.0).contains(&(body.len() as f64 / words as f64)),
            "ordinary words"
        );
        assert!(prefix(1000).len() <= 1000);
    }

    fn run(ttft: Option<f64>, input: Option<u64>, cached: Option<u64>) -> Measurement {
        let mut m = Measurement::example();
        m.figures.ttft_ms = ttft;
        (m.input_tokens, m.cached_tokens) = (input, cached);
        m
    }

    #[test]
    fn the_figures_of_each_api() {
        let cold = run(Some(400.0), Some(1000), Some(0));
        let warm = run(Some(100.0), Some(1000), Some(999));
        let f = compare(Api::OpenaiChat, &cold, &warm);
        assert_eq!(f.ttft_speedup, Some(4.0));
        assert_eq!(f.hit_ratio, Some(0.999));
        // A server that caches nothing says 0; one that says nothing has no ratio, not 0.
        let f = compare(
            Api::OpenaiChat,
            &cold,
            &run(Some(400.0), Some(1000), Some(0)),
        );
        assert_eq!((f.hit_ratio, f.ttft_speedup), (Some(0.0), Some(1.0)));
        let silent = run(Some(100.0), Some(1000), None);
        assert_eq!(compare(Api::OpenaiChat, &cold, &silent).hit_ratio, None);
        // Anthropic counts cache reads apart from input_tokens.
        let warm = run(Some(100.0), Some(10), Some(990));
        assert_eq!(
            compare(Api::AnthropicMessages, &cold, &warm).hit_ratio,
            Some(0.99)
        );
        // Ollama: the tokens the warm run did not evaluate.
        let (cold, warm) = (run(Some(400.0), Some(800), None), silent_ollama(200));
        assert_eq!(compare(Api::Ollama, &cold, &warm).hit_ratio, Some(0.75));
        // No first token on either side: no speedup.
        let failed = run(None, None, None);
        assert_eq!(compare(Api::OpenaiChat, &failed, &warm).ttft_speedup, None);
    }

    fn silent_ollama(evaluated: u64) -> Measurement {
        run(Some(100.0), Some(evaluated), None)
    }
}
