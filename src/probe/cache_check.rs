//! A cache check (`cache_check: {prefix_chars}`): one firing sends a long prefix, unique to the
//! firing, before the probe's prompt, twice: cold (no server has seen the prefix) and warm (the
//! identical request again, which a working prefix cache serves). What the two runs show side
//! by side is [`CacheFigures`]: the share of the warm prompt the server says it took from its
//! cache, and how much sooner the warm run's first token came.

use super::request::build_with_prefix;
use crate::config::{Api, CacheCheck, Probe, Target};
use crate::probe::flavor::PromptCounts;
use crate::result::Measurement;
pub(crate) use crate::result::{CacheFigures, CachePhase, CacheRun};

/// A prefix of `chars` characters (at most): a line unique to this firing, so no cache holds
/// it yet, then the same filler prose every firing (the context ladder's sentences, which every
/// tokenizer splits into ordinary words), then the prompt.
pub(crate) fn prefix(chars: usize) -> String {
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
pub(crate) async fn run(
    client: &super::Client,
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
pub(crate) fn compare(api: Api, cold: &Measurement, warm: &Measurement) -> CacheFigures {
    let ttft_speedup = match (cold.measured.figures.ttft_ms, warm.measured.figures.ttft_ms) {
        (Some(c), Some(w)) if w > 0.0 => Some(c / w),
        _ => None,
    };
    CacheFigures {
        hit_ratio: hit_ratio(api, cold, warm),
        ttft_speedup,
    }
}

/// The cached share of the warm run's prompt, as the API's flavor counts it.
fn hit_ratio(api: Api, cold: &Measurement, warm: &Measurement) -> Option<f64> {
    let counts = |m: &Measurement| PromptCounts {
        input: m.measured.reading.input_tokens,
        cached: m.measured.reading.cached_tokens,
    };
    let (cached, prompt) = api.flavor().cached_share(counts(cold), counts(warm))?;
    (prompt > 0).then(|| (cached as f64 / prompt as f64).min(1.0))
}

#[cfg(test)]
pub(crate) mod tests {
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

    /// A run with these figures, for the flavors' cache-count tests too.
    pub(crate) fn run(ttft: Option<f64>, input: Option<u64>, cached: Option<u64>) -> Measurement {
        let mut m = Measurement::example();
        m.measured.figures.ttft_ms = ttft;
        let reading = &mut m.measured.reading;
        (reading.input_tokens, reading.cached_tokens) = (input, cached);
        m
    }

    #[test]
    fn the_figures_of_each_api() {
        let cold = run(Some(400.0), Some(1000), Some(0));
        let warm = run(Some(100.0), Some(1000), Some(999));
        let f = compare(Api::default(), &cold, &warm);
        assert_eq!(f.ttft_speedup, Some(4.0));
        assert_eq!(f.hit_ratio, Some(0.999));
        // A server that caches nothing says 0; one that says nothing has no ratio, not 0.
        let f = compare(
            Api::default(),
            &cold,
            &run(Some(400.0), Some(1000), Some(0)),
        );
        assert_eq!((f.hit_ratio, f.ttft_speedup), (Some(0.0), Some(1.0)));
        let silent = run(Some(100.0), Some(1000), None);
        assert_eq!(compare(Api::default(), &cold, &silent).hit_ratio, None);
        // No first token on either side: no speedup.
        let failed = run(None, None, None);
        assert_eq!(compare(Api::default(), &failed, &warm).ttft_speedup, None);
    }
}
