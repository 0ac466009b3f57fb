//! A probe's `gate:` limits, parsed and checked at load: which figure, which bound.
//! `slo:` holds absolute limits on the candidate, `vs_baseline:` relative ones.

use crate::outcome::Outcome;

use super::duration::parse_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Ttft,
    AnswerTtft,
    E2e,
    Tpot,
    Itl,
    TokensPerSecond,
}

impl Metric {
    const ALL: [Metric; 6] = [
        Metric::Ttft,
        Metric::AnswerTtft,
        Metric::E2e,
        Metric::Tpot,
        Metric::Itl,
        Metric::TokensPerSecond,
    ];

    /// Its name in a figure (`ttft` of `ttft_p95`).
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::AnswerTtft => "answer_ttft",
            Metric::E2e => "e2e",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::TokensPerSecond => "tokens_per_second",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Quantile(Metric, u8),
    SuccessRate,
    OutcomeCount(Outcome),
    /// The pNN of the chrF between the candidate's and the baseline's answers, pair by pair
    /// (`answer_similarity_pNN` under `vs_baseline:`, an absolute bound).
    AnswerSimilarity(u8),
}

/// The quantiles a figure may name.
fn quantile(q: &str) -> Option<u8> {
    match q {
        "50" => Some(50),
        "90" => Some(90),
        "95" => Some(95),
        "99" => Some(99),
        _ => None,
    }
}

impl Figure {
    pub fn parse(name: &str) -> Result<Figure, String> {
        if name == "success_rate" {
            return Ok(Figure::SuccessRate);
        }
        if let Some(o) = name.strip_prefix("outcome.") {
            return Outcome::parse(o)
                .map(Figure::OutcomeCount)
                .ok_or_else(|| format!("unknown outcome {o:?} in {name:?}"));
        }
        let bad = || {
            format!("unknown gate figure {name:?}: use ttft_pNN, answer_ttft_pNN, e2e_pNN, tpot_pNN, itl_pNN, tokens_per_second_pNN, answer_similarity_pNN (NN = 50, 90, 95, 99), success_rate or outcome.<name>")
        };
        let (metric, q) = name.rsplit_once("_p").ok_or_else(bad)?;
        let q = quantile(q).ok_or_else(bad)?;
        if metric == "answer_similarity" {
            return Ok(Figure::AnswerSimilarity(q));
        }
        let metric = Metric::ALL
            .into_iter()
            .find(|m| m.as_str() == metric)
            .ok_or_else(bad)?;
        Ok(Figure::Quantile(metric, q))
    }

    /// Latency figures are written as durations and compared in seconds.
    pub fn is_latency(self) -> bool {
        matches!(self, Figure::Quantile(m, _) if m != Metric::TokensPerSecond)
    }

