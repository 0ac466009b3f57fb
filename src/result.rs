//! The record of one probe run: plain data, serialized as docs/design.md's result record (one
//! JSON object per line for `once --format json`, the results log and the gate). Absent figures
//! are `null`; the generated text only when asked for; never the API key.
//!
//! A record is made of parts, each made once where it is known and serialized flattened, in
//! this order: which run it is ([`RunId`], from the request), what its text was judged
//! ([`Judged`], from the checks), what it measured ([`Measured`]: what the response showed,
//! [`Reading`], and the figures made of it), and the context it ran in ([`RunContext`], which
//! the runner knows and the run cannot). A run yields the first three as a [`Measurement`];
//! [`ProbeResult::new`] sets it beside its context, and nothing sets a field afterwards.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::checks::repetition;
use crate::outcome::{HttpReason, Outcome};
pub use crate::timeline::TokensSource;
use crate::timeline::{Figures, Timeline};

/// The record of one run: which run, what it was judged, what it measured, and in what context.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeResult {
    #[serde(flatten)]
    pub id: RunId,
    #[serde(flatten)]
    pub judged: Judged,
    #[serde(flatten)]
    pub measured: Measured,
    #[serde(flatten)]
    pub context: RunContext,
}

/// What one run yields before it is set beside the runs before it: which run it was, what its
/// text was judged, what it measured.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub id: RunId,
    pub judged: Judged,
    pub measured: Measured,
}

/// Which run a record is: its pair, the request's ids, when it started, and its ladder rung.
#[derive(Debug, Clone, Serialize)]
pub struct RunId {
    pub probe: String,
    pub target: String,
    pub model: String,
    /// The target's labels (`model_version`, `env` ...), so a record says what it measured.
    pub labels: BTreeMap<String, String>,
    pub request_id: String,
    /// The trace id of the W3C `traceparent` the request carried.
    pub trace_id: String,
    #[serde(serialize_with = "rfc3339")]
    pub started_at: jiff::Timestamp,
    /// The context-ladder rung this run climbed, when its probe has a ladder: serialized as
    /// `rung`, by its size in tokens (`"2048"`), and `prompt_tokens_estimate`; both null
    /// without a ladder.
    #[serde(flatten, serialize_with = "rung")]
    pub rung: Option<Rung>,
}

/// What the run's text was judged: its outcome (serialized with `success`, derived from it),
/// the checks that failed, and why, with what the checks measured on the way.
#[derive(Debug, Clone, Serialize)]
pub struct Judged {
    #[serde(flatten, serialize_with = "outcome_and_success")]
    pub outcome: Outcome,
    pub failed_checks: Vec<Outcome>,
    /// Why the run failed, for the on-call engineer (secrets masked).
    pub error: Option<String>,
    pub output_chars: Option<usize>,
    /// What the degeneration detectors measured (null when the check is off or did not run),
    /// serialized with `repetition_score` (its score, to three places) before it.
    #[serde(flatten, serialize_with = "repetition_and_score")]
    pub repetition: Option<repetition::Report>,
    /// The answer's chrF (0 to 1) against the probe's `checks.reference`; null without one.
    #[serde(serialize_with = "thousandths")]
    pub similarity: Option<f64>,
}

/// What one response showed, as the reader took it in (`crate::probe::read`): status, refusal,
/// counts the server sent, and when everything arrived. The figures are made of it afterwards
/// ([`Measured`]).
#[derive(Debug, Clone, Serialize)]
pub struct Reading {
    pub http_status: Option<u16>,
    /// Why an `http_error` was refused (`rate_limited`, `overloaded`, `auth` ...); `null` for
    /// every other outcome.
    #[serde(rename = "reason")]
    pub http_reason: Option<HttpReason>,
    /// A refused run's `Retry-After` and `x-ratelimit-*` headers, by name; `null` when it had
    /// none.
    pub rate_limit: Option<BTreeMap<String, String>>,
    pub finish_reason: Option<String>,
    /// The server's count of output tokens, when it reports one (see [`Measured::output_tokens`]).
    #[serde(skip)]
    pub usage_tokens: Option<u64>,
    /// The server's count of reasoning tokens, when it reports one.
    pub reasoning_tokens: Option<u64>,
    /// The server's count of prompt tokens, when it reports one.
    pub input_tokens: Option<u64>,
    /// The server's count of prompt tokens it served from its prefix cache, when it reports one.
    pub cached_tokens: Option<u64>,
    /// Events that carried generated content.
    #[serde(rename = "content_chunks")]
    pub chunks: usize,
    /// Body bytes read (headers excluded).
    #[serde(rename = "response_bytes")]
    pub bytes_read: usize,
    /// Reading stopped once the output certainly looped (`checks.stop_on_repetition`): the
    /// figures are those measured until then.
    pub stopped_early: bool,
    pub server_timings: Option<serde_json::Value>,
    /// The model name the server echoed.
    pub reported_model: Option<String>,
    /// The TLS session the run's connection used; `null` for `http://` or before a handshake.
    pub tls: Option<TlsSession>,
    /// The build fingerprint the server sent (`system_fingerprint`).
    #[serde(skip)]
    pub system_fingerprint: Option<String>,
    /// The raw arrival instants, for benchmarks and the gate; not part of the record.
    #[serde(skip)]
    pub timeline: Timeline,
}

