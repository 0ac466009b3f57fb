//! One probe run against one target: build the request ([`request`]), read the response under
//! layered deadlines and caps ([`read`]), judge the text, and return a [`Measurement`]. The
//! envelope every API flavor shares lives here and in those two files; a flavor ([`flavor`])
//! only knows its path, body and event shape. A run never touches metrics or output.

pub mod cache_check;
pub mod flavor;
pub mod http_reason;
pub mod identity;
pub mod ladder;
pub mod read;
pub mod request;

use std::sync::Arc;
use std::time::Instant;

pub use request::{build_request, Clients, Request};

use crate::checks;
use crate::config::{Probe, Target};
use crate::result::{Measurement, Rung, TokensSource};

/// SHA-256 of `text`, hex.
pub fn sha256_hex(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `probe` once against `target`.
pub async fn run(
    client: &reqwest::Client,
    probe: &Probe,
    target: &Target,
    show_output: bool,
) -> Measurement {
    measure(
        client,
        probe,
        target,
        build_request(probe, target),
        show_output,
        None,
    )
    .await
}

/// Runs one rung of a context ladder against `target`: its error, if any, names the rung.
pub async fn run_rung(
    client: &reqwest::Client,
    plan: &ladder::RungPlan,
    target: &Target,
    show_output: bool,
) -> Measurement {
    let req = build_request(&plan.probe, target);
    measure(
        client,
        &plan.probe,
        target,
        req,
        show_output,
        Some(plan.rung),
    )
    .await
}

/// Sends `req`, reads the answer and judges it as `probe` says.
async fn measure(
    client: &reqwest::Client,
    probe: &Probe,
    target: &Target,
    mut req: Request,
    show_output: bool,
    rung: Option<Rung>,
) -> Measurement {
    let authorized = req.authorize(client).await;
    let (request_id, trace_id) = (req.request_id.clone(), req.trace_id.clone());
    let started_at = jiff::Timestamp::now();
    let start = Instant::now();
    let seen = match authorized {
        Ok(()) => read::read(client, req, read::Plan::for_run(probe, target), start).await,
        Err(why) => read::Reading::no_credential(start, why),
    };

    // The server's count comes at the end, which a read stopped on a loop never sees; one it
    // sent before (Anthropic's `message_start` says 1) is stale: count the chunks instead.
    let usage_tokens = seen.usage_tokens.filter(|_| !seen.stopped_early);
    let (output_tokens, tokens_source) = match (usage_tokens, seen.chunks) {
        (Some(n), _) => (Some(n), Some(TokensSource::Usage)),
        (None, 0) if seen.failure.is_some() => (None, None),
        (None, c) => (Some(c as u64), Some(TokensSource::Chunks)),
    };
    let output_sha256 = seen.failure.is_none().then(|| sha256_hex(&seen.text));
    // The text itself, for the runner's comparison across probes (never in the record unless
    // shown); a run that failed in transport has no answer to compare.
    let answer: Option<Arc<str>> = seen
        .failure
        .is_none()
        .then(|| Arc::from(seen.text.as_str()));
    let figures = seen.timeline.figures(output_tokens.zip(tokens_source));
    let (outcome, failed_checks, error, output_chars, repetition, similarity) = match seen.failure {
        Some(f) => (f.outcome, vec![f.outcome], Some(f.error), None, None, None),
        None => {
            let answer = checks::Answer {
                text: &seen.text,
                finish_reason: seen.finish_reason.as_deref(),
                tool_calls: seen.tool_calls.calls(),
                stopped_early: seen.stopped_early,
                show_text: show_output,
            };
            let v = checks::judge(&probe.checks, &answer);
            let outcome = v.outcome();
            let why = v.explanation();
            let similarity = v.similarity.map(checks::similarity::rounded);
            let failed = v.failed();
            (
                outcome,
                failed,
                why,
                Some(v.output_chars),
                v.repetition,
                similarity,
            )
        }
    };
    let error = error.map(|e| {
        target
            .secrets()
            .fold(e, |e, k| e.replace(k.expose(), "***"))
    });
    let error = match rung {
        Some(r) => error.map(|e| format!("rung {}: {e}", r.size)),
        None => error,
    };
    Measurement {
        probe: probe.name.clone(),
        target: target.name.clone(),
        model: target.model.clone(),
        labels: target.labels.clone(),
        request_id,
        started_at,
        outcome,
        failed_checks,
        http_status: seen.http_status,
        reason: seen.http_reason,
        rate_limit: seen.rate_limit,
        figures,
        output_tokens,
        tokens_source,
        reasoning_tokens: seen.reasoning_tokens,
        finish_reason: seen.finish_reason,
        output_chars,
        repetition_score: repetition
            .as_ref()
            .map(|r| (r.measures.score * 1000.0).round() / 1000.0),
        error,
        server_ttft_ms: seen
            .server_timings
            .as_ref()
            .and_then(flavor::server_ttft_ms),
        server_timings: seen.server_timings,
        build: seen.fingerprint.or_else(|| seen.reported_model.clone()),
        reported_model: seen.reported_model,
        output_sha256,
        trace_id,
        content_chunks: seen.chunks,
        response_bytes: seen.bytes_read,
        repetition,
        stopped_early: seen.stopped_early,
        input_tokens: seen.input_tokens,
        cached_tokens: seen.cached_tokens,
        rung,
        similarity,
        answer,
        output: show_output.then_some(seen.text),
        timeline: Some(seen.timeline),
    }
}

/// A probe with defaults around `prompt`, for the probes' tests.
#[cfg(test)]
pub fn probe_for(prompt: crate::config::Prompt) -> Probe {
    Probe {
        name: "p".into(),
        file: "p.yaml".into(),
        schedule: None,
        timezone: jiff::tz::TimeZone::UTC,
        jitter: std::time::Duration::ZERO,
        targets: vec![],
        prompt: std::sync::Arc::new(prompt),
        max_tokens: 64,
        temperature: Some(0.0),
        cache_bust: crate::config::CacheBust::Auto,
        tools: None,
        timeouts: crate::config::Timeouts::default(),
        checks: crate::checks::CheckSpec::default(),
        gate: crate::config::GateSpec::default(),
        confirm: crate::config::Confirm::OFF,
        slo: None,
        cache_check: None,
        ladder: None,
    }
}
