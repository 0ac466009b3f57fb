//! The simulated OpenAI-compatible replica (`llm-canary sim`): chat and completions, streaming
//! and not, `/v1/models`, `/health`, with a scenario per request (see [`scenarios`]). It keeps a
//! prefix cache (keyed on prompt and `cache_salt`, bypassed by `cache_prompt: false`) and an
//! HTTP response cache (bypassed by `Cache-Control: no-cache`), so cache busting can be proven,
//! and it records every request and the instant of its first content write, so tests can check
//! what arrived and how exactly the agent measured it.
//!
//! - this file: the running sim, what it remembers, and `llm-canary sim`;
//! - [`serve`]: a connection's requests, a router and one function per route, the request log;
//! - `cache`: the HTTP and prefix caches a canary must defeat;
//! - `generate`: the answer each scenario gives; `respond`: how it is written, by a plan
//!   chosen before the first byte, and its faults;
//! - `wire`: each API flavor as the sim speaks it, one file each behind one trait (what its
//!   request asks, its door, its framing, its events, errors and refusals), and the one
//!   registry from a request's route to its flavor; `piece`: what an answer is made of,
//!   whatever flavor frames it;
//! - [`http`]: the sim's own deliberately misbehaving HTTP writer, over a connection plain or
//!   TLS ([`conn`]; `tls`: the certificate, key and client CA `sim --tls-cert` names);
//! - `queue`: a busy server's slots (`slots=N`), waited for in vLLM's priority order;
//! - [`credentials`]: stand-ins for where clouds hand credentials out (IMDSv2, container
//!   credentials, STS web identity, Entra ID), issuing short-lived ones the doors check;
//! - [`scenarios`] and `answers`: what can go wrong, and the texts.

mod answers;
mod cache;
pub mod conn;
pub mod credentials;
mod generate;
pub mod http;
mod metrics;
mod piece;
mod queue;
mod respond;
pub mod scenarios;
mod serve;
mod state;
mod tls;
mod wire;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use self::scenarios::CATALOG;
use crate::listener::{Door, Limits};
pub use state::Seen;
use state::State;
pub use wire::bedrock;

/// Connections open at most: far above what a test or a soak keeps in flight, low enough that a
/// leak shows as refusals rather than as the test process running out of descriptors.
const MAX_CONNECTIONS: usize = 512;

