//! A target's or a probe's `slo:`: an availability objective over a window and latency
//! objectives (a figure at or under a bound for a share of runs), validated at load. `rules`
//! turns them into Prometheus recording and burn-rate alert rules.

use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::duration::Dur;
use super::{ConfigError, FieldPath, Source};
use crate::buckets::LATENCY_BUCKETS;

/// `slo:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSlo {
    /// The share of runs that must succeed, e.g. `99.5%`.
    pub availability: Option<Spanned<String>>,
    /// The window the objectives hold over (default 30d).
    pub window: Option<Spanned<Dur>>,
    pub latency: Option<Vec<RawLatencyObjective>>,
}

/// One latency objective: `{figure: ttft, at_most: 1s, share: 95%}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLatencyObjective {
    pub figure: Spanned<String>,
    pub at_most: Spanned<Dur>,
    pub share: Spanned<String>,
}

/// The latency figures an objective may name: each is a histogram of the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloFigure {
    Ttft,
    AnswerTtft,
    E2e,
}

impl SloFigure {
    pub fn as_str(self) -> &'static str {
        match self {
            SloFigure::Ttft => "ttft",
            SloFigure::AnswerTtft => "answer_ttft",
            SloFigure::E2e => "e2e",
        }
    }

    /// The histogram that measures it.
    pub fn histogram(self) -> &'static str {
        match self {
            SloFigure::Ttft => "llm_canary_ttft_seconds",
            SloFigure::AnswerTtft => "llm_canary_answer_ttft_seconds",
            SloFigure::E2e => "llm_canary_e2e_seconds",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LatencyObjective {
    pub figure: SloFigure,
    /// A bucket boundary of the figure's histogram, in seconds.
    pub at_most: f64,
    /// The share of runs (0..1) that must be at or under `at_most`.
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    /// The share of runs (0..1) that must succeed.
    pub availability: Option<f64>,
    pub window: Duration,
    pub latency: Vec<LatencyObjective>,
}

const DEFAULT_WINDOW: Duration = Duration::from_secs(30 * 86_400);

/// `99.5%` or `0.995` → 0.995; strictly between 0 and 1 (an objective of 100% leaves no
/// budget to burn).
fn share(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("{text:?} is not a share: write e.g. 99.5% or 0.995"))?;
    if !(v > 0.0 && v < 1.0) {
        return Err(format!(
            "{text:?} must be above 0% and below 100% (100% leaves no error budget)"
        ));
    }
    Ok(v)
}

pub(super) fn load_slo(
    src: &Source,
    at: &FieldPath,
    raw: Spanned<RawSlo>,
) -> Result<Slo, ConfigError> {
    let (loc, raw) = (raw.referenced, raw.value);
    let availability = raw
        .availability
        .map(|a| share(&a.value).map_err(|m| src.err(&at.key("availability"), a.referenced, m)))
        .transpose()?;
    let window = match raw.window {
        Some(w) if w.value.0 < Duration::from_secs(86_400) => {
            return Err(src.err(
                &at.key("window"),
                w.referenced,
                "window must be at least 1d (error budgets are kept over days or weeks, e.g. 28d or 30d)",
            ))
        }
        Some(w) => w.value.0,
        None => DEFAULT_WINDOW,
    };
    let mut latency = Vec::new();
    for (i, o) in raw.latency.unwrap_or_default().into_iter().enumerate() {
        let field = at.key("latency").index(i);
        let figure = match o.figure.value.as_str() {
            "ttft" => SloFigure::Ttft,
            "answer_ttft" => SloFigure::AnswerTtft,
            "e2e" => SloFigure::E2e,
            other => {
                return Err(src.err(
                    &field.key("figure"),
                    o.figure.referenced,
                    format!("unknown latency figure {other:?}: use ttft, answer_ttft or e2e"),
                ))
            }
        };
        let secs = o.at_most.value.0.as_secs_f64();
        let Some(&at_most) = LATENCY_BUCKETS.iter().find(|b| (**b - secs).abs() < 1e-9) else {
            let bounds: Vec<String> = LATENCY_BUCKETS.iter().map(|b| format!("{b}s")).collect();
            return Err(src.err(
                &field.key("at_most"),
                o.at_most.referenced,
                format!(
                    "at_most must be a histogram bucket boundary: one of {}",
                    bounds.join(", ")
                ),
            ));
        };
        let share = share(&o.share.value)
            .map_err(|m| src.err(&field.key("share"), o.share.referenced, m))?;
        if latency
            .iter()
            .any(|l: &LatencyObjective| l.figure == figure && l.at_most == at_most)
        {
            return Err(src.err(
                &field,
                o.figure.referenced,
                format!("{} <= {secs}s is listed twice", figure.as_str()),
            ));
        }
        latency.push(LatencyObjective {
            figure,
            at_most,
            share,
        });
    }
    if availability.is_none() && latency.is_empty() {
        return Err(src.err(
            at,
            loc,
            "slo needs an availability objective or at least one latency objective",
        ));
    }
    Ok(Slo {
        availability,
        window,
        latency,
    })
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_read_as_percent_or_fraction() {
        assert_eq!(share("99.5%"), Ok(0.995));
        assert_eq!(share("0.95"), Ok(0.95));
        assert!(share("100%").unwrap_err().contains("no error budget"));
        assert!(share("0").is_err());
        assert!(share("most").unwrap_err().contains("not a share"));
    }
}
