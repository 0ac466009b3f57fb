//! `once`: every selected (probe, target) pair now, a table or JSON lines, exit 0/1.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;

use crate::cli::{Format, OnceArgs};
use crate::config::{Config, Pair, Selection};
use crate::report;
use crate::runner::Runner;

/// The pairs a command line selects; an unknown name is an error, not an empty run.
pub(crate) fn select_pairs(
    cfg: &Config,
    probes: &[String],
    targets: &[String],
) -> anyhow::Result<Vec<Pair>> {
    let pairs = cfg.pairs(&Selection {
        probes,
        targets,
        in_shard: false,
    })?;
    if pairs.is_empty() {
        bail!("no probe runs against the selected targets");
    }
    Ok(pairs)
}

/// A runner for runs outside the daemon, which knows the config's maintenance windows (announced
/// ones live in a daemon).
pub(crate) fn runner(cfg: &Config, concurrency: usize) -> Runner {
    let mut runner = Runner::new(concurrency);
    let (windows, announced) = (
        Arc::new(cfg.clone()),
        crate::maintenance::Announced::default(),
    );
    runner.windows = Some(Arc::new(move |target: &str, at| {
        crate::maintenance::active(&windows, &announced, target, at).is_some()
    }));
    runner
}

pub(crate) async fn once(
    cfg: &Config,
    opts: &OnceArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let pairs = select_pairs(cfg, &opts.probes, &opts.targets)?;
    let push = match (opts.push, &cfg.push) {
        (true, None) => bail!("--push needs a `push:` section in {}", cfg.path.display()),
        (true, Some(p)) => Some(p),
        (false, _) => None,
    };
    let mut runner = runner(cfg, opts.concurrency.unwrap_or(cfg.agent.concurrency));
    runner.show_output = opts.show_output;
    let results = Arc::new(runner).run_all(pairs).await;
    for r in &results {
        tracing::info!(probe = %r.id.probe, target = %r.id.target, outcome = %r.judged.outcome, request_id = %r.id.request_id, "probe run finished");
    }
    match opts.format {
        Format::Table => write!(out, "{}", report::table::render(&results))?,
        Format::Json => {
            for r in &results {
                writeln!(out, "{}", r.to_json_line())?;
            }
        }
    }
    out.flush()?;
    if let Some(settings) = push {
        push_results(cfg, settings, &results).await?;
    }
    Ok(if results.iter().all(|r| r.success()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Pushes the results of one `once` run, with a few retries.
async fn push_results(
    cfg: &Config,
    settings: &crate::config::Push,
    results: &[crate::result::ProbeResult],
) -> anyhow::Result<()> {
    use crate::sinks::{metrics::Metrics, push};
    let metrics = Metrics::new(cfg);
    for r in results {
        if let Some(t) = cfg.target(&r.id.target) {
            metrics.record(r, t);
        }
    }
    let client = crate::sinks::outbound::OutputClient::default();
    let mut attempt = 0;
    loop {
        match push::put(&client, settings, &cfg.agent.name, metrics.encode()).await {
            Ok(()) => return Ok(()),
            Err(e) if attempt >= 2 => return Err(e.into()),
            Err(e) => {
                tracing::warn!(error = %e, "push failed; retrying");
                tokio::time::sleep(push::backoff(attempt, std::time::Duration::from_secs(4))).await;
                attempt += 1;
            }
        }
    }
}
