//! The files as written: serde structs that reject unknown keys. Values that can be checked
//! alone (durations, cron, regexes, enums) are checked while parsing, so their errors carry a
//! position; cross-references (targets, prompt files, duplicates) are checked in `load`.

use std::collections::BTreeMap;

use regex::Regex;
use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::duration::Dur;
use crate::checks::repetition::Thresholds;
use crate::probe::flavor::PrefixCache;
pub(crate) use crate::probe::flavor::{Api, Message, Role};
use crate::schedule::{Cron, Every, Schedule};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMain {
    #[serde(default)]
    pub agent: RawAgent,
    pub push: Option<RawPush>,
    pub remote_write: Option<RawRemoteWrite>,
    pub otlp: Option<super::otlp::RawOtlp>,
    pub targets: Spanned<Vec<RawTarget>>,
    pub probes_dir: Option<String>,
    pub prompts_dir: Option<String>,
    pub maintenance: Option<Vec<RawMaintenance>>,
    pub status: Option<RawStatus>,
}

/// The status page's memory.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStatus {
    pub history: Option<Spanned<Dur>>,
    pub store: Option<String>,
}

/// A recurring maintenance window: from each fire time of `schedule` (in `timezone`), for
/// `duration`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMaintenance {
    pub targets: Spanned<Vec<Spanned<String>>>,
    pub schedule: ScheduleSpec,
    pub timezone: Option<Spanned<String>>,
    pub duration: Spanned<Dur>,
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgent {
    pub name: Option<Spanned<String>>,
    pub labels: Option<Spanned<BTreeMap<String, String>>>,
    pub concurrency: Option<Spanned<i64>>,
    pub listen: Option<Spanned<String>>,
    pub results_log: Option<String>,
    pub results_log_max_bytes: Option<Spanned<i64>>,
    pub results_log_keep: Option<Spanned<i64>>,
    pub shutdown_grace: Option<Dur>,
    pub shard: Option<Spanned<String>>,
    pub admin_token_env: Option<Spanned<String>>,
    pub admin_token_file: Option<Spanned<String>>,
    pub web_config_file: Option<String>,
    pub budget: Option<Spanned<super::price::RawBudget>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPush {
    pub url: Spanned<String>,
    pub job: Option<Spanned<String>>,
    pub min_interval: Option<Dur>,
    pub delete_on_shutdown: Option<bool>,
    pub timeout: Option<Dur>,
    pub username: Option<Spanned<String>>,
    pub password_env: Option<Spanned<String>>,
    pub password_file: Option<Spanned<String>>,
    pub bearer_token_env: Option<Spanned<String>>,
    pub bearer_token_file: Option<Spanned<String>>,
    pub tls: Option<Spanned<super::tls::RawTls>>,
    pub proxy_url: Option<Spanned<String>>,
    pub no_proxy: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRemoteWrite {
    pub url: Spanned<String>,
    pub job: Option<Spanned<String>>,
    pub interval: Option<Spanned<Dur>>,
    pub timeout: Option<Spanned<Dur>>,
    pub queue: Option<RawQueue>,
    pub username: Option<Spanned<String>>,
    pub password_env: Option<Spanned<String>>,
    pub password_file: Option<Spanned<String>>,
    pub bearer_token_env: Option<Spanned<String>>,
    pub bearer_token_file: Option<Spanned<String>>,
    pub tls: Option<Spanned<super::tls::RawTls>>,
    pub proxy_url: Option<Spanned<String>>,
    pub no_proxy: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQueue {
    pub max_samples: Option<Spanned<i64>>,
    pub max_samples_per_send: Option<Spanned<i64>>,
    pub max_backoff: Option<Spanned<Dur>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerKind {
    Vllm,
    Sglang,
    LlamaCpp,
    Tgi,
    Ollama,
    Anthropic,
    Generic,
}

impl ServerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Vllm => "vllm",
            ServerKind::Sglang => "sglang",
            ServerKind::LlamaCpp => "llama-cpp",
            ServerKind::Tgi => "tgi",
            ServerKind::Ollama => "ollama",
            ServerKind::Anthropic => "anthropic",
            ServerKind::Generic => "generic",
        }
    }

    /// The body field this server honours to skip its prefix cache on this API, if any:
    /// vLLM's `cache_salt` and llama.cpp's `cache_prompt: false`, on the endpoints where the
    /// API's flavor says the server honours them.
    pub fn cache_bust_field(self, api: Api) -> Option<(&'static str, CacheBustValue)> {
        let PrefixCache::Server {
            vllm_cache_salt,
            llama_cache_prompt,
        } = api.flavor().prefix_cache()
        else {
            return None;
        };
        match self {
            ServerKind::Vllm if vllm_cache_salt => Some(("cache_salt", CacheBustValue::Fresh)),
            ServerKind::LlamaCpp if llama_cache_prompt => {
                Some(("cache_prompt", CacheBustValue::False))
            }
            _ => None,
        }
    }
}

/// What a cache-busting body field is set to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheBustValue {
    /// A fresh random value on every request.
    Fresh,
    False,
}

