//! One probe run against one target: build the request ([`request`]), connect ([`connect`]:
//! each setup step timed), read the response under layered deadlines and caps ([`read`]),
//! judge the text, and return a [`Measurement`]: which run it was, what its text was judged,
//! what it measured. The envelope every API flavor shares lives here and in those files; a flavor ([`flavor`]) only knows its path, body
//! and event shape. A run never touches metrics or output.

pub(crate) mod cache_check;
pub(crate) mod connect;
pub(crate) mod flavor;
pub(crate) mod http_reason;
pub(crate) mod identity;
pub(crate) mod ladder;
pub(crate) mod read;
pub(crate) mod request;

use std::sync::Arc;
use std::time::Instant;

pub(crate) use connect::{Client, Clients};
pub(crate) use request::{build_request, Request};

use crate::checks;
use crate::config::{Probe, Target};
use crate::result::{Judged, Measured, Measurement, RunId, Rung, TokensSource};

/// SHA-256 of `text`, hex.
pub(crate) fn sha256_hex(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `probe` once against `target`.
pub(crate) async fn run(
    client: &Client,
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
pub(crate) async fn run_rung(
    client: &Client,
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
    client: &Client,
    probe: &Probe,
    target: &Target,
    mut req: Request,
    show_output: bool,
    rung: Option<Rung>,
) -> Measurement {
    let authorized = req.authorize(&client.http).await;
    let id = RunId {
        probe: probe.name.clone(),
        target: target.name.clone(),
        model: target.model.clone(),
        labels: target.labels.clone(),
        request_id: req.request_id.clone(),
        trace_id: req.trace_id.clone(),
        started_at: jiff::Timestamp::now(),
        rung,
    };
    let way = client.way(&target.outbound);
    let start = Instant::now();
    let read::Read {
        reading,
        text,
        tool_calls,
        failure,
    } = match authorized {
        Ok(()) => read::read(&way, req, read::Plan::for_run(probe, target), start).await,
        Err(why) => read::Read::no_credential(start, why),
    };

    // Why the run failed, as the record says it: no secret in it, and a rung names itself.
    let say = |e: String| {
        let e = target
            .secrets()
            .fold(e, |e, k| e.replace(k.expose(), "***"));
        match rung {
            Some(r) => format!("rung {}: {e}", r.size),
            None => e,
        }
    };
    let answered = failure.is_none();
    let judged = match failure {
        Some(f) => Judged {
            outcome: f.outcome,
            failed_checks: vec![f.outcome],
            error: Some(say(f.error)),
            output_chars: None,
            repetition: None,
            similarity: None,
        },
        None => {
            let v = checks::judge(
                &probe.checks,
                &checks::Answer {
                    text: &text,
                    finish_reason: reading.finish_reason.as_deref(),
                    tool_calls: tool_calls.calls(),
                    stopped_early: reading.stopped_early,
                    show_text: show_output,
                },
            );
            Judged {
                outcome: v.outcome(),
                failed_checks: v.failed(),
                error: v.explanation().map(say),
                output_chars: Some(v.output_chars),
                similarity: v.similarity.map(checks::similarity::rounded),
                repetition: v.repetition,
            }
        }
    };

    // The server's count comes at the end, which a read stopped on a loop never sees; one it
    // sent before (Anthropic's `message_start` says 1) is stale: count the chunks instead.
    let usage_tokens = reading.usage_tokens.filter(|_| !reading.stopped_early);
    let (output_tokens, tokens_source) = match (usage_tokens, reading.chunks) {
        (Some(n), _) => (Some(n), Some(TokensSource::Usage)),
        (None, 0) if !answered => (None, None),
        (None, c) => (Some(c as u64), Some(TokensSource::Chunks)),
    };
    let measured = Measured {
        figures: reading.timeline.figures(output_tokens.zip(tokens_source)),
        output_tokens,
        tokens_source,
        server_ttft_ms: reading
            .server_timings
            .as_ref()
            .and_then(flavor::server_ttft_ms),
        output_sha256: answered.then(|| sha256_hex(&text)),
        // The text itself, for the runner's comparison across probes (never in the record
        // unless shown); a run that failed in transport has no answer to compare.
        answer: answered.then(|| Arc::from(text.as_str())),
        output: show_output.then_some(text),
        reading,
    };
    Measurement {
        id,
        judged,
        measured,
    }
}

/// A probe with defaults around `prompt`, for the probes' tests.
#[cfg(test)]
pub(crate) fn probe_for(prompt: crate::config::Prompt) -> Probe {
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
