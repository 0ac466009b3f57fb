//! Configuration: `llm-canary.yaml` (agent, push, targets), `probes/*.yaml` and `prompts/*`.
//! Parsed strictly (unknown keys are errors) and validated at load: cron, regexes and limits
//! are compiled once, cross-references resolved, secrets read. Any error is one
//! [`ConfigError`] naming file, line, column and field.

mod auth;
mod aws;
mod cache_check;
mod confirm;
pub mod duration;
pub mod env;
pub mod error;
pub mod gate;
pub mod ladder;
mod locate;
mod maintenance;
mod otlp;
mod price;
mod probe;
mod probe_files;
pub mod raw;
mod remote_write;
mod select;
pub mod slo;
mod target;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_saphyr::{Location, Spanned};

pub use aws::AwsAuth;
pub use cache_check::CacheCheck;
pub use confirm::Confirm;
pub use error::{ConfigError, FieldPath};
pub use ladder::Ladder;
pub use maintenance::MaintenanceWindow;
pub use otlp::{OtlpSettings, Temporality};
pub use price::{Budget, Price};
pub use probe::{GateSpec, Probe, Prompt, Timeouts};
pub use raw::{Api, CacheBust, CacheBustValue, Inconclusive, Message, Role, ServerKind};
pub use remote_write::RemoteWriteSettings;
pub use select::{in_shard, Pair, Selection, UnknownName};
pub use slo::{LatencyObjective, Slo, SloFigure};
pub use target::Target;

use crate::secret::Secret;

/// Label names the agent sets itself, or that a metric carries of its own (a histogram's `le`,
/// a summary's `quantile`, a ladder's `rung`, `target_info`'s, `build_info`'s, the remote-write drops' and the OTLP queues'); static
/// labels may not take them: a series with a label twice is refused by Prometheus and by every
/// remote-write store.
pub const RESERVED_LABELS: [&str; 14] = [
    "probe",
    "target",
    "model",
    "outcome",
    "instance",
    "job",
    "le",
    "quantile",
    "reported_model",
    "fingerprint",
    "version",
    "reason",
    "signal",
    "rung",
];

#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    pub agent: AgentSettings,
    pub push: Option<Push>,
    pub remote_write: Option<RemoteWriteSettings>,
    pub otlp: Option<OtlpSettings>,
    pub targets: Vec<Arc<Target>>,
    pub probes: Vec<Arc<Probe>>,
    /// Recurring maintenance windows (`maintenance:`).
    pub maintenance: Vec<MaintenanceWindow>,
    /// How long incidents and daily rollups are kept (`status.history`, 1 to 90 days).
    pub status_history: Duration,
    /// Things that load but deserve a word in `check` (e.g. a cache that cannot be defeated).
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub concurrency: usize,
    pub listen: Option<SocketAddr>,
    pub results_log: Option<ResultsLogSettings>,
    pub shutdown_grace: Duration,
    pub shard: Option<(u32, u32)>,
    /// The bearer token `POST /-/reload` and `/-/maintenance` require (unless the listener
    /// is loopback-only).
    pub admin_token: Option<Secret>,
    /// What probing may cost (`budget:`), checked as runs are counted.
    pub budget: Option<Budget>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultsLogSettings {
    pub path: PathBuf,
    pub max_bytes: u64,
    pub keep: u32,
}

#[derive(Debug, Clone)]
pub enum PushAuth {
    Basic { username: String, password: Secret },
    Bearer(Secret),
}

#[derive(Debug, Clone)]
pub struct Push {
    pub url: String,
    pub job: String,
    pub min_interval: Duration,
    pub delete_on_shutdown: bool,
    pub timeout: Duration,
    pub auth: Option<PushAuth>,
}

/// A file being loaded: its path and text, to turn positions into errors.
pub(crate) struct Source<'a> {
    pub path: &'a Path,
    pub text: &'a str,
}

impl Source<'_> {
    pub fn err(&self, field: &FieldPath, loc: Location, message: impl Into<String>) -> ConfigError {
        ConfigError::at(self.path, field, loc, message)
    }

    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, ConfigError> {
        let has_content = self
            .text
            .lines()
            .map(str::trim)
            .any(|l| !l.is_empty() && !l.starts_with('#') && l != "---");
        if !has_content {
            return Err(ConfigError::file(self.path, "the file is empty"));
        }
        let options = serde_saphyr::options! { with_snippet: false };
        serde_saphyr::with_deserializer_from_str_with_options(self.text, options, |de| {
            T::deserialize(de)
        })
        .map_err(|e| ConfigError::from_yaml(self.path, self.text, &e))
    }
}