impl Reading {
    /// Nothing read yet, from `start`.
    pub fn empty(start: std::time::Instant) -> Reading {
        Reading {
            http_status: None,
            http_reason: None,
            rate_limit: None,
            finish_reason: None,
            usage_tokens: None,
            reasoning_tokens: None,
            input_tokens: None,
            cached_tokens: None,
            chunks: 0,
            bytes_read: 0,
            stopped_early: false,
            server_timings: None,
            reported_model: None,
            tls: None,
            system_fingerprint: None,
            timeline: Timeline::new(start),
        }
    }

    /// What the answer said identifies the serving build: its `system_fingerprint`, else the
    /// echoed model name; nothing when the run never reached the model.
    pub fn build(&self) -> Option<&str> {
        self.system_fingerprint
            .as_deref()
            .or(self.reported_model.as_deref())
    }
}

/// A TLS session as the probe's connection saw it after the handshake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TlsSession {
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: String,
    /// The cipher suite's IANA name (`TLS13_AES_256_GCM_SHA384`).
    pub cipher: String,
    /// The leaf certificate's issuer, as a distinguished name (RFC 4514).
    pub issuer: String,
    /// The earliest notAfter among the certificates the server sent.
    #[serde(serialize_with = "rfc3339")]
    pub earliest_expiry: jiff::Timestamp,
}

/// What a run measured: what its response showed, and the figures made of it once reading
/// ended.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    #[serde(flatten)]
    pub reading: Reading,
    #[serde(flatten, serialize_with = "figures")]
    pub figures: Figures,
    pub output_tokens: Option<u64>,
    pub tokens_source: Option<TokensSource>,
    /// The server's own time to first token, from its timings (llama.cpp's `prompt_ms`, Ollama's
    /// load + prompt evaluation), when it sent them.
    pub server_ttft_ms: Option<f64>,
    /// SHA-256 of the generated text (hex); none when the run failed in transport.
    pub output_sha256: Option<String>,
    /// The generated text, when asked for (`--show-output`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The generated text, for comparisons across runs (`prompt_ignored`, the gate's
    /// `answer_similarity`); `None` when the run failed in transport. Not part of the record.
    #[serde(skip)]
    pub answer: Option<Arc<str>>,
}

/// A context-ladder rung's run: its size, and its prompt's tokens as estimated from characters
/// (the server's count, when it reports one, is `input_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rung {
    pub size: u32,
    pub prompt_tokens_estimate: u64,
}

/// A rung's prefill speed beside the ladder's smallest rung (see [`crate::probe::ladder::prefill`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prefill {
    pub tokens_per_second: f64,
    /// Whose prompt token counts it divides: the server's, or the estimates.
    pub source: PromptTokens,
}

/// Where a prompt token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptTokens {
    /// The server's usage report.
    Usage,
    /// Characters at [`crate::config::ladder::CHARS_PER_TOKEN`] a token.
    Estimate,
}

/// How a run stands beside the runs before it, and the window it fell in: what the runner and
/// its caller know, and the run itself cannot.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunContext {
    /// The pair's first success since start or since its target was unreachable: a cold start,
    /// reported apart from the latency figures.
    pub warmup: bool,
    /// What identifies the serving build: what the answer said, with the target's model-list
    /// entry when one is known (see [`crate::probe::identity`]); none when the run never
    /// reached the model.
    pub fingerprint: Option<Fingerprint>,
    /// The fingerprint differs from the one this target showed before (not on the first run).
    pub target_changed: bool,
    /// A temperature-0 probe's output differs from its previous one on this target.
    pub output_changed: bool,
    /// The run fell in a maintenance window of its target (configured or announced): it is
    /// measured and recorded as usual, and alerts hold.
    pub maintenance: bool,
    /// A confirmation run: the daemon re-ran the pair after a failed run, before its next
    /// scheduled one (the probe's `confirm:`; `once`, `gate` and `/probe` never confirm).
    pub confirm: bool,
    /// A cache check's run, and what it showed beside the cold one (`cache_check:`):
    /// serialized as `cache_phase` (`cold`, `warm`, or null for any other run),
    /// `prefix_cache_hit_ratio` and `prefix_cache_ttft_speedup` (a warm run's).
    #[serde(flatten, serialize_with = "cache_check")]
    pub cache_check: Option<CacheRun>,
    /// A ladder rung's prefill speed beside the smallest rung of its firing, serialized as
    /// `prefill_tokens_per_second` and `prefill_tokens_source` (whose token counts it divides).
    #[serde(flatten, serialize_with = "prefill")]
    pub prefill: Option<Prefill>,
}

