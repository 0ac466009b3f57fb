//! How close one answer is to another: chrF, the character n-gram F-score (Popović, 2015), as
//! sacreBLEU computes it by default (character n-grams of 1 to 6, no word n-grams, β = 2, so
//! recall of the reference weighs four times precision; whitespace removed; sacreBLEU's
//! effective-order averaging). Characters, not words, so it reads English and Chinese alike
//! and needs no tokenizer. Written here rather than taken from a crate: it is a few dozen lines
//! of the project's own judging, and the crates that have it bring whole MT toolkits. Scores
//! are 0 (nothing shared) to 1 (the same text), where sacreBLEU prints 0 to 100.

use std::collections::HashMap;

/// Character n-grams of 1 to this length.
const CHAR_ORDER: usize = 6;
/// Recall weighs β² times precision.
const BETA: f64 = 2.0;

/// The chrF of `hypothesis` against `reference`, 0 to 1. Not symmetric: `reference` is the
/// text held to be right (a recorded answer, the baseline's, the earlier one).
pub fn chrf(hypothesis: &str, reference: &str) -> f64 {
    let hyp: Vec<char> = hypothesis.chars().filter(|c| !c.is_whitespace()).collect();
    let refr: Vec<char> = reference.chars().filter(|c| !c.is_whitespace()).collect();
    let factor = BETA * BETA;
    let (mut sum_prec, mut sum_rec, mut orders) = (0.0, 0.0, 0u32);
    for n in 1..=CHAR_ORDER {
        let (h, r) = (ngrams(&hyp, n), ngrams(&refr, n));
        let (n_hyp, n_ref) = (h.values().sum::<u32>(), r.values().sum::<u32>());
        if n_hyp == 0 || n_ref == 0 {
            continue;
        }
        let matched: u32 = h
            .iter()
            .map(|(g, c)| (*c).min(r.get(g).copied().unwrap_or(0)))
            .sum();
        sum_prec += f64::from(matched) / f64::from(n_hyp);
        sum_rec += f64::from(matched) / f64::from(n_ref);
        orders += 1;
    }
    if orders == 0 {
        return 0.0;
    }
    let (prec, rec) = (sum_prec / f64::from(orders), sum_rec / f64::from(orders));
    if prec + rec == 0.0 {
        return 0.0;
    }
    (1.0 + factor) * prec * rec / (factor * prec + rec)
}

fn ngrams(chars: &[char], n: usize) -> HashMap<&[char], u32> {
    let mut out = HashMap::new();
    for g in chars.windows(n) {
        *out.entry(g).or_insert(0) += 1;
    }
    out
}

/// A similarity as records and sentences show it: three decimals.
pub fn rounded(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values from sacreBLEU 2.6.0, `CHRF().sentence_score(hyp, [ref]).score / 100`
    /// (its defaults: char order 6, word order 0, beta 2).
    #[test]
    fn agrees_with_sacrebleu() {
        let sky = "The sky is blue because air scatters blue light more than red light.";
        let cases = [
            (sky, sky, 1.0),
            (
                "The sky looks blue since the air scatters short blue wavelengths.",
                sky,
                0.3934447337554045,
            ),
            (
                "YouYouYou wis-__print(1,L_print(You",
                sky,
                0.04528352063608141,
            ),
            (
                "巴黎是法国的首都。",
                "法国的首都是巴黎。",
                0.4311507936507937,
            ),
            (
                "北京是中国的首都，也是一座历史悠久的城市。",
                "法国的首都是巴黎。",
                0.19141053493967913,
            ),
            ("", "The sky is blue.", 0.0),
            ("abc", "xyz", 0.0),
            // Whitespace is not a character to chrF.
            ("a b", "ab", 1.0),
        ];
        for (hyp, reference, want) in cases {
            let got = chrf(hyp, reference);
            assert!(
                (got - want).abs() < 1e-12,
                "chrf({hyp:?}, {reference:?}) = {got}, sacreBLEU says {want}"
            );
        }
    }

    #[test]
    fn recall_weighs_more_than_precision() {
        let reference = "Paris is the capital of France and its largest city.";
        // Half the reference said: low recall, full precision.
        let half = chrf("Paris is the capital of France", reference);
        // The reference and more: full recall, lower precision.
        let more = chrf(
            "Paris is the capital of France and its largest city, on the Seine.",
            reference,
        );
        assert!(more > half, "{more} <= {half}");
        assert!(more > 0.9 && half < 0.7, "{more} {half}");
    }
}
