//! A target's `price:`: what its tokens cost, per million, in a currency of the user's
//! choosing; `check` turns it into what probing costs a month.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{ConfigError, FieldPath, Source};

/// `price:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
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