/// `priority:` as written: a word (`lowest`, `highest`, `default`) or an integer, read in
/// [`super::priority`].
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawPriority {
    Value(i64),
    Word(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTarget {
    pub name: Spanned<String>,
    pub base_url: Spanned<String>,
    pub api: Option<Api>,
    pub server: Option<ServerKind>,
    pub model: Spanned<String>,
    pub labels: Option<Spanned<BTreeMap<String, String>>>,
    pub api_key_env: Option<Spanned<String>>,
    pub api_key_file: Option<Spanned<String>>,
    pub headers: Option<Spanned<BTreeMap<String, String>>>,
    pub priority: Option<Spanned<RawPriority>>,
    pub priority_low_values_first: Option<Spanned<bool>>,
    pub slo: Option<Spanned<super::slo::RawSlo>>,
    pub price: Option<super::price::RawPrice>,
    pub aws: Option<Spanned<super::aws::RawAws>>,
    pub api_version: Option<Spanned<String>>,
    pub entra: Option<Spanned<super::azure::RawEntra>>,
    pub tls: Option<Spanned<super::tls::RawTls>>,
    pub proxy_url: Option<Spanned<String>>,
    pub no_proxy: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheBust {
    #[default]
    Auto,
    Prefix,
    Off,
}

/// A probe file holds one probe or a list of them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProbe {
    pub name: Spanned<String>,
    /// A cron expression, or `@every 5m`; not with `every`.
    pub schedule: Option<Spanned<ScheduleSpec>>,
    /// An interval (`5m`), fired at its multiples from the Unix epoch; not with `schedule`.
    pub every: Option<Spanned<EverySpec>>,
    pub timezone: Option<Spanned<String>>,
    pub jitter: Option<Dur>,
    pub targets: Option<Vec<Spanned<String>>>,
    /// Required, unless a ladder with a needle writes the prompt (see [`super::ladder`]).
    pub prompt: Option<Spanned<String>>,
    pub max_tokens: Option<Spanned<i64>>,
    pub temperature: Option<Spanned<f64>>,
    pub cache_bust: Option<CacheBust>,
    /// A JSON file of OpenAI function definitions, relative to the agent file's folder.
    pub tools: Option<Spanned<String>>,
    pub timeouts: Option<RawTimeouts>,
    pub checks: Option<RawChecks>,
    pub gate: Option<RawGate>,
    /// How the daemon re-runs a failed pair (see [`super::confirm`]).
    pub confirm: Option<super::confirm::RawConfirm>,
    /// Objectives for this probe's runs on each of its targets (see [`super::slo`]).
    pub slo: Option<Spanned<super::slo::RawSlo>>,
    /// A prefix sent twice, cold then warm (see [`super::cache_check`]).
    pub cache_check: Option<Spanned<super::cache_check::RawCacheCheck>>,
    /// The context-length ladder (see [`super::ladder`]).
    pub ladder: Option<Spanned<super::ladder::RawLadder>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTimeouts {
    pub connect: Option<Spanned<Dur>>,
    pub ttft: Option<Spanned<Dur>>,
    pub stall: Option<Spanned<Dur>>,
    pub total: Option<Spanned<Dur>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChecks {
    pub min_chars: Option<Spanned<i64>>,
    pub max_chars: Option<Spanned<i64>>,
    /// Most non-blank lines an answer may have: a count or a list that runs on past what the
    /// prompt asked for.
    pub max_lines: Option<Spanned<i64>>,
    pub expect: Option<Re>,
    pub forbid: Option<Re>,
    pub repetition: Option<Repetition>,
    pub stop_on_repetition: Option<Spanned<bool>>,
    pub allow_truncation: Option<bool>,
    pub json: Option<bool>,
    /// A JSON Schema file, relative to the agent file's folder.
    pub json_schema: Option<Spanned<String>>,
    /// The name of a tool from `tools:` that the run must end by calling.
    pub tool_call: Option<Spanned<String>>,
    /// A known-good answer the answer must stay close to.
    pub reference: Option<RawReference>,
}

/// `checks.reference: {file, min_similarity}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReference {
    /// The known-good answer's file, relative to the agent file's folder.
    pub file: Spanned<String>,
    pub min_similarity: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGate {
    pub samples: Option<Spanned<i64>>,
    pub max_samples: Option<Spanned<i64>>,
    pub slo: Option<BTreeMap<String, Spanned<Scalar>>>,
    pub vs_baseline: Option<BTreeMap<String, Spanned<Scalar>>>,
    pub inconclusive: Option<Inconclusive>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Inconclusive {
    #[default]
    Fail,
    Pass,
}

/// `schedule:`: a cron expression (or macro) compiled while parsing, or the descriptor
/// `@every 5m`, an interval.
#[derive(Debug, Clone)]
pub(crate) struct ScheduleSpec(pub Schedule);

impl<'de> Deserialize<'de> for ScheduleSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let text = s.trim();
        let interval = text
            .strip_prefix("@every")
            .filter(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace));
        if let Some(rest) = interval {
            return interval_of(rest.trim())
                .map(|every| {
                    ScheduleSpec(Schedule::Every {
                        every,
                        text: format!("@every {}", rest.trim()),
                    })
                })
                .map_err(|e| serde::de::Error::custom(format!("invalid schedule {s:?}: {e}")));
        }
        Cron::parse(&s)
            .map(|c| ScheduleSpec(Schedule::from(c)))
            .map_err(|e| serde::de::Error::custom(format!("invalid cron expression {s:?}: {e}")))
    }
}

/// `every:`: an interval, checked while parsing.
#[derive(Debug, Clone)]
pub(crate) struct EverySpec(pub Schedule);

impl<'de> Deserialize<'de> for EverySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        interval_of(&s)
            .map(|every| {
                EverySpec(Schedule::Every {
                    every,
                    text: s.trim().to_string(),
                })
            })
            .map_err(serde::de::Error::custom)
    }
}