impl RunContext {
    /// Which run of a cache check this is, if it is one.
    pub fn cache_phase(&self) -> Option<CachePhase> {
        self.cache_check.map(|c| c.phase)
    }
}

/// Which run of a cache check a run is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CachePhase {
    /// The first request: its prefix is new to the server.
    Cold,
    /// The same request again, beside the cold run it repeats.
    Warm,
}

/// A cache check's run: which one it is, and what it showed (a warm run, beside its cold
/// run; nothing for a cold run).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheRun {
    pub phase: CachePhase,
    pub figures: CacheFigures,
}

/// What a warm run shows beside its cold run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CacheFigures {
    /// Cached prompt tokens / prompt tokens of the warm run, 0..1; absent when the server
    /// reports no cached count.
    pub hit_ratio: Option<f64>,
    /// Cold TTFT / warm TTFT: above 1 when the cache made the warm run's first token sooner.
    pub ttft_speedup: Option<f64>,
}

/// What identifies the serving build: what the answer said, and the target's model-list entry
/// when one is known. Serialized as one string, `"{build}; models {models}"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub build: String,
    pub models: Option<String>,
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.build)?;
        match &self.models {
            Some(m) => write!(f, "; models {m}"),
            None => Ok(()),
        }
    }
}

impl From<&str> for Fingerprint {
    fn from(build: &str) -> Fingerprint {
        Fingerprint {
            build: build.to_string(),
            models: None,
        }
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

fn rfc3339<S: serde::Serializer>(t: &jiff::Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&t.round(jiff::Unit::Millisecond).unwrap_or(*t))
}

fn round3(v: Option<f64>) -> Option<f64> {
    v.map(|x| (x * 1000.0).round() / 1000.0)
}

fn thousandths<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    round3(*v).serialize(s)
}

fn outcome_and_success<S: serde::Serializer>(o: &Outcome, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("outcome", o)?;
    m.serialize_entry("success", &(*o == Outcome::Ok))?;
    m.end()
}

fn repetition_and_score<S: serde::Serializer>(
    r: &Option<repetition::Report>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("repetition_score", &score(r.as_ref()))?;
    m.serialize_entry("repetition", r)?;
    m.end()
}

/// A repetition report's score, to three places, as the record and the metrics give it.
fn score(r: Option<&repetition::Report>) -> Option<f64> {
    round3(r.map(|r| r.measures.score))
}

fn rung<S: serde::Serializer>(r: &Option<Rung>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("rung", &r.map(|r| r.size.to_string()))?;
    m.serialize_entry(
        "prompt_tokens_estimate",
        &r.map(|r| r.prompt_tokens_estimate),
    )?;
    m.end()
}

fn cache_check<S: serde::Serializer>(c: &Option<CacheRun>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(3))?;
    m.serialize_entry("cache_phase", &c.map(|c| c.phase))?;
    m.serialize_entry(
        "prefix_cache_hit_ratio",
        &round3(c.and_then(|c| c.figures.hit_ratio)),
    )?;
    m.serialize_entry(
        "prefix_cache_ttft_speedup",
        &round3(c.and_then(|c| c.figures.ttft_speedup)),
    )?;
    m.end()
}

fn prefill<S: serde::Serializer>(p: &Option<Prefill>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("prefill_tokens_per_second", &p.map(|p| p.tokens_per_second))?;
    m.serialize_entry("prefill_tokens_source", &p.map(|p| p.source))?;
    m.end()
}

fn figures<S: serde::Serializer>(f: &Figures, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(13))?;
    m.serialize_entry("dns_ms", &round3(f.dns_ms))?;
    m.serialize_entry("connect_ms", &round3(f.connect_ms))?;
    m.serialize_entry("tls_ms", &round3(f.tls_ms))?;
    m.serialize_entry("ttfb_ms", &round3(f.ttfb_ms))?;
    m.serialize_entry("ttft_ms", &round3(f.ttft_ms))?;
    m.serialize_entry("answer_ttft_ms", &round3(f.answer_ttft_ms))?;
    m.serialize_entry("ttft_after_connect_ms", &round3(f.ttft_after_connect_ms))?;
    m.serialize_entry("e2e_ms", &round3(f.e2e_ms))?;
    m.serialize_entry("tpot_ms", &round3(f.tpot_ms))?;
    m.serialize_entry("tokens_per_second", &round3(f.tokens_per_second))?;
    m.serialize_entry("itl_p50_ms", &round3(f.itl_p50_ms))?;
    m.serialize_entry("itl_p99_ms", &round3(f.itl_p99_ms))?;
    m.serialize_entry("itl_max_ms", &round3(f.itl_max_ms))?;
    m.end()
}

