//! A probe's `cache_check:` setting: each firing sends a long prefix twice, busted (cold) then
//! identical (warm), to tell whether the server's prefix cache still serves it.
//!
//! `cache_check: {prefix_chars: 4000}` puts 4,000 characters of filler, unique to the firing,
//! before the probe's prompt. The probe's own cache busting does not apply: the check busts
//! once, by its prefix, and then asks to be served from the cache.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{ConfigError, FieldPath, Source};

/// The shortest prefix worth checking: below about 250 tokens a cache hit saves too little
/// time to see, and servers cache in blocks (vLLM: 16 tokens; Anthropic: from 1,024).
pub(super) const FEWEST_CHARS: i64 = 1_000;
/// The longest: about 50,000 tokens of filler, more than most servers' context.
pub(super) const MOST_CHARS: i64 = 200_000;

/// How a probe checks the target's prefix cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheCheck {
    /// Characters of the shared prefix put before the prompt.
    pub prefix_chars: usize,
}

/// `cache_check:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCacheCheck {
    pub prefix_chars: Spanned<i64>,
}

/// The probe's cache check, if it asks for one. `cache_bust_written`: the probe also says how
/// to bust caches, which the check decides for itself.
pub(super) fn load(
    src: &Source,
    at: &FieldPath,
    raw: Option<Spanned<RawCacheCheck>>,
    cache_bust_written: bool,
) -> Result<Option<CacheCheck>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    if cache_bust_written {
        return Err(src.err(
            at,
            raw.referenced,
            "cache_check busts the cache once and then asks to be served from it, so it takes no cache_bust: remove one of them",
        ));
    }
    let n = &raw.value.prefix_chars;
    if !(FEWEST_CHARS..=MOST_CHARS).contains(&n.value) {
        return Err(src.err(
            &at.key("prefix_chars"),
            n.referenced,
            format!(
                "prefix_chars must be between {FEWEST_CHARS} and {MOST_CHARS}, found {}",
                n.value
            ),
        ));
    }
    Ok(Some(CacheCheck {
        prefix_chars: n.value as usize,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        cache_check: Option<Spanned<RawCacheCheck>>,
    }

    fn load_text(text: &str, bust: bool) -> Result<Option<CacheCheck>, ConfigError> {
        let src = Source {
            path: std::path::Path::new("p.yaml"),
            text,
        };
        let doc: Doc = src.parse()?;
        load(
            &src,
            &FieldPath::root().key("cache_check"),
            doc.cache_check,
            bust,
        )
    }

    #[test]
    fn a_prefix_length_within_bounds_and_no_cache_bust_beside_it() {
        assert_eq!(load_text("cache_check: null", false).unwrap(), None);
        assert_eq!(
            load_text("cache_check: {prefix_chars: 4000}", false).unwrap(),
            Some(CacheCheck { prefix_chars: 4000 })
        );
        let e = load_text("cache_check: {prefix_chars: 999}", false).unwrap_err();
        assert!(
            e.to_string()
                .contains("p.yaml:1:29: field cache_check.prefix_chars: prefix_chars must be between 1000 and 200000, found 999"),
            "{e}"
        );
        let e = load_text("cache_check: {prefix_chars: 4000}", true).unwrap_err();
        assert!(
            e.to_string()
                .contains("field cache_check: cache_check busts"),
            "{e}"
        );
        assert!(load_text("cache_check: {chars: 4000}", false).is_err());
        assert!(load_text("cache_check: {}", false).is_err());
    }
}
