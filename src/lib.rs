//! llm-canary: fires predefined prompts at LLM inference endpoints, measures what a user feels
//! (time to first token, decode speed, stalls, end-to-end time), judges the generated text, and
//! reports it.
//!
//! # Layout
//!
//! Data flows one way: config → probe run → result → reports. The modules form layers, and an
//! import only ever points down to a lower one; inside a module, its parts that others share
//! (a vocabulary, a state) are leaves its other parts build on. `layering_tests` proves the
//! module graph has no cycle and that every import points down these layers. From the bottom:
//!
//! 1. `util`, `secret`, `buckets`: helpers with no knowledge of the rest;
//! 2. `outcome`, `timeline`, `stream`, `checks`, `schedule`, `listener`: the measuring and
//!    judging vocabulary; `cloud`: credentials clouds hand out (AWS's chain, Entra ID tokens),
//!    refreshed before they expire; `tls`: TLS on rustls, the PEM files an operator names,
//!    the client configs (`tls:` blocks) every outbound connection is made with, and the
//!    server side the endpoints' web config is made into;
//! 3. `probe::flavor` (what each API speaks), then `config` (the files, validated) and
//!    `web_config` (the endpoints' TLS and auth);
//! 4. `result` (the record), then `probe` (one run), then `runner` (pairs, concurrency);
//! 5. `sinks`, `maintenance`, `summary`, `report`, `gate`, `calibrate`, `slo_rules`, `sim`;
//! 6. `daemon`, then `fleet` (which borrows the status page's look); then `cli` (the
//!    arguments, one struct per command); then `commands`, which
//!    each take theirs; [`run`] at the top.
//!
//! The public surface is [`cli`], [`run`] and [`init_tracing`], for the binary. `testing`
//! (hidden) names what the benches, fuzz targets and integration tests drive; it is not an API.
//! `unreachable_pub` is on: an item only the crate uses is `pub(crate)`.
//!
//! - [`cli`]: the command line (run | once | gate | check | sim | demo | calibrate | report |
//!   watch | mcp | rules | status-page).
//! - [`config`]: `llm-canary.yaml`, probe and prompt files; strict loading, errors with
//!   file:line:column and field.
//! - [`schedule`]: when a probe fires, one type for both kinds: cron expressions read once into
//!   a field spec (the check for standard crontab, the fixed-time rule, `check`'s cadence words),
//!   evaluated by croner with Vixie cron's daylight-saving rule, and intervals (`every:`,
//!   `@every`) at multiples from the Unix epoch; a pair's stable share of its jitter.
//! - [`probe`]: one run against one target — the shared envelope (request id, cache busting,
//!   deadlines, caps, transport outcome; `read` returns a `Read` whose `Reading` is the
//!   record's measured part; `connect` makes the run's own connection, DNS, TCP, proxy and TLS
//!   each stamped as it completes, with the TLS session and a refused certificate's reason) and one file per API flavor (`probe::flavor`: the `Flavor` trait
//!   whose defaults are OpenAI chat's, one unit struct per API overriding what differs, each
//!   owning its body, events, headers and auth (`ProviderAuth`), its error bodies (message and
//!   error words, `flavor::errors`) and its rate-limit prefixes; the `registry!` line per API
//!   makes `Api`, `Api::ALL` and `Api::flavor`; it imports nothing from `config`).
//!   `probe::http_reason` keeps only what is common to HTTP: the status precedence,
//!   `Retry-After` and the rate-limit headers;
//!   a context ladder's rungs (prompts of growing size with a fact to find) and their prefill
//!   estimate (`probe::ladder`).
//! - [`stream`]: a response body → protocol events (SSE on `eventsource-stream`, NDJSON), stamped with
//!   arrival times and capped.
//! - [`timeline`]: arrival times → ttfb, ttft, e2e, tpot, tokens/s, inter-token gaps.
//! - [`checks`]: judging the text, pure functions: degeneration (lists included), length,
//!   patterns, JSON and JSON Schema, tool calls.
//! - [`outcome`]: the fixed outcome vocabulary and its precedence.
//! - [`result`]: the record of one run, made of parts, each made once where it is known and
//!   serialized flattened: `RunId` (which run), `Judged` (outcome and checks), `Measured` (the
//!   response's `Reading` and the figures made of it) and `RunContext` (what the runner
//!   knows); a `Measurement` is a run's first three. The record's vocabulary (a cache check's
//!   phase and figures).
//! - [`gate`]: the pre-release gate — sequential sampling on anytime-valid confidence sequences
//!   (or a fixed N with bootstrap intervals), verdicts, reports; progress through a callback.
//!   `sample` (a sample from a record, a figure's values), `rounds` (interleaved pairs, the
//!   runs in flight, each probe's verdicts), `stats` (bootstrap intervals and verdicts),
//!   `needs` (the least samples each limit needs to pass, printed before a run).
//! - [`daemon`]: `run` — scheduling and confirmation runs, reload, shutdown; its shared state
//!   (`state`, one thing with methods: the running config and registry, the pairs in flight
//!   as `Claim`s released on drop, what runs leave behind), of which each loop and endpoint
//!   gets the part it uses; its push, remote-write and OTLP loops and endpoints (`endpoints`
//!   routes, `endpoints::handlers` has one function per endpoint): the status page, JSON
//!   status and badges (`status` judges, `status_page` renders), the history API
//!   (`history`), the incidents' Atom feeds (`feed`), `/probe` (one configured pair now),
//!   and the admin endpoints behind the token guard; a pair going down
//!   or coming back, logged once per change (`changes`).
//! - [`fleet`]: `status-page` — one page for a fleet of agents, read from the store they
//!   write to through Prometheus' HTTP API (`query`), folded into targets with one row per
//!   location and the alerts' N-of-M state (`model`), rendered with the status page's look;
//!   a location whose agents stopped writing, told by their samples' times (`silence`).
//! - [`sinks`]: the metrics registry, the Pushgateway client, remote-write (wire format and
//!   queue), the results log, the status page's fixed-size history (rebuilt from the results
//!   log at start), its states and their rule (`state`), the incident detector
//!   (`incidents`, a pure fold over runs), and the status store (`status_store`: both of
//!   those kept in SQLite as runs land, read back at start, written on a thread of its own).
//! - [`maintenance`]: maintenance windows, configured (cron start, duration) and announced
//!   (`POST /-/maintenance`): is a target in one at an instant, until when.
//! - [`web_config`]: the agent's own endpoints (and the fleet page) behind TLS, basic auth and
//!   response headers, from a Prometheus exporter-toolkit web config (`--web.config.file`):
//!   the file read strictly (`file`), re-read on a new connection when it or a certificate it
//!   names changed (`live`), bcrypt checks cached by digest (`users`), the toolkit's token
//!   bucket (`rate`), and the serving loop
//!   every endpoint goes through, the TLS handshake inside the connection's slot (`serve`).
//! - [`tls`]: TLS on rustls with ring: PEM files (`pem`), the outbound side (`client`), and the
//!   server side from a web config's `tls_server_config` (`server`: certificate,
//!   client-certificate policies, versions).
//! - [`listener`]: a listening socket on hostile ground (the endpoints' and the sim's): accept
//!   backoff, the connection cap, the header and idle timeouts, the descriptor budget.
//! - [`runner`]: runs (probe, target) pairs with a concurrency limit (a ladder's firing as a run
//!   per rung) and remembers what a run's context needs: warm-up, change detection, each
//!   target's model list.
//! - [`report`]: table and JSON lines.
//! - [`summary`]: a results log (rotated files included) summarised per (probe, target):
//!   runs, outcomes, nearest-rank percentiles, incidents; the `report` command and the `mcp`
//!   server (`commands::mcp`) print it.
//! - [`sim`]: the simulated OpenAI-compatible replica: a router with one function per route,
//!   its caches, its scenarios, an answer per scenario written by a plan chosen before the first
//!   byte, and its own misbehaving HTTP writer. Each API it speaks is one `Wire` implementation
//!   in its own file under `sim::wire` (defaults OpenAI chat's, in `wire::openai`), picked from
//!   a request's route by the one registry `wire::WIRES`; a stream that ends with a marker line
//!   closes with `Frame::Done`.
//! - [`calibrate`]: ours beside the server's own figures (its /metrics or per-response timings),
//!   one sample loop over a `Source` (histograms, llama.cpp counters, timings); it returns data
//!   and reports progress through a callback, and `commands` prints.
//! - [`slo_rules`]: `rules` — targets' and probes' `slo:` → Prometheus recording rules and
//!   multiwindow, multi-burn-rate alerts, error budget left and goodput.
//! - [`commands`]: what each subcommand does with the pieces above; `watch` is a live terminal
//!   view (ratatui) of the daemon's status judging, run in-process without outputs
//!   ([`daemon::Quiet`]) or read from a daemon's `/api/v1/status`.
//! - [`secret`]: a value that never prints.
//! - [`util`]: small shared helpers at the bottom (durations for people, error chains,
//!   clipping, stop signals).
//! - [`buckets`]: the histograms' bucket bounds (docs/design.md), which the metrics registry and
//!   config's latency objectives share.