/// A running simulated replica; stops when dropped.
pub struct Sim {
    addr: SocketAddr,
    /// It serves over TLS: its URLs are `https://`.
    https: bool,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sim {
    /// Binds `listen` (use `127.0.0.1:0` for a free port) and serves in the background.
    pub async fn start(listen: &str) -> std::io::Result<Sim> {
        Sim::listen(listen, None).await
    }

    /// As [`Sim::start`], over TLS with `cert` and `key` (PEM files); with `client_ca`, a
    /// client certificate signed by it is required.
    pub async fn start_tls(
        listen: &str,
        cert: &std::path::Path,
        key: &std::path::Path,
        client_ca: Option<&std::path::Path>,
    ) -> std::io::Result<Sim> {
        let config = tls::server_config(cert, key, client_ca)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        Sim::listen(listen, Some(tokio_rustls::TlsAcceptor::from(config))).await
    }

    async fn listen(listen: &str, tls: Option<tokio_rustls::TlsAcceptor>) -> std::io::Result<Sim> {
        let limits = Limits {
            // The sim falls silent on purpose (`no-headers`): its silence watch must outlast that.
            idle_timeout: respond::HOLD + Duration::from_secs(10),
            ..Limits::with_cap(MAX_CONNECTIONS)
        };
        let door = Door::new(TcpListener::bind(listen).await?, limits);
        let addr = door.local_addr()?;
        let state = Arc::new(State::default());
        let https = tls.is_some();
        let task = tokio::spawn(serve::serve(door, state.clone(), tls));
        Ok(Sim {
            addr,
            https,
            state,
            task,
        })
    }

    /// The sim on a runtime of its own with one worker thread, so what is being measured
    /// (benchmarks, the chaos suite) shares no scheduler with it. The sim serves as long as the
    /// returned runtime lives.
    pub fn start_apart() -> std::io::Result<(tokio::runtime::Runtime, Sim)> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let sim = rt.block_on(Sim::start("127.0.0.1:0"))?;
        Ok((rt, sim))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL (ending in `/v1`) that selects `scenario`.
    pub fn base_url(&self, scenario: &str) -> String {
        format!("{}/s/{scenario}/v1", self.origin())
    }

    /// `http://host:port`, or `https://` over TLS.
    pub fn origin(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Every request seen so far, oldest first.
    pub fn seen(&self) -> Vec<Seen> {
        self.state
            .seen
            .lock()
            .expect("sim state lock")
            .iter()
            .cloned()
            .collect()
    }

    /// How long request `request_id` waited for a slot of a `slots=` scenario, in ms.
    pub fn queue_wait_ms(&self, request_id: &str) -> Option<f64> {
        let timings = self.state.timings.lock().expect("sim state lock");
        let t = timings.get(request_id)?;
        t.ms(t.slot)
    }

    /// When request `request_id` got its slot of a `slots=` scenario (its service began).
    pub fn served_at(&self, request_id: &str) -> Option<Instant> {
        let timings = self.state.timings.lock().expect("sim state lock");
        timings.get(request_id)?.slot
    }

    /// How many requests of scenario `spec` (as written in the path) wait for a slot now.
    pub fn waiting(&self, spec: &str) -> usize {
        self.state.queues.waiting(spec)
    }

    /// The `Authorization` header of each request to the container-credentials stand-in (EKS
    /// Pod Identity sends its token there; ECS sends none).
    pub fn container_authorizations(&self) -> Vec<Option<String>> {
        self.state.issued.container_authorizations()
    }

    /// Every secret the credential stand-ins issued so far, for a test to look for where none
    /// may appear.
    pub fn issued_secrets(&self) -> Vec<String> {
        self.state.issued.secrets()
    }

    /// How much later the agent saw a run's first content than the sim wrote it, in ms
    /// (signed: a negative error would mean a wrong clock or stamp). `None` without both.
    pub fn first_token_error_ms(&self, r: &crate::result::ProbeResult) -> Option<f64> {
        let agent = r.measured.reading.timeline.first_content()?;
        let server = self.first_content_write(&r.id.request_id)?;
        Some(if agent >= server {
            (agent - server).as_secs_f64() * 1000.0
        } else {
            -(server - agent).as_secs_f64() * 1000.0
        })
    }

    /// When the first content chunk for this `X-Request-Id` was handed to the kernel.
    pub fn first_content_write(&self, request_id: &str) -> Option<Instant> {
        self.state
            .timings
            .lock()
            .expect("sim state lock")
            .get(request_id)
            .and_then(|t| t.first_content)
    }

    /// Whether the client went away from request `request_id` before its answer was written
    /// to the end (a prober that stopped reading, say). Known once a write failed.
    pub fn abandoned(&self, request_id: &str) -> bool {
        self.state
            .timings
            .lock()
            .expect("sim state lock")
            .get(request_id)
            .is_some_and(|t| t.abandoned)
    }
}

/// The TLS `sim` serves with: certificate, key, and the CA client certificates must be signed
/// by, if any.
pub(crate) struct TlsFiles<'a> {
    pub cert: &'a std::path::Path,
    pub key: &'a std::path::Path,
    pub client_ca: Option<&'a std::path::Path>,
}

/// `llm-canary sim`: serve until Ctrl-C / SIGTERM, then exit 0.
pub(crate) async fn serve_forever(
    listen: &str,
    tls: Option<TlsFiles<'_>>,
) -> anyhow::Result<ExitCode> {
    // Before the ready line: a stop sent as soon as it is read must not find the default action.
    let stop = crate::util::terminate_signal();
    let sim = match tls {
        None => Sim::start(listen).await,
        Some(t) => Sim::start_tls(listen, t.cert, t.key, t.client_ca).await,
    }
    .map_err(|e| match e.kind() {
        // The TLS files: the error names the file.
        std::io::ErrorKind::InvalidInput => anyhow::anyhow!("sim: {e}"),
        _ => anyhow::anyhow!("sim: cannot listen on {listen}: {e}"),
    })?;
    // A closed stdout (the reader went away) must not stop the server: ignore write errors.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "llm-canary sim listening on {}", sim.origin());
    let _ = writeln!(
        out,
        "base_url per scenario: {}/s/<scenario>/v1 (or model name = scenario)",
        sim.origin()
    );
    let _ = writeln!(out, "every flavor: POST {}", wire::routes());
    let _ = writeln!(
        out,
        "credential stand-ins (credentials good for {}s): EC2 IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT={origin}), container credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI={origin}/container/credentials), STS web identity (AWS_ENDPOINT_URL_STS={origin}), Entra ID (AZURE_AUTHORITY_HOST={origin}, client secret {}), Azure managed identity (AZURE_POD_IDENTITY_AUTHORITY_HOST={origin})",
        credentials::LIFETIME.as_secs(),
        credentials::ENTRA_CLIENT_SECRET,
        origin = sim.origin()
    );
    let _ = writeln!(out, "{}", canned_answers());
    let t = crate::config::Timeouts::default();
    let _ = writeln!(
        out,
        "scenarios, as a probe with the default timeouts (connect {}, ttft {}, stall {}, total {}) and max_tokens 128 sees them:",
        crate::util::human_duration(t.connect),
        crate::util::human_duration(t.ttft),
        crate::util::human_duration(t.stall),
        crate::util::human_duration(t.total),
    );
    for (name, _, what) in CATALOG {
        let _ = writeln!(out, "  {name:<18} {what}");
    }
    let _ = out.flush();
    drop(out);
    stop.await;
    Ok(ExitCode::SUCCESS)
}

/// What the healthy scenarios say: canned text chosen by the prompt, not an answer to it, so a
/// user's own `expect:` has to match these.
fn canned_answers() -> String {
    let start = |text: &str| {
        let head: String = text.chars().take(48).collect();
        if head.len() < text.len() {
            format!("{head}…")
        } else {
            head
        }
    };
    [
        "healthy scenarios answer canned text, whatever the question (write checks.expect to match it, e.g. \"(?i)paris\"):".to_string(),
        format!("  a prompt with Chinese characters  {}", start(answers::CHINESE)),
        format!("  a prompt that mentions JSON       {}", start(answers::JSON)),
        format!("  over 2,000 characters, summarize  {}", start(answers::SUMMARY)),
        format!("  any other prompt                  {}", start(answers::ENGLISH)),
        "  (two probes of one target whose prompts get the same text are prompt_ignored)".to_string(),
    ]
    .join("\n")
}
