//! The command line (docs/design.md's contract): run | once | gate | check | sim | demo |
//! calibrate | judge | report | watch | mcp | rules | status-page | record.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "llm-canary",
    version = env!("LLM_CANARY_VERSION"),
    about = "Black-box canary for LLM inference endpoints",
    propagate_version = true
)]
pub struct Cli {
    /// Log level for stderr (error, warn, info, debug, trace); RUST_LOG overrides it. Default:
    /// warn; `run` logs at info its start, a pair going down or coming back, reloads and
    /// shutdown (debug adds a line per run).
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The stderr log level: `--log-level`, else the command's default. A daemon started by
    /// hand says that it started and when a pair changes; its dependencies stay at warn.
    pub fn log_level(&self) -> &str {
        match (&self.log_level, &self.command) {
            (Some(level), _) => level,
            (None, Command::Run(_)) => "warn,llm_canary=info",
            (None, _) => "warn",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Daemon: fire every probe on its schedule, push, serve /metrics and /healthz.
    ///
    /// A failed (probe, target) pair is run again before its next scheduled run, as the probe's
    /// `confirm:` says (default `{runs: 2, after: 20s}`; `confirm: off` turns it off), so the
    /// alert rules page on a failure that is confirmed, at any cadence.
    Run(RunArgs),
    /// Run every (probe, target) once, now; exit 0 if all ok, 1 if some failed.
    ///
    /// Each pair runs once: a failed run is not confirmed (a probe's `confirm:` is the daemon's).
    Once(OnceArgs),
    /// Pre-release gate: sample a candidate (against a baseline) and decide; exit 0 pass, 1 fail.
    ///
    /// Every sample counts as it ran: a failed one is not confirmed (a probe's `confirm:` is the
    /// daemon's).
    Gate(GateArgs),
    /// Validate config, probes and prompts; print each probe's next fire times.
    Check(CheckArgs),
    /// The simulated OpenAI-compatible replica, for demos, fire drills and tests.
    Sim(SimArgs),
    /// Start `sim` in-process and run probes against a few of its scenarios.
    Demo,
    /// Probe a target while reading the server's own figures; print ours beside theirs.
    /// Exit 0 when they agree within the tolerance, 1 when not.
    Calibrate(CalibrateArgs),
    /// Summarise a results log (and its rotated files) per (probe, target).
    Report(ReportArgs),
    /// A live terminal view of every (probe, target) pair: state, last outcome, a TTFT
    /// sparkline over the last runs, decode speed. q, Esc or Ctrl-C quits.
    ///
    /// It runs the probes itself on their schedules, as `run` would, but pushes, serves and
    /// writes nothing, whatever the config says; with --from it follows a running daemon
    /// instead. It needs a terminal, and logs nothing (a log line would tear the view).
    Watch(WatchArgs),
    /// A Model Context Protocol server over stdio: list_targets, status, probe and report.
    Mcp(McpArgs),
    /// Write Prometheus recording rules and burn-rate alerts for every target's `slo:`.
    Rules(RulesArgs),
    /// Run a probe's checks on given text (a file, stdin, or JSON lines of `{"id", "text"}`)
    /// and print the verdict a run would give it; exit 0 if all ok, 1 if some failed.
    Judge(JudgeArgs),
    /// One status page for a fleet of agents, read from the store they write to: each target
    /// as seen from every location (the agents' `region` label), through Prometheus' HTTP API.
    ///
    /// It probes nothing: agents in each place probe and push or remote-write; this serves
    /// `GET /` (HTML), `GET /api/v1/fleet` (JSON) and `GET /healthz`.
    StatusPage(StatusPageArgs),

    /// Write each probe's `checks.reference` file from a target's answers at temperature 0,
    /// so other targets (a shadow replica, a release candidate) are held to this one's.
    /// Exit 0 when every reference was written, 1 when a run failed (its file is left as it
    /// was).
    Record(RecordArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// The agent's config file; probes/ and prompts/ beside it unless it names other folders.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// The target whose answers become the references (a healthy production replica).
    #[arg(long)]
    pub target: String,
    /// Only this probe (default: every probe of the target with a `checks.reference`).
    #[arg(long)]
    pub probe: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct McpArgs {
    /// The agent's config file; probes/ and prompts/ beside it unless it names other folders.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// A running daemon (http://agent:9464) whose /api/v1/status the `status` tool returns,
    /// instead of a fresh run of every pair.
    #[arg(long)]
    pub from: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// The agent's config file, whose probes it runs; probes/ and prompts/ beside it unless it
    /// names other folders.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// Follow a running daemon (http://agent:9464) instead: its /api/v1/status, read every 5 s.
    /// The config is not read then.
    #[arg(long, conflicts_with = "config")]
    pub from: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Table,
    Markdown,
    Json,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// The results log (agent.results_log); its rotated files (.1, .2, ...) are read too.
    pub log: PathBuf,
    /// Only runs that started within this long before now, e.g. 24h or 7d.
    #[arg(long, value_parser = wait_ready)]
    pub since: Option<Duration>,
    /// table, markdown (e.g. for $GITHUB_STEP_SUMMARY) or json.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RulesArgs {
    /// The agent's config file.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// Write the rules here instead of to stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct JudgeArgs {
    /// The agent's config file; probes/ and prompts/ beside it unless it names other folders.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// The probe whose checks judge the text.
    #[arg(long)]
    pub probe: String,
    /// The answer to judge, whole (default: stdin).
    #[arg(long, conflicts_with = "jsonl")]
    pub text_file: Option<PathBuf>,
    /// Answers to judge, one JSON object per line: `{"id": .., "text": .., "finish_reason": ..}`
    /// (`finish_reason` optional); one verdict per line, with its `id`. `-` reads them from
    /// stdin.
    #[arg(long)]
    pub jsonl: Option<PathBuf>,
    /// The finish reason the answer came with (`length` makes it truncated); default `stop`.
    #[arg(long, default_value = "stop")]
    pub finish_reason: String,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, Clone, clap::Args)]
pub struct CalibrateArgs {
    /// The agent's config file; probes/ and prompts/ beside it unless it names other folders.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// The target to calibrate (its `server:` must be vllm, sglang, llama-cpp or ollama).
    #[arg(long)]
    pub target: String,
    /// The probe to run (default: the first probe that runs against the target).
    #[arg(long)]
    pub probe: Option<String>,
    /// Samples, one at a time.
    #[arg(long, default_value_t = 10)]
    pub samples: u32,
    /// How far our TTFT may be from the server's after the round trip, e.g. 5%.
    #[arg(long, default_value = "5%", value_parser = percent)]
    pub tolerance: f64,
    /// Where the server's Prometheus metrics are (default: base_url without /v1, + /metrics).
    #[arg(long)]
    pub metrics_url: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// `5%` or `0.05`.
fn percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    };
    v.ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| format!("{text:?} is not a tolerance: write e.g. 5% or 0.05"))
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The agent's config file; probes/ and prompts/ beside it unless it names other folders.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// A Prometheus exporter-toolkit web config (TLS, basic auth, response headers) for the
    /// endpoints; wins over agent.web_config_file. See docs/security.md.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// The agent's config file; probes/ and prompts/ beside it unless it names other folders.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// Validate this exporter-toolkit web config (as `run --web.config.file` would read it)
    /// instead of agent.web_config_file.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// The address the sim listens on (host:port).
    #[arg(long, default_value = "127.0.0.1:8099")]
    pub listen: String,
    /// Serve over TLS with this certificate (PEM: the leaf, then its chain).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require a client certificate signed by this CA (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct OnceArgs {
    /// The agent's config file; probes/ and prompts/ beside it unless it names other folders.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// Only this probe (repeatable).
    #[arg(long = "probe")]
    pub probes: Vec<String>,
    /// Only this target (repeatable).
    #[arg(long = "target")]
    pub targets: Vec<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Push the results once to the configured Pushgateway.
    #[arg(long)]
    pub push: bool,
    /// Include the generated text in JSON results.
    #[arg(long)]
    pub show_output: bool,
    /// Probe runs in flight at once (default: agent.concurrency).
    #[arg(long)]
    pub concurrency: Option<usize>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct GateArgs {
    /// The agent's config file; probes/ and prompts/ beside it unless it names other folders.
    #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
    pub config: PathBuf,
    /// The candidate target.
    #[arg(long)]
    pub target: String,
    /// A baseline target sampled in the same run, interleaved with the candidate.
    #[arg(long, conflicts_with = "baseline")]
    pub baseline_target: Option<String>,
    /// A previous gate's JSON (--format json) as the baseline.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Refuse to run (exit 2) when a probe has vs_baseline limits and no baseline is given;
    /// without it they are reported as skipped.
    #[arg(long)]
    pub require_baseline: bool,
    /// A fixed number of samples per probe and side, judged once with bootstrap intervals
    /// (default: sequential, or the probe's gate.samples where it sets one).
    #[arg(long, conflicts_with = "max_samples", value_parser = clap::value_parser!(u32).range(1..))]
    pub samples: Option<u32>,
    /// Sequential sampling (the default): pairs in batches of 10 until every limit is decided,
    /// at most this many per probe and side; a limit still open then is inconclusive
    /// (default: the probe's gate.max_samples, else 200). See docs/gate-statistics.md.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_samples: Option<u32>,
    /// Sequential sampling goes on after a limit has failed, until every limit is decided or
    /// the cap, for a complete report (by default it stops at the look where a limit fails:
    /// the gate has failed by then).
    #[arg(long)]
    pub keep_sampling: bool,
    /// Uncounted runs per probe and side before sampling.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Only this probe (repeatable; default: every probe with a gate: section).
    #[arg(long = "probe")]
    pub probes: Vec<String>,
    /// Runs in flight at once (default 2: one candidate and one baseline run).
    #[arg(long, default_value_t = 2)]
    pub concurrency: usize,
    /// Before sampling, poll the candidate until its first successful generation (e.g. 5m).
    #[arg(long, value_parser = wait_ready)]
    pub wait_ready: Option<Duration>,
    /// Write a JUnit XML report here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long)]
    pub summary: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, Clone, clap::Args)]
pub struct StatusPageArgs {
    /// The Prometheus-compatible store the agents write to (Prometheus, VictoriaMetrics, Thanos
    /// Query, Mimir's Prometheus API prefix): its `/api/v1/query` is read.
    #[arg(long)]
    pub prometheus: String,
    /// The CA bundle that verifies the store's certificate, in place of the system's roots.
    #[arg(long, value_name = "FILE")]
    pub prometheus_ca_file: Option<PathBuf>,
    /// A client certificate (PEM) for a store that asks for one; read again when it changes.
    #[arg(long, value_name = "FILE")]
    pub prometheus_cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub prometheus_key_file: Option<PathBuf>,
    /// The name the store's certificate is verified against, in place of the URL's host.
    #[arg(long, value_name = "NAME")]
    pub prometheus_server_name: Option<String>,
    /// Do not verify the store's certificate (anyone on the path can read and change answers).
    #[arg(long)]
    pub prometheus_insecure_skip_verify: bool,
    /// An http:// proxy to reach the store through (in place of HTTPS_PROXY and HTTP_PROXY).
    #[arg(long, value_name = "URL")]
    pub prometheus_proxy_url: Option<String>,
    /// The address the page listens on (host:port).
    #[arg(long, default_value = "127.0.0.1:9466")]
    pub listen: String,
    /// How long one PromQL query may take (sent to the store as its `timeout` too).
    #[arg(long, default_value = "10s", value_parser = wait_ready)]
    pub query_timeout: Duration,
    /// A Prometheus exporter-toolkit web config (TLS, basic auth, response headers) for the
    /// page. See docs/security.md.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
}

/// `--wait-ready` and `--since` in the config files' duration syntax.
fn wait_ready(text: &str) -> Result<Duration, String> {
    crate::config::duration::parse_duration(text)
}