fn interval_of(text: &str) -> Result<Every, String> {
    let d = super::duration::parse_duration(text)?;
    Every::new(d).map_err(|e| e.to_string())
}

/// A regex, compiled while parsing (size-limited, so a hostile pattern cannot eat memory).
#[derive(Debug, Clone)]
pub(crate) struct Re(pub Regex);

impl<'de> Deserialize<'de> for Re {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        regex::RegexBuilder::new(&s)
            .size_limit(1 << 20)
            .build()
            .map(Re)
            .map_err(|e| {
                let detail = e.to_string();
                let last = detail
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("invalid");
                serde::de::Error::custom(format!(
                    "invalid regex {s:?}: {}",
                    last.trim().trim_start_matches("error: ")
                ))
            })
    }
}

/// `repetition: default`, `repetition: off`, or a map of thresholds.
#[derive(Debug, Clone)]
pub(crate) enum Repetition {
    Default,
    Off,
    Custom(Thresholds),
}

impl<'de> Deserialize<'de> for Repetition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Repetition;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("`default`, `off` or a map of thresholds")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Repetition, E> {
                match v {
                    "default" => Ok(Repetition::Default),
                    "off" => Ok(Repetition::Off),
                    other => Err(E::custom(format!(
                        "expected `default`, `off` or a map of thresholds, found {other:?}"
                    ))),
                }
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Repetition, E> {
                // YAML 1.1 readers turn a bare `off` into false.
                Ok(if v {
                    Repetition::Default
                } else {
                    Repetition::Off
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Repetition, A::Error> {
                Thresholds::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(Repetition::Custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A YAML scalar read as text, whether written as a string or a number.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scalar(pub String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}