    pub fn higher_is_worse(self) -> bool {
        match self {
            Figure::Quantile(Metric::TokensPerSecond, _)
            | Figure::SuccessRate
            | Figure::AnswerSimilarity(_) => false,
            Figure::Quantile(..) | Figure::OutcomeCount(_) => true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Le,
    Lt,
    Ge,
    Gt,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    pub name: String,
    pub figure: Figure,
    pub op: Op,
    /// Seconds for latency figures.
    pub value: f64,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Relative {
    pub name: String,
    pub figure: Figure,
    /// Allowed change as a signed fraction, in the figure's worse direction (+0.2, -0.15).
    pub change: f64,
    pub text: String,
}

/// `answer_similarity_pNN` under `vs_baseline:`: the candidate's answers beside the baseline's,
/// paired, held to an absolute bound (`">= 0.8"`).
#[derive(Debug, Clone, PartialEq)]
pub struct Similarity {
    pub name: String,
    /// The quantile, 50 for `answer_similarity_p50`.
    pub quantile: u8,
    pub op: Op,
    pub value: f64,
    pub text: String,
}

impl Similarity {
    pub fn figure(&self) -> Figure {
        Figure::AnswerSimilarity(self.quantile)
    }
}

/// A `vs_baseline:` entry: a change beside the baseline's figure, or the answers' similarity.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum VsBaseline {
    Relative(Relative),
    Similarity(Similarity),
}

pub(crate) fn parse_vs_baseline(name: &str, text: &str) -> Result<VsBaseline, String> {
    let Figure::AnswerSimilarity(quantile) = Figure::parse(name)? else {
        return parse_relative(name, text).map(VsBaseline::Relative);
    };
    let t = text.trim();
    let (op, rest) = [(">=", Op::Ge), (">", Op::Gt)]
        .into_iter()
        .find_map(|(p, op)| t.strip_prefix(p).map(|r| (op, r.trim())))
        .unwrap_or((Op::Ge, t));
    let value = rest
        .parse::<f64>()
        .ok()
        .filter(|v| (0.0..=1.0).contains(v))
        .ok_or_else(|| {
            format!("{name}: expected a similarity between 0 and 1 like \">= 0.8\", found {text:?}")
        })?;
    Ok(VsBaseline::Similarity(Similarity {
        name: name.to_string(),
        quantile,
        op,
        value,
        text: text.to_string(),
    }))
}

pub(crate) fn parse_slo(name: &str, text: &str) -> Result<Slo, String> {
    let figure = Figure::parse(name)?;
    if let Figure::AnswerSimilarity(_) = figure {
        return Err(format!(
            "{name} compares the candidate's answers with the baseline's: put it under vs_baseline:"
        ));
    }
    let t = text.trim();
    let (op, rest) = [("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)]
        .into_iter()
        .find_map(|(p, op)| t.strip_prefix(p).map(|r| (op, r.trim())))
        .unwrap_or((
            if figure.higher_is_worse() {
                Op::Le
            } else {
                Op::Ge
            },
            t,
        ));
    let value = if figure.is_latency() {
        parse_duration(rest)
            .map_err(|e| format!("{name}: {e}"))?
            .as_secs_f64()
    } else {
        rest.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| {
                format!("{name}: expected a limit like \">= 20\" or \"<= 0\", found {text:?}")
            })?
    };
    if figure == Figure::SuccessRate && !(0.0..=1.0).contains(&value) {
        return Err(format!(
            "success_rate is a share between 0 and 1, found {value}"
        ));
    }
    Ok(Slo {
        name: name.to_string(),
        figure,
        op,
        value,
        text: text.to_string(),
    })
}

pub fn parse_relative(name: &str, text: &str) -> Result<Relative, String> {
    let figure = Figure::parse(name)?;
    if matches!(figure, Figure::OutcomeCount(_)) {
        return Err(format!(
            "{name}: limit outcome counts under slo:, not vs_baseline:"
        ));
    }
    let t = text.trim();
    let pct = t
        .strip_suffix('%')
        .and_then(|n| n.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && (t.starts_with('+') || t.starts_with('-')))
        .ok_or_else(|| {
            format!(
                "{name}: expected a signed percentage like \"+20%\" or \"-15%\", found {text:?}"
            )
        })?;
    if figure.higher_is_worse() != (pct > 0.0) {
        let hint = if figure.higher_is_worse() { "+" } else { "-" };
        return Err(format!(
            "{name} gets worse {}: write the allowed change as \"{hint}{}%\"",
            if figure.higher_is_worse() {
                "upwards"
            } else {
                "downwards"
            },
            pct.abs()
        ));
    }
    Ok(Relative {
        name: name.to_string(),
        figure,
        change: pct / 100.0,
        text: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn design_examples_parse() {
        let s = parse_slo("ttft_p95", "2s").unwrap();
        assert_eq!((s.op, s.value), (Op::Le, 2.0));
        let s = parse_slo("tokens_per_second_p50", ">= 20").unwrap();
        assert_eq!((s.op, s.value), (Op::Ge, 20.0));
        let s = parse_slo("success_rate", ">= 0.95").unwrap();
        assert_eq!((s.figure, s.value), (Figure::SuccessRate, 0.95));
        let s = parse_slo("outcome.repetition", "<= 0").unwrap();
        assert_eq!(s.figure, Figure::OutcomeCount(Outcome::Repetition));
        assert_eq!(parse_relative("ttft_p95", "+20%").unwrap().change, 0.2);
        assert_eq!(
            parse_relative("tokens_per_second_p50", "-15%")
                .unwrap()
                .change,
            -0.15
        );
    }

    #[test]
    fn mistakes_are_explained() {
        assert!(parse_slo("ttft_p42", "2s")
            .unwrap_err()
            .starts_with("unknown gate figure"));
        assert!(parse_slo("outcome.nope", "<= 0")
            .unwrap_err()
            .contains("unknown outcome"));
        assert!(parse_slo("success_rate", ">= 95")
            .unwrap_err()
            .contains("between 0 and 1"));
        assert!(parse_relative("ttft_p95", "20%")
            .unwrap_err()
            .contains("signed percentage"));
        assert!(parse_relative("tokens_per_second_p50", "+15%")
            .unwrap_err()
            .contains("\"-15%\""));
        assert!(parse_slo("answer_similarity_p50", ">= 0.8")
            .unwrap_err()
            .contains("vs_baseline"));
        assert!(parse_vs_baseline("answer_similarity_p50", ">= 80%")
            .unwrap_err()
            .contains("between 0 and 1"));
    }

    #[test]
    fn answer_similarity_is_an_absolute_bound_under_vs_baseline() {
        let VsBaseline::Similarity(s) =
            parse_vs_baseline("answer_similarity_p50", ">= 0.8").unwrap()
        else {
            panic!("not a similarity")
        };
        assert_eq!((s.quantile, s.op, s.value), (50, Op::Ge, 0.8));
        let VsBaseline::Similarity(s) = parse_vs_baseline("answer_similarity_p90", "0.5").unwrap()
        else {
            panic!("not a similarity")
        };
        assert_eq!((s.quantile, s.op, s.value), (90, Op::Ge, 0.5));
        assert!(matches!(
            parse_vs_baseline("ttft_p95", "+20%").unwrap(),
            VsBaseline::Relative(_)
        ));
    }
}