pub(crate) fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError::file(path, format!("cannot read the file: {}", io_reason(&e))))
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Prometheus label names: `[a-zA-Z_][a-zA-Z0-9_]*`, not reserved, not `__`-prefixed.
fn check_labels(
    src: &Source,
    field: &FieldPath,
    labels: &Spanned<BTreeMap<String, String>>,
) -> Result<(), ConfigError> {
    for k in labels.value.keys() {
        let valid = k
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid || k.starts_with("__") {
            return Err(src.err(
                field,
                labels.referenced,
                format!("{k:?} is not a valid Prometheus label name"),
            ));
        }
        if RESERVED_LABELS.contains(&k.as_str()) {
            return Err(src.err(
                field,
                labels.referenced,
                format!("label {k:?} is set by the agent itself"),
            ));
        }
    }
    Ok(())
}

/// Target names as listed at `field` (a probe's or a window's `targets`): each must exist;
/// repeats are dropped.
fn target_names(
    src: &Source,
    field: &FieldPath,
    list: &[Spanned<String>],
    targets: &[Arc<Target>],
) -> Result<Vec<String>, ConfigError> {
    let mut names: Vec<String> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        if !targets.iter().any(|x| x.name == t.value) {
            return Err(src.err(
                &field.index(i),
                t.referenced,
                crate::util::unknown_name(
                    "target",
                    &t.value,
                    targets.iter().map(|x| x.name.as_str()),
                ),
            ));
        }
        if !names.contains(&t.value) {
            names.push(t.value.clone());
        }
    }
    Ok(names)
}

/// A `timezone:` value (UTC when absent).
fn time_zone(
    src: &Source,
    field: &FieldPath,
    tz: Option<&Spanned<String>>,
) -> Result<jiff::tz::TimeZone, ConfigError> {
    let Some(tz) = tz else {
        return Ok(jiff::tz::TimeZone::UTC);
    };
    jiff::tz::TimeZone::get(&tz.value).map_err(|_| {
        src.err(
            field,
            tz.referenced,
            format!("unknown time zone {:?}", tz.value),
        )
    })
}

/// `status.history`'s bounds: the daily rollups hold 90 days.
const STATUS_HISTORY_MIN: Duration = Duration::from_secs(86_400);
const STATUS_HISTORY_MAX: Duration = Duration::from_secs(90 * 86_400);

/// Target and probe names become label values: keep them short and plain.
fn check_name(
    src: &Source,
    field: &FieldPath,
    name: &Spanned<String>,
    what: &str,
) -> Result<(), ConfigError> {
    let n = &name.value;
    if n.is_empty()
        || n.len() > 64
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    {
        return Err(src.err(
            field,
            name.referenced,
            format!("{what} name {n:?} must be 1-64 characters of letters, digits, '-', '_', '.' or ':'"),
        ));
    }
    Ok(())
}

/// A whole number from 1 to `max`, the value of `key` in the mapping at `parent`.
fn positive(
    src: &Source,
    parent: &FieldPath,
    key: &str,
    v: &Spanned<i64>,
    max: i64,
) -> Result<i64, ConfigError> {
    if v.value < 1 || v.value > max {
        return Err(src.err(
            &parent.key(key),
            v.referenced,
            format!("{key} must be between 1 and {max}, found {}", v.value),
        ));
    }
    Ok(v.value)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "llm-canary".into())
}