// What only this crate uses is `pub(crate)`; `pub` means the binary, the benches or the tests
// reach it through `cli`, `run` or `testing`.
#![warn(unreachable_pub)]

mod buckets;
mod calibrate;
mod checks;
pub mod cli;
mod cloud;
mod commands;
mod config;
mod daemon;
mod fleet;
mod gate;
mod listener;
mod maintenance;
mod outcome;
mod probe;
mod report;
mod result;
mod runner;
mod schedule;
mod secret;
mod sim;
mod sinks;
mod slo_rules;
mod stream;
mod summary;
mod timeline;
mod tls;
mod util;
mod web_config;

// The public surface: the command line and `run` (for the binary), and nothing else. The
// modules above are the crate's own; benches, fuzz targets and the integration tests reach
// what they drive through `testing`, which is not an API.
pub use cli::{Cli, Command};

/// What the benches, the fuzz targets and the integration tests drive, under the modules' own
/// names. Not an API: nothing here is kept stable.
#[doc(hidden)]
pub mod testing {
    pub mod calibrate {
        pub use crate::calibrate::{calibrate, Figure, Options, Progress};
    }
    pub mod checks {
        pub use crate::checks::{judge, repetition, similarity, Answer, CheckSpec};
    }
    pub mod config {
        pub use crate::config::{check_yaml, load, CacheBust, Config};
        pub mod gate {
            pub use crate::config::gate::parse_relative;
        }
    }
    pub mod daemon {
        pub mod status_page {
            pub use crate::daemon::status_page::{percent, when};
        }
    }
    pub mod gate {
        pub use crate::gate::{
            decide, run, sample, stats, GateOptions, GateReport, BATCH, DEFAULT_MAX_SAMPLES,
        };
    }
    pub mod listener {
        pub use crate::listener::Limits;
    }
    pub mod outcome {
        pub use crate::outcome::{HttpReason, Outcome};
    }
    pub mod probe {
        pub mod flavor {
            pub use crate::probe::flavor::Flavor;
            pub mod gemini {
                pub use crate::probe::flavor::gemini::Gemini;
            }
            pub mod openai_chat {
                pub use crate::probe::flavor::openai_chat::delta;
            }
            pub mod openai_completions {
                pub use crate::probe::flavor::openai_completions::delta;
            }
        }
    }
    pub mod result {
        pub use crate::result::{ProbeResult, PromptTokens, TokensSource};
    }
    pub mod runner {
        pub use crate::runner::{echo, Runner};
    }
    pub mod schedule {
        pub use crate::schedule::{pair_offset, Cron, Schedule};
    }
    pub mod sim {
        pub use crate::sim::{bedrock, conn, credentials, http, scenarios, Seen, Sim};
    }
    pub mod sinks {
        pub mod metrics {
            pub use crate::sinks::metrics::Metrics;
        }
        pub mod results_log {
            pub use crate::sinks::results_log::log_files;
        }
    }
    pub mod stream {
        pub use crate::stream::{drain_ready, reads, sse, StreamCaps};
    }
    pub mod timeline {
        pub use crate::timeline::{nearest_rank, TokensSource};
    }
    pub mod util {
        pub use crate::util::clip;
    }
}

#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod layering_tests;

use std::process::ExitCode;

/// Runs one command to completion and says how the process should exit: 0 success; 1 a probe,
/// the gate or calibration failed; an `Err` is exit 2, whatever stopped the command (usage, an
/// invalid config, or a run-time error such as a port in use), printed as one line.
pub fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    // The daemon's budget is a fraction of one core and 64 MiB: one thread serves it, and costs
    // less memory than a pool. One-shot commands may use every core.
    let mut builder = match cli.command {
        cli::Command::Run(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    runtime.block_on(commands::dispatch(cli.command))
}

/// Logs to stderr; `RUST_LOG` (`info`, `llm_canary=debug,hyper=warn`) wins over `--log-level`.
pub fn init_tracing(level: &str) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let filter: Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|s| s.parse().ok())
        .or_else(|| level.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::WARN))
        // The SigV4 signer traces its canonical request, session token included: a secret
        // must not reach the log at any level asked for.
        .with_target("aws_sigv4", LevelFilter::INFO);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_target(false),
        )
        .try_init();
}
