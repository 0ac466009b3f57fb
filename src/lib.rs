//! llm-canary: fires predefined prompts at LLM inference endpoints, measures what a user feels
//! (time to first token, decode speed, stalls, end-to-end time), judges the generated text, and
//! reports it.
//!
//! # Layout
//!
//! Data flows one way: config → probe run → result → reports.
//!
//! - [`cli`]: the command line (run | once | gate | check | sim | demo | calibrate | report |
//!   watch | mcp | rules).
//! - [`config`]: `llm-canary.yaml`, probe and prompt files; strict loading, errors with
//!   file:line:column and field.
//! - [`schedule`]: when a probe fires, one type for both kinds: cron expressions read once into
//!   a field spec (the check for standard crontab, the fixed-time rule, `check`'s cadence words),
//!   evaluated by croner with Vixie cron's daylight-saving rule, and intervals (`every:`,
//!   `@every`) at multiples from the Unix epoch; a pair's stable share of its jitter.
//! - [`probe`]: one run against one target — the shared envelope (request id, cache busting,
//!   deadlines, caps, transport outcome) and one file per API flavor (`probe::flavor`: `Api`,
//!   the `Flavor` trait whose defaults are OpenAI chat's, one unit struct per API overriding
//!   what differs, `Api::flavor` mapping one to the other; it imports nothing from `config`);
//!   a context ladder's rungs (prompts of growing size with a fact to find) and their prefill
//!   estimate (`probe::ladder`).
//! - [`stream`]: a response body → protocol events (SSE on `eventsource-stream`, NDJSON), stamped with
//!   arrival times and capped.
//! - [`timeline`]: arrival times → ttfb, ttft, e2e, tpot, tokens/s, inter-token gaps.
//! - [`checks`]: judging the text, pure functions: degeneration (lists included), length,
//!   patterns, JSON and JSON Schema, tool calls.
//! - [`outcome`]: the fixed outcome vocabulary and its precedence.
//! - [`result`]: what one run measured, the context it ran in, and the record made of both;
//!   the record's vocabulary (a cache check's phase and figures).
//! - [`gate`]: the pre-release gate — sequential sampling on anytime-valid confidence sequences
//!   (or a fixed N with bootstrap intervals), verdicts, reports; progress through a callback.
//! - [`daemon`]: `run` — scheduling and confirmation runs, reload, shutdown; its shared state
//!   (`state`, one thing with methods: the running config and registry, the pairs in flight,
//!   what runs leave behind), of which each loop and endpoint gets the part it uses; its push,
//!   remote-write and OTLP loops and endpoints: the status page, JSON status and badges (`status` judges, `status_page`
//!   renders), the history API (`history`), the incidents' Atom feeds (`feed`), `/probe` (one
//!   configured pair now), and the admin endpoints behind the token guard.
//! - [`sinks`]: the metrics registry, the Pushgateway client, remote-write (wire format and
//!   queue), the results log, the status page's fixed-size history (rebuilt from the results
//!   log at start), its states and their rule (`state`), and the incident detector
//!   (`incidents`, a pure fold over runs).
//! - [`maintenance`]: maintenance windows, configured (cron start, duration) and announced
//!   (`POST /-/maintenance`): is a target in one at an instant, until when.
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
//!   byte, and its own misbehaving HTTP writer.
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

pub mod buckets;
pub mod calibrate;
pub mod checks;
pub mod cli;
pub(crate) mod commands;
pub mod config;
pub mod daemon;
pub mod gate;
pub mod listener;
pub(crate) mod maintenance;
pub mod outcome;
pub mod probe;
pub(crate) mod report;
pub mod result;
pub mod runner;
pub mod schedule;
pub(crate) mod secret;
pub mod sim;
pub mod sinks;
pub(crate) mod slo_rules;
pub mod stream;
pub mod summary;
pub mod timeline;
pub mod util;

#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod layering_tests;

use std::process::ExitCode;

/// Runs one command to completion and says how the process should exit:
/// 0 success, 1 a probe or the gate failed, 2 a usage or config error.
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
