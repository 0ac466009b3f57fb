//! How close one answer is to another: chrF, the character n-gram F-score (Popović, 2015), as
//! sacreBLEU computes it by default (character n-grams of 1 to 6, no word n-grams, β = 2, so
//! recall of the reference weighs four times precision; whitespace removed; sacreBLEU's
//! effective-order averaging). Characters, not words, so it reads English and Chinese alike
//! and needs no tokenizer. Written here rather than taken from a crate: it is a few dozen lines
//! of the project's own judging, and the crates that have it bring whole MT toolkits. Scores
//! are 0 (nothing shared) to 1 (the same text), where sacreBLEU prints 0 to 100.

/// Character n-grams of 1 to this length.
const CHAR_ORDER: usize = 6;
/// Recall weighs β² times precision.
const BETA: f64 = 2.0;

/// The chrF of `hypothesis` against `reference`, 0 to 1. Not symmetric: `reference` is the
/// text held to be right (a recorded answer, the baseline's, the earlier one).
pub fn chrf(hypothesis: &str, reference: &str) -> f64 {
    Grams::new(hypothesis).chrf(&Grams::new(reference))
}

/// A text's character n-grams of each order, sorted: what chrF compares, taken once for a
/// text set beside many. One list, order after order; `ends[n - 1]` is where order n's end.
pub struct Grams {
    grams: Vec<u128>,
    ends: [usize; CHAR_ORDER],
}

impl Grams {
    pub fn new(text: &str) -> Grams {
        let chars: Vec<u32> = text
            .chars()
            .filter(|c| !c.is_whitespace())
            .map(u32::from)
            .collect();
        let mut grams = Vec::with_capacity(CHAR_ORDER * chars.len());
        let ends = std::array::from_fn(|i| {
            let start = grams.len();
            // Packed 21 bits a character, so six fit in 128 and no two n-grams share a number.
            grams.extend(
                chars
                    .windows(i + 1)
                    .map(|w| w.iter().fold(0u128, |k, &c| k << 21 | u128::from(c))),
            );
            grams[start..].sort_unstable();
            grams.len()
        });
        Grams { grams, ends }
    }

    /// The characters chrF reads (whitespace aside): as many as the text's 1-grams.
    pub fn chars(&self) -> usize {
        self.ends[0]
    }

    /// The n-grams of length `n`.
    fn order(&self, n: usize) -> &[u128] {
        let start = if n == 1 { 0 } else { self.ends[n - 2] };
        &self.grams[start..self.ends[n - 1]]
    }

    /// This text's chrF against `reference`'s.
    pub fn chrf(&self, reference: &Grams) -> f64 {
        score(|n| {
            let (h, r) = (self.order(n), reference.order(n));
            (shared(h, r), h.len(), r.len())
        })
    }
}

/// The highest chrF any two texts with these many characters (whitespace aside) can have,
/// whatever they say: every n-gram of the shorter one found in the other. A pair whose bound is
/// below a threshold needs no comparing; an answer much longer or shorter than another cannot
/// be nearly the same answer (against 100 characters, 0.9 wants 89 to 154).
pub fn bound(hypothesis_chars: usize, reference_chars: usize) -> f64 {
    score(|n| {
        let (h, r) = (
            (hypothesis_chars + 1).saturating_sub(n),
            (reference_chars + 1).saturating_sub(n),
        );
        (h.min(r), h, r)
    })
}

/// The characters chrF reads: all but whitespace.
pub fn char_count(text: &str) -> usize {
    text.chars().filter(|c| !c.is_whitespace()).count()
}

/// chrF from each order's (shared, hypothesis, reference) n-gram counts: precision and recall
/// averaged over the orders both texts reach, then their F-score with recall weighing β².
fn score(mut order: impl FnMut(usize) -> (usize, usize, usize)) -> f64 {
    let factor = BETA * BETA;
    let (mut sum_prec, mut sum_rec, mut orders) = (0.0, 0.0, 0u32);
    for n in 1..=CHAR_ORDER {
        let (matched, h, r) = order(n);
        if h == 0 || r == 0 {
            continue;
        }
        sum_prec += matched as f64 / h as f64;
        sum_rec += matched as f64 / r as f64;
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

/// The n-grams two sorted lists share, each counted as often as the list that has it fewer
/// times: the lists walked side by side.
fn shared(a: &[u128], b: &[u128]) -> usize {
    use std::cmp::Ordering;
    let (mut i, mut j, mut matched) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                matched += 1;
                i += 1;
                j += 1;
            }
        }
    }
    matched
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

    /// The bound is never below the score, is reached by the same text, and rules out answers
    /// of very different lengths.
    #[test]
    fn no_two_texts_score_above_their_bound() {
        let texts = [
            "The sky is blue because air scatters blue light more than red light.",
            "The sky looks blue since the air scatters short blue wavelengths.",
            "巴黎是法国的首都。",
            "法国的首都是巴黎。",
            "abc",
            "",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "a",
        ];
        for a in texts {
            for b in texts {
                let (got, most) = (chrf(a, b), bound(char_count(a), char_count(b)));
                assert!(got <= most, "chrf({a:?}, {b:?}) = {got} > bound {most}");
            }
            assert_eq!(chrf(a, a), bound(char_count(a), char_count(a)));
        }
        // Against 100 characters, 0.9 wants 89 to 154: recall weighs more than precision.
        assert!(bound(88, 100) < 0.9 && bound(89, 100) >= 0.9);
        assert!(bound(154, 100) >= 0.9 && bound(155, 100) < 0.9);
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