impl Judged {
    /// The run passed every check.
    pub fn success(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    /// A check judged across runs (the runner's `prompt_ignored`) failed too: it joins the
    /// failed checks in precedence order, and decides the outcome, saying `why`, when it comes
    /// first among them. For a run that answered: a transport failure is judged no further.
    pub fn also_failed(&mut self, check: Outcome, why: impl FnOnce() -> String) {
        self.failed_checks.push(check);
        self.failed_checks.sort_by_key(|o| o.index());
        self.outcome = Outcome::first_content_failure(&self.failed_checks);
        if self.outcome == check {
            self.error = Some(why());
        }
    }

    /// The degeneration score (0..1, to three places), when the check ran.
    pub fn repetition_score(&self) -> Option<f64> {
        score(self.repetition.as_ref())
    }
}

impl ProbeResult {
    /// The record of a run: what it measured, in its context.
    pub fn new(m: Measurement, context: RunContext) -> ProbeResult {
        let Measurement {
            id,
            judged,
            measured,
        } = m;
        ProbeResult {
            id,
            judged,
            measured,
            context,
        }
    }

    /// The run passed every check (`outcome` is `ok`).
    pub fn success(&self) -> bool {
        self.judged.success()
    }

    /// A successful result with every figure absent, for tests to adjust.
    #[cfg(test)]
    pub fn example() -> ProbeResult {
        ProbeResult::new(Measurement::example(), RunContext::default())
    }

    /// One JSON line.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a result always serializes")
    }
}

#[cfg(test)]
impl Measurement {
    /// A successful run with every figure absent.
    pub fn example() -> Measurement {
        Measurement {
            id: RunId {
                probe: "p".into(),
                target: "t".into(),
                model: "m".into(),
                labels: BTreeMap::new(),
                request_id: "r".into(),
                trace_id: String::new(),
                started_at: jiff::Timestamp::UNIX_EPOCH,
                rung: None,
            },
            judged: Judged {
                outcome: Outcome::Ok,
                failed_checks: vec![],
                error: None,
                output_chars: None,
                repetition: None,
                similarity: None,
            },
            measured: Measured {
                reading: Reading {
                    http_status: Some(200),
                    ..Reading::empty(std::time::Instant::now())
                },
                figures: Figures::default(),
                output_tokens: None,
                tokens_source: None,
                server_ttft_ms: None,
                output_sha256: None,
                output: None,
                answer: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_the_fingerprint_serialize_as_the_record_has_them() {
        let mut m = Measurement::example();
        let ctx = RunContext {
            fingerprint: Some(Fingerprint {
                build: "b1".into(),
                models: Some("m1".into()),
            }),
            confirm: true,
            ..RunContext::default()
        };
        let v: serde_json::Value =
            serde_json::from_str(&ProbeResult::new(m.clone(), ctx).to_json_line()).unwrap();
        assert_eq!((&v["outcome"], &v["success"]), (&"ok".into(), &true.into()));
        assert_eq!(v["fingerprint"], "b1; models m1");
        assert_eq!(v["confirm"], true);
        m.judged.outcome = Outcome::Repetition;
        let line = ProbeResult::new(m, RunContext::default()).to_json_line();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["success"], false);
        assert_eq!(v["fingerprint"], serde_json::Value::Null);
        assert_eq!(v["confirm"], false);
        // The record's keys and their order are part of what readers see: the run's identity,
        // what it was judged, what it measured, the context it ran in.
        let keys = "probe target model labels request_id trace_id started_at rung \
             prompt_tokens_estimate \
             outcome success failed_checks error output_chars repetition_score repetition \
             similarity \
             http_status reason rate_limit finish_reason reasoning_tokens input_tokens \
             cached_tokens content_chunks response_bytes stopped_early server_timings \
             reported_model tls dns_ms connect_ms tls_ms ttfb_ms ttft_ms answer_ttft_ms \
             ttft_after_connect_ms e2e_ms tpot_ms tokens_per_second \
             itl_p50_ms itl_p99_ms itl_max_ms output_tokens tokens_source server_ttft_ms \
             output_sha256 \
             warmup fingerprint target_changed output_changed maintenance confirm cache_phase \
             prefix_cache_hit_ratio prefix_cache_ttft_speedup prefill_tokens_per_second \
             prefill_tokens_source";
        let at: Vec<Option<usize>> = keys
            .split_whitespace()
            .map(|k| line.find(&format!("\"{k}\":")))
            .collect();
        assert!(at.iter().all(Option::is_some), "{line}");
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
        assert_eq!(
            line.matches("\":").count(),
            at.len(),
            "no other key: {line}"
        );
    }
}
