//! The loaded config: the agent's own settings, its outputs, its targets and probes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::auth::PushAuth;
use super::maintenance::MaintenanceWindow;
use super::otlp::OtlpSettings;
use super::price::Budget;
use super::probe::Probe;
use super::remote_write::RemoteWriteSettings;
use super::target::Target;
use crate::secret::Secret;

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
    /// The SQLite database that keeps the status page's history across restarts
    /// (`status.store`, relative to the config file).
    pub status_store: Option<PathBuf>,
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
    /// The exporter-toolkit web config (TLS, basic auth, headers) for the endpoints
    /// (`agent.web_config_file`, relative to the config file); `--web.config.file` wins.
    pub web_config_file: Option<PathBuf>,
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
pub struct Push {
    pub url: String,
    pub job: String,
    pub min_interval: Duration,
    pub delete_on_shutdown: bool,
    pub timeout: Duration,
    pub auth: Option<PushAuth>,
    /// Its `tls:` block and proxy.
    pub outbound: crate::tls::client::Outbound,
}

/// Where a `tls:` block sits: a target (by name) or an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TlsHolder {
    Target(String),
    /// `push`, `remote_write` or `otlp`.
    Sink(&'static str),
}

impl std::fmt::Display for TlsHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsHolder::Target(name) => write!(f, "target {name:?}"),
            TlsHolder::Sink(sink) => f.write_str(sink),
        }
    }
}

impl Config {
    /// Every target and output with a `tls:` block, and whether it skips verifying the
    /// server's certificate.
    pub(crate) fn tls_blocks(&self) -> Vec<(TlsHolder, bool)> {
        let targets = self
            .targets
            .iter()
            .map(|t| (TlsHolder::Target(t.name.clone()), &t.outbound));
        let sinks = [
            ("push", self.push.as_ref().map(|p| &p.outbound)),
            (
                "remote_write",
                self.remote_write.as_ref().map(|r| &r.outbound),
            ),
            ("otlp", self.otlp.as_ref().map(|o| &o.outbound)),
        ]
        .into_iter()
        .filter_map(|(sink, o)| Some((TlsHolder::Sink(sink), o?)));
        targets
            .chain(sinks)
            .filter(|(_, o)| o.tls.is_some())
            .map(|(h, o)| (h, o.insecure()))
            .collect()
    }

    /// The targets and outputs that do not verify the server's certificate, as `check` and
    /// the log name them.
    pub(crate) fn insecure_tls_warnings(&self) -> Vec<String> {
        self.tls_blocks()
            .into_iter()
            .filter(|(_, insecure)| *insecure)
            .map(|(holder, _)| {
                format!("{holder}: tls.insecure_skip_verify is on: the server's certificate is not verified, so anyone on the path can read and change what is sent")
            })
            .collect()
    }
}
