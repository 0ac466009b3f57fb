//! A target's `price:`: what its tokens cost, per million, in a currency of the user's
//! choosing; `check` turns it into what probing costs a month.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{ConfigError, FieldPath, Source};

/// `price:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPrice {
    /// Per million input (prompt) tokens.
    pub input: Spanned<f64>,
    /// Per million output (generated) tokens.
    pub output: Spanned<f64>,
    /// A name for people (`USD`, `EUR`); default `USD`.
    pub currency: Option<Spanned<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Price {
    pub input_per_million: f64,
    pub output_per_million: f64,
    pub currency: String,
}

impl Price {
    /// What `input` and `output` tokens cost.
    pub fn cost(&self, input: f64, output: f64) -> f64 {
        (input * self.input_per_million + output * self.output_per_million) / 1e6
    }
}

pub(super) fn load_price(
    src: &Source,
    at: &FieldPath,
    raw: RawPrice,
) -> Result<Price, ConfigError> {
    for (key, v) in [("input", &raw.input), ("output", &raw.output)] {
        if !(v.value.is_finite() && v.value >= 0.0) {
            return Err(src.err(
                &at.key(key),
                v.referenced,
                format!(
                    "{key} must be a price per million tokens of 0 or more, found {}",
                    v.value
                ),
            ));
        }
    }
    let currency = match raw.currency {
        Some(c)
            if c.value.is_empty()
                || c.value.len() > 8
                || !c.value.chars().all(|ch| ch.is_ascii_alphabetic()) =>
        {
            return Err(src.err(
                &at.key("currency"),
                c.referenced,
                format!(
                    "currency {:?} must be a code of 1-8 letters, such as USD or EUR",
                    c.value
                ),
            ))
        }
        Some(c) => c.value,
        None => "USD".into(),
    };
    Ok(Price {
        input_per_million: raw.input.value,
        output_per_million: raw.output.value,
        currency,
    })
}

/// `agent.budget:` as written: what probing may cost a day and a month (UTC), in the targets'
/// price currency.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudget {
    pub daily: Option<Spanned<f64>>,
    pub monthly: Option<Spanned<f64>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub daily: Option<f64>,
    pub monthly: Option<f64>,
    pub currency: String,
}

/// A budget needs prices (the targets'), all in one currency, to be compared with.
pub(super) fn load_budget(
    src: &Source,
    at: &FieldPath,
    raw: Spanned<RawBudget>,
    prices: &[&Price],
) -> Result<Budget, ConfigError> {
    let (loc, raw) = (raw.referenced, raw.value);
    for (key, v) in [("daily", &raw.daily), ("monthly", &raw.monthly)] {
        if let Some(v) = v
            .as_ref()
            .filter(|v| !(v.value.is_finite() && v.value > 0.0))
        {
            return Err(src.err(
                &at.key(key),
                v.referenced,
                format!("{key} must be an amount above 0, found {}", v.value),
            ));
        }
    }
    if raw.daily.is_none() && raw.monthly.is_none() {
        return Err(src.err(at, loc, "budget needs daily, monthly or both"));
    }
    let mut currencies: Vec<&str> = prices.iter().map(|p| p.currency.as_str()).collect();
    currencies.sort_unstable();
    currencies.dedup();
    let currency = match currencies.as_slice() {
        [one] => one.to_string(),
        [] => {
            return Err(src.err(
                at,
                loc,
                "budget needs a target with a price: (nothing else costs anything)",
            ))
        }
        many => {
            return Err(src.err(
                at,
                loc,
                format!(
                    "budget cannot add up prices in several currencies ({}): give every target's price one currency",
                    many.join(", ")
                ),
            ))
        }
    };
    Ok(Budget {
        daily: raw.daily.map(|d| d.value),
        monthly: raw.monthly.map(|m| m.value),
        currency,
    })
}
