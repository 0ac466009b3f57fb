//! Configuration: `llm-canary.yaml` (agent, push, targets), `probes/*.yaml` and `prompts/*`.
//! Parsed strictly (unknown keys are errors) and validated at load: cron, regexes and limits
//! are compiled once, cross-references resolved, secrets read. Any error is one
//! [`ConfigError`] naming file, line, column and field.

mod auth;
mod aws;
mod azure;
mod cache_check;
mod confirm;
pub(crate) mod duration;
pub(crate) mod env;
pub(crate) mod error;
mod field;
pub(crate) mod gate;
pub(crate) mod ladder;
mod locate;
mod maintenance;
mod names;
mod otlp;
mod price;
mod priority;
mod probe;
mod probe_files;
mod prompt;
pub(crate) mod raw;
mod remote_write;
mod select;
mod settings;
pub(crate) mod slo;
mod source;
mod target;
mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_saphyr::Spanned;

pub(crate) use auth::PushAuth;
pub(crate) use aws::AwsAuth;
pub(crate) use cache_check::CacheCheck;
pub(crate) use confirm::Confirm;
pub(crate) use error::ConfigError;
pub(crate) use field::FieldPath;
pub(crate) use ladder::Ladder;
pub(crate) use maintenance::MaintenanceWindow;
use names::{check_labels, check_name};
pub(crate) use otlp::{OtlpSettings, Temporality};
pub(crate) use price::{Budget, Price};
pub(crate) use priority::Priority;
#[cfg(test)]
pub(crate) use probe::GateSpec;
pub(crate) use probe::{Probe, Timeouts};
pub(crate) use prompt::Prompt;
// Reached from outside through `testing`.
pub use raw::CacheBust;
pub(crate) use raw::{Api, CacheBustValue, Inconclusive, Message, Role, ServerKind};
pub(crate) use remote_write::RemoteWriteSettings;
pub(crate) use select::{Pair, Selection, UnknownName};
pub use settings::Config;
pub(crate) use settings::{AgentSettings, Push, ResultsLogSettings, TlsHolder};
pub(crate) use slo::{LatencyObjective, Slo};
pub(crate) use source::read;
pub(crate) use source::Source;
use source::{positive, read_secret, time_zone};
use target::target_names;
pub(crate) use target::Target;

/// `status.history`'s bounds: the daily rollups hold 90 days.
const STATUS_HISTORY_MIN: Duration = Duration::from_secs(86_400);
const STATUS_HISTORY_MAX: Duration = Duration::from_secs(90 * 86_400);

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
    load_with(path, false)
}

/// [`load`] for `record`: a `checks.reference` file not written yet is no error (its text is
/// `None`), since `record` is what writes it.
pub(crate) fn load_unrecorded(path: &Path) -> Result<Config, ConfigError> {
    load_with(path, true)
}

fn load_with(path: &Path, unrecorded_ok: bool) -> Result<Config, ConfigError> {
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

    let targets = load_targets(&src, &root.key("targets"), raw.targets, base, &agent.labels)?;

    let dir = |d: Option<String>, default: &str| base.join(d.unwrap_or_else(|| default.into()));
    let probes_dir = dir(raw.probes_dir, "probes");
    let prompts_dir = dir(raw.prompts_dir, "prompts");
    agent.budget = raw_budget
        .map(|b| {
            let prices: Vec<&Price> = targets.iter().filter_map(|t| t.price.as_ref()).collect();
            price::load_budget(&src, &root.key("agent").key("budget"), b, &prices)
        })
        .transpose()?;
    let probes = probe::load_all(
        &probes_dir,
        &prompts_dir,
        base,
        &targets,
        unrecorded_ok,
        &mut warnings,
    )?;
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
    let (status_history, status_store) = load_status(&src, &root.key("status"), raw.status, base)?;
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
        status_store,
        warnings,
    })
}

/// `targets:`: at least one, each name once.
fn load_targets(
    src: &Source,
    at: &FieldPath,
    raw: Spanned<Vec<raw::RawTarget>>,
    base: &Path,
    agent_labels: &BTreeMap<String, String>,
) -> Result<Vec<Arc<Target>>, ConfigError> {
    if raw.value.is_empty() {
        return Err(src.err(at, raw.referenced, "at least one target is required"));
    }
    let mut targets: Vec<Arc<Target>> = Vec::new();
    for (i, t) in raw.value.into_iter().enumerate() {
        let at = at.index(i);
        if targets.iter().any(|o| o.name == t.name.value) {
            return Err(src.err(
                &at.key("name"),
                t.name.referenced,
                format!("duplicate target name {:?}", t.name.value),
            ));
        }
        targets.push(Arc::new(target::load_target(
            src,
            &at,
            t,
            base,
            agent_labels,
        )?));
    }
    Ok(targets)
}

/// `status:`: how long the status page remembers (1 to 90 days, 90 unless written), and the
/// store it keeps it in, relative to the agent file's folder.
fn load_status(
    src: &Source,
    at: &FieldPath,
    raw: Option<raw::RawStatus>,
    base: &Path,
) -> Result<(Duration, Option<PathBuf>), ConfigError> {
    let (history, store) = match raw {
        Some(s) => (s.history, s.store),
        None => (None, None),
    };
    let store = store.map(|p| base.join(p));
    let history = match history {
        Some(h) if h.value.0 < STATUS_HISTORY_MIN || h.value.0 > STATUS_HISTORY_MAX => {
            return Err(src.err(
                &at.key("history"),
                h.referenced,
                "history must be between 1d and 90d",
            ))
        }
        Some(h) => h.value.0,
        None => STATUS_HISTORY_MAX,
    };
    Ok((history, store))
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
        web_config_file: a.web_config_file.map(|f| base.join(f)),
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
    let outbound = tls::load_outbound(src, at, tls::outbound_keys!(p), base)?;
    Ok(Push {
        url,
        job,
        min_interval: p.min_interval.map_or(Duration::from_secs(5), |d| d.0),
        delete_on_shutdown: p.delete_on_shutdown.unwrap_or(false),
        timeout: p.timeout.map_or(Duration::from_secs(10), |d| d.0),
        auth,
        outbound,
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
