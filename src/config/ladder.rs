//! A probe's `ladder:` setting: the context-length ladder. Each firing sends one run per rung,
//! a prompt of about `sizes[i]` tokens (estimated at [`CHARS_PER_TOKEN`] characters a token),
//! smallest first. With `needle: true` (the default) each prompt hides a random fact at a
//! random depth and asks for it back; with `needle: false` the probe's own prompt is padded to
//! each size and judged by its own checks.
//!
//! `ladder: {sizes: [512, 2048, 8192], needle: true}`.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{ConfigError, FieldPath, Prompt, Source};

/// Characters a token, for the rungs' sizes: about right for English prose with today's
/// tokenizers (the ladder's filler is English); the server's own count, where it reports one,
/// is recorded beside the estimate.
pub(crate) const CHARS_PER_TOKEN: usize = 4;

/// The most rungs a ladder may have: each one is a run per firing and a set of series.
pub(crate) const MOST_RUNGS: usize = 8;

/// The smallest rung: room for the needle, the question and some text around them.
pub(crate) const SMALLEST: i64 = 64;

/// The largest rung, 128 Ki tokens (about 512 KiB of prompt): beyond today's usual context
/// windows, and as much as one request of the agent should carry.
pub(crate) const LARGEST: i64 = 131_072;

/// The ladder a probe climbs each firing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ladder {
    /// The rungs' prompt sizes in tokens, ascending.
    pub sizes: Vec<u32>,
    /// Each prompt hides a fact and asks for it back.
    pub needle: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLadder {
    pub sizes: Spanned<Vec<Spanned<i64>>>,
    pub needle: Option<Spanned<bool>>,
}

/// What the rest of the probe says that the ladder must agree with.
pub(super) struct Around<'a> {
    /// The probe's prompt, when it names one.
    pub prompt: Option<&'a Prompt>,
    /// A `checks:` setting that judges something a needle's answer (a code in a sentence)
    /// never is: JSON or a tool call, by name.
    pub answer_shape: Option<&'static str>,
    pub gated: bool,
}

/// The probe's ladder, checked against the rest of the probe.
pub(super) fn load(
    src: &Source,
    at: &FieldPath,
    raw: &Spanned<RawLadder>,
    around: Around,
) -> Result<Ladder, ConfigError> {
    let r = &raw.value;
    let sizes_at = at.key("sizes");
    if r.sizes.value.is_empty() || r.sizes.value.len() > MOST_RUNGS {
        return Err(src.err(
            &sizes_at,
            r.sizes.referenced,
            format!(
                "a ladder has 1 to {MOST_RUNGS} rungs, found {}",
                r.sizes.value.len()
            ),
        ));
    }
    let mut sizes: Vec<u32> = Vec::new();
    for (i, s) in r.sizes.value.iter().enumerate() {
        let err = |m: String| Err(src.err(&sizes_at.index(i), s.referenced, m));
        if !(SMALLEST..=LARGEST).contains(&s.value) {
            return err(format!(
                "a rung is {SMALLEST} to {LARGEST} tokens, found {}",
                s.value
            ));
        }
        let size = s.value as u32;
        if let Some(&before) = sizes.last().filter(|&&b| b >= size) {
            return err(format!("sizes must ascend: {size} comes after {before}"));
        }
        sizes.push(size);
    }
    let needle = r.needle.as_ref().is_none_or(|n| n.value);
    let needle_at = r.needle.as_ref().map_or(raw.referenced, |n| n.referenced);
    if around.gated {
        return Err(src.err(
            at,
            raw.referenced,
            "a ladder's rungs are not samples of one figure, so the gate cannot compare them: move `gate:` to a probe without a ladder",
        ));
    }
    if needle {
        if let Some(check) = around.answer_shape {
            return Err(src.err(
                &at.key("needle"),
                needle_at,
                format!("a needle's answer is a code in a sentence, which checks.{check} cannot pass: remove one of them"),
            ));
        }
    } else {
        let Some(prompt) = around.prompt else {
            return Err(src.err(
                &at.key("needle"),
                needle_at,
                "a ladder without a needle pads the probe's prompt to each size: add `prompt`",
            ));
        };
        let chars: usize = prompt.messages.iter().map(|m| m.content.len()).sum();
        let tokens = chars.div_ceil(CHARS_PER_TOKEN);
        if tokens >= sizes[0] as usize {
            return Err(src.err(
                &sizes_at.index(0),
                r.sizes.value[0].referenced,
                format!(
                    "rung {} is no larger than the prompt it pads (about {tokens} tokens at {CHARS_PER_TOKEN} characters a token)",
                    sizes[0]
                ),
            ));
        }
    }
    Ok(Ladder { sizes, needle })
}
