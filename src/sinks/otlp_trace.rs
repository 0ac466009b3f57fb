//! One OpenTelemetry client span per run: its trace id is the one the request's `traceparent`
//! carried and its span id that header's parent id, so a server that honours the header (vLLM)
//! hangs its own spans under ours. Events mark first byte, first token, first answer token and
//! finish at wall times derived from the run's start and its monotonic offsets.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span, status, ResourceSpans, ScopeSpans, Span, Status,
};

use super::otlp::{self, key_values, run_attributes, Value};
use crate::config::Target;
use crate::outcome::Outcome;
use crate::result::ProbeResult;

/// The trace id's bytes and the span id (its low half, as `traceparent` carries it).
fn ids(trace_id: &str) -> Option<([u8; 16], [u8; 8])> {
    let id = u128::from_str_radix(trace_id, 16)
        .ok()
        .filter(|v| *v != 0)?;
    let bytes = id.to_be_bytes();
    let mut span = [0u8; 8];
    span.copy_from_slice(&bytes[8..]);
    Some((bytes, span))
}

/// Whether the run's span is sent: always for a failure, else for `ratio` of runs, chosen by
/// the trace id so that every agent and the server's sampler could agree.
pub(crate) fn sampled(r: &ProbeResult, ratio: f64) -> bool {
    if r.judged.outcome != Outcome::Ok || ratio >= 1.0 {
        return true;
    }
    let Some((bytes, _)) = ids(&r.id.trace_id) else {
        return false;
    };
    // The trace id's low 56 bits are random (W3C level 2), as TraceIdRatioBased reads them.
    let low = u64::from_be_bytes(bytes[8..].try_into().expect("8 bytes")) & ((1 << 56) - 1);
    (low as f64) < ratio * (1u64 << 56) as f64
}

fn at(start_ns: u64, ms: f64) -> u64 {
    start_ns + (ms * 1e6).round().max(0.0) as u64
}

/// The run's span; `None` when the run carried no trace id.
pub(crate) fn span(r: &ProbeResult, target: &Target) -> Option<Span> {
    let (trace_id, span_id) = ids(&r.id.trace_id)?;
    let start = u64::try_from(r.id.started_at.as_nanosecond()).ok()?;
    let mut attrs = run_attributes(r, target);
    let s = |v: &str| Value::Str(v.to_string());
    attrs.push(("llm_canary.outcome".into(), s(r.judged.outcome.as_str())));
    attrs.push(("llm_canary.request_id".into(), s(&r.id.request_id)));
    if let Some(code) = r.measured.reading.http_status {
        attrs.push((
            "http.response.status_code".into(),
            Value::Int(i64::from(code)),
        ));
    }
    if let Some(n) = r.measured.output_tokens {
        attrs.push(("gen_ai.usage.output_tokens".into(), Value::Int(n as i64)));
    }
    if let Some(f) = &r.measured.reading.finish_reason {
        attrs.push(("llm_canary.finish_reason".into(), s(f)));
    }
    let figures = &r.measured.figures;
    let events = [
        ("first_byte", figures.ttfb_ms),
        ("first_token", figures.ttft_ms),
        ("first_answer_token", figures.answer_ttft_ms),
        ("finish", figures.e2e_ms),
    ]
    .into_iter()
    .filter_map(|(name, ms)| {
        Some(span::Event {
            time_unix_nano: at(start, ms?),
            name: name.into(),
            ..Default::default()
        })
    })
    .collect();
    let status = if r.judged.outcome == Outcome::Ok {
        Status {
            code: status::StatusCode::Ok as i32,
            message: String::new(),
        }
    } else {
        Status {
            code: status::StatusCode::Error as i32,
            message: r.judged.outcome.as_str().into(),
        }
    };
    Some(Span {
        trace_id: trace_id.to_vec(),
        span_id: span_id.to_vec(),
        name: format!("{} {}", otlp::operation(target.api), target.model),
        kind: span::SpanKind::Client as i32,
        start_time_unix_nano: start,
        end_time_unix_nano: at(start, otlp::elapsed_ms(r).unwrap_or(0.0)),
        attributes: key_values(&attrs),
        events,
        status: Some(status),
        ..Default::default()
    })
}

/// One request holding `spans`.
pub(crate) fn request(resource: Resource, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(otlp::scope()),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_is_sampled_and_successes_by_their_share() {
        let mut r = ProbeResult::example();
        let mut kept = 0;
        for i in 1..=2000u64 {
            r.id.trace_id = format!("{:016x}{:016x}", i, i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            kept += usize::from(sampled(&r, 0.25));
        }
        assert!((400..600).contains(&kept), "{kept} of 2000 at 0.25");
        assert!(!sampled(&r, 0.0));
        r.judged.outcome = Outcome::Stall;
        assert!(sampled(&r, 0.0));
    }

    #[test]
    fn the_span_id_is_the_parent_id_traceparent_carried() {
        let (traceparent, trace_id) = crate::probe::request::trace_context();
        let mut r = ProbeResult::example();
        r.id.trace_id = trace_id;
        let (t, s) = ids(&r.id.trace_id).unwrap();
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(traceparent, format!("00-{}-{}-01", hex(&t), hex(&s)));
    }
}