/// Loads and validates everything the agent file points at.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = read(path)?;
    let src = Source { path, text: &text };
    let mut raw: raw::RawMain = src.parse()?;
    let raw_budget = raw.agent.budget.take();
    let base = path.parent().unwrap_or(Path::new("."));
    let mut warnings = Vec::new();

    let root = FieldPath::root();
    let mut agent = load_agent(&src, &root.key("agent"), raw.agent, base)?;
    let push = raw
        .push
        .map(|p| load_push(&src, &root.key("push"), p, base))
        .transpose()?;
    let remote_write = raw
        .remote_write
        .map(|r| remote_write::load(&src, &root.key("remote_write"), r, base))
        .transpose()?;
    let otlp = raw
        .otlp
        .map(|o| otlp::load(&src, &root.key("otlp"), o, base))
        .transpose()?;

    let at = root.key("targets");
    if raw.targets.value.is_empty() {
        return Err(src.err(
            &at,
            raw.targets.referenced,
            "at least one target is required",
        ));
    }
    let mut targets: Vec<Arc<Target>> = Vec::new();
    for (i, t) in raw.targets.value.into_iter().enumerate() {
        let at = at.index(i);
        if targets.iter().any(|o| o.name == t.name.value) {
            return Err(src.err(
                &at.key("name"),
                t.name.referenced,
                format!("duplicate target name {:?}", t.name.value),
            ));
        }
        targets.push(Arc::new(target::load_target(
            &src,
            &at,
            t,
            base,
            &agent.labels,
        )?));
    }

    let dir = |d: Option<String>, default: &str| base.join(d.unwrap_or_else(|| default.into()));
    let probes_dir = dir(raw.probes_dir, "probes");
    let prompts_dir = dir(raw.prompts_dir, "prompts");
    agent.budget = raw_budget
        .map(|b| price::load_budget(&src, &root.key("agent").key("budget"), b, &targets))
        .transpose()?;
    let probes = probe::load_all(&probes_dir, &prompts_dir, base, &targets, &mut warnings)?;
    if probes.is_empty() {
        return Err(ConfigError::file(
            &probes_dir,
            "no probe files (*.yaml) found",
        ));
    }
    let maintenance = maintenance::load(
        &src,
        &root.key("maintenance"),
        raw.maintenance.unwrap_or_default(),
        &targets,
    )?;
    let status_history = match raw.status.and_then(|s| s.history) {
        Some(h) if h.value.0 < STATUS_HISTORY_MIN || h.value.0 > STATUS_HISTORY_MAX => {
            return Err(src.err(
                &root.key("status").key("history"),
                h.referenced,
                "history must be between 1d and 90d",
            ))
        }
        Some(h) => h.value.0,
        None => STATUS_HISTORY_MAX,
    };
    Ok(Config {
        path: path.to_path_buf(),
        agent,
        push,
        remote_write,
        otlp,
        targets,
        probes,
        maintenance,
        status_history,
        warnings,
    })
}

fn load_agent(
    src: &Source,
    at: &FieldPath,
    a: raw::RawAgent,
    base: &Path,
) -> Result<AgentSettings, ConfigError> {
    let mut labels = BTreeMap::new();
    if let Some(l) = a.labels {
        check_labels(src, &at.key("labels"), &l)?;
        for (k, v) in l.value {
            let v = env::expand(src, &at.key("labels").key(&k), l.referenced, &v)?;
            labels.insert(k, v);
        }
    }
    let name = match a.name {
        Some(mut n) => {
            n.value = env::expand(src, &at.key("name"), n.referenced, &n.value)?;
            check_name(src, &at.key("name"), &n, "agent")?;
            n.value
        }
        None => hostname(),
    };
    let concurrency = match a.concurrency {
        Some(c) => positive(src, at, "concurrency", &c, 4096)? as usize,
        None => 8,
    };
    let listen = match a.listen {
        Some(l) => Some(l.value.parse::<SocketAddr>().map_err(|_| {
            src.err(
                &at.key("listen"),
                l.referenced,
                format!("{:?} is not an address like 0.0.0.0:9464", l.value),
            )
        })?),
        None => None,
    };
    let shard = match a.shard {
        Some(s) => Some(shard(src, &at.key("shard"), s)?),
        None => None,
    };
    let results_log = match a.results_log {
        Some(p) => Some(ResultsLogSettings {
            path: base.join(p),
            max_bytes: match &a.results_log_max_bytes {
                Some(v) => positive(src, at, "results_log_max_bytes", v, i64::MAX)? as u64,
                None => 10 << 20,
            },
            keep: match &a.results_log_keep {
                Some(v) => positive(src, at, "results_log_keep", v, 1000)? as u32,
                None => 5,
            },
        }),
        None => None,
    };
    Ok(AgentSettings {
        name,
        labels,
        concurrency,
        listen,
        results_log,
        shutdown_grace: a.shutdown_grace.map_or(Duration::from_secs(10), |d| d.0),
        shard,
        admin_token: read_secret(
            src,
            at,
            a.admin_token_env,
            a.admin_token_file,
            base,
            "admin_token",
        )?,
        budget: None,
    })
}

/// `agent.shard`: `i/N`, this agent's share of the pairs.
fn shard(
    src: &Source,
    field: &FieldPath,
    mut s: Spanned<String>,
) -> Result<(u32, u32), ConfigError> {
    s.value = env::expand(src, field, s.referenced, &s.value)?;
    s.value
        .split_once('/')
        .and_then(|(i, n)| Some((i.trim().parse::<u32>().ok()?, n.trim().parse::<u32>().ok()?)))
        .filter(|&(i, n)| i >= 1 && i <= n)
        .ok_or_else(|| {
            src.err(
                field,
                s.referenced,
                format!("shard {:?} must be i/N with 1 <= i <= N", s.value),
            )
        })
}

/// A secret from an environment variable or a file (relative to the config file).
/// `what` names the pair of keys, `{what}_env` and `{what}_file`, of the mapping at `at`.
fn read_secret(
    src: &Source,
    at: &FieldPath,
    env: Option<Spanned<String>>,
    file: Option<Spanned<String>>,
    base: &Path,
    what: &str,
) -> Result<Option<Secret>, ConfigError> {
    let env_field = at.key(&format!("{what}_env"));
    let file_field = at.key(&format!("{what}_file"));
    match (env, file) {
        (Some(_), Some(f)) => Err(src.err(
            &file_field,
            f.referenced,
            format!("set {what}_env or {what}_file, not both"),
        )),
        (Some(env), None) => match std::env::var(&env.value) {
            Ok(v) if !v.trim().is_empty() => Ok(Some(Secret::new(v.trim().to_string()))),
            _ => Err(src.err(
                &env_field,
                env.referenced,
                format!("environment variable {} is not set", env.value),
            )),
        },
        (None, Some(file)) => {
            let written = crate::secret::credential_path(&file.value)
                .map_err(|e| src.err(&file_field, file.referenced, e))?;
            let p = base.join(written.as_ref());
            match std::fs::read_to_string(&p) {
                Ok(v) if !v.trim().is_empty() => Ok(Some(Secret::new(v.trim().to_string()))),
                Ok(_) => Err(src.err(
                    &file_field,
                    file.referenced,
                    format!("{what} file {} is empty", p.display()),
                )),
                Err(e) => Err(src.err(
                    &file_field,
                    file.referenced,
                    format!("cannot read {what} file {}: {}", p.display(), io_reason(&e)),
                )),
            }
        }
        (None, None) => Ok(None),
    }
}

fn load_push(
    src: &Source,
    at: &FieldPath,
    p: raw::RawPush,
    base: &Path,
) -> Result<Push, ConfigError> {
    let url = auth::url(src, at, &p.url, "push")?;
    let keys = auth::auth_keys!(p);
    let auth = auth::load(
        src,
        at,
        keys,
        base,
        "push",
        (at.key("url"), p.url.referenced),
    )?;

    let job = auth::job(src, at, p.job)?;
    Ok(Push {
        url,
        job,
        min_interval: p.min_interval.map_or(Duration::from_secs(5), |d| d.0),
        delete_on_shutdown: p.delete_on_shutdown.unwrap_or(false),
        timeout: p.timeout.map_or(Duration::from_secs(10), |d| d.0),
        auth,
    })
}

/// Parses `text` as an agent file and as a probe file and returns the errors as they would be
/// printed (for the fuzzer: the parser and the error positions must never panic).
#[doc(hidden)]
pub fn check_yaml(text: &str) -> Vec<String> {
    let path = Path::new("fuzz.yaml");
    let src = Source { path, text };
    let mut out = Vec::new();
    if let Err(e) = src.parse::<raw::RawMain>() {
        out.push(e.to_string());
    }
    if let Err(e) = src.parse::<raw::RawProbe>() {
        out.push(e.to_string());
    }
    if let Err(e) = src.parse::<Vec<raw::RawProbe>>() {
        out.push(e.to_string());
    }
    out
}
