//! The fixed outcome vocabulary (docs/design.md's `outcome` label) and its precedence. Dashboards and
//! alert rules match on these strings, so they never change.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    // Transport, decided first.
    ConnectError,
    HttpError,
    TimeoutTtft,
    Stall,
    TimeoutTotal,
    StreamError,
    StreamInterrupted,
    MalformedStream,
    Oversized,
    // Content, in order of precedence.
    EmptyOutput,
    Repetition,
    Truncated,
    TooShort,
    TooLong,
    PatternMismatch,
    ForbiddenPattern,
    // Content, added later: their rank is in CONTENT_PRECEDENCE, not here.
    FormatError,
    ToolCallError,
    ContentFiltered,
    PromptIgnored,
    AnswerDrift,
}

impl Outcome {
    /// The transport outcomes, decided before any content check.
    pub const TRANSPORT: [Outcome; 9] = [
        Outcome::ConnectError,
        Outcome::HttpError,
        Outcome::TimeoutTtft,
        Outcome::Stall,
        Outcome::TimeoutTotal,
        Outcome::StreamError,
        Outcome::StreamInterrupted,
        Outcome::MalformedStream,
        Outcome::Oversized,
    ];

    /// Every outcome, `ok` first, transport then content in precedence order: built from the
    /// two lists, so a new outcome is written down once.
    pub const ALL: [Outcome; 22] = {
        let mut all = [Outcome::Ok; 22];
        let mut i = 0;
        while i < Self::TRANSPORT.len() {
            all[1 + i] = Self::TRANSPORT[i];
            i += 1;
        }
        let mut j = 0;
        while j < Self::CONTENT_PRECEDENCE.len() {
            all[1 + Self::TRANSPORT.len() + j] = Self::CONTENT_PRECEDENCE[j];
            j += 1;
        }
        all
    };

    /// The outcome's place in [`Outcome::ALL`].
    pub fn index(self) -> usize {
        Outcome::ALL
            .iter()
            .position(|o| *o == self)
            .expect("ALL lists every outcome")
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ConnectError => "connect_error",
            Outcome::HttpError => "http_error",
            Outcome::TimeoutTtft => "timeout_ttft",
            Outcome::Stall => "stall",
            Outcome::TimeoutTotal => "timeout_total",
            Outcome::StreamError => "stream_error",
            Outcome::StreamInterrupted => "stream_interrupted",
            Outcome::MalformedStream => "malformed_stream",
            Outcome::Oversized => "oversized",
            Outcome::EmptyOutput => "empty_output",
            Outcome::Repetition => "repetition",
            Outcome::Truncated => "truncated",
            Outcome::TooShort => "too_short",
            Outcome::TooLong => "too_long",
            Outcome::PatternMismatch => "pattern_mismatch",
            Outcome::ForbiddenPattern => "forbidden_pattern",
            Outcome::FormatError => "format_error",
            Outcome::ToolCallError => "tool_call_error",
            Outcome::ContentFiltered => "content_filtered",
            Outcome::PromptIgnored => "prompt_ignored",
            Outcome::AnswerDrift => "answer_drift",
        }
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }

    pub fn is_transport(self) -> bool {
        Self::TRANSPORT.contains(&self)
    }

    /// docs/design.md's precedence of content outcomes, highest first: when several checks fail, the
    /// run's outcome is the first of them in this list. Written out, not taken from the order
    /// the variants happen to be declared in.
    pub const CONTENT_PRECEDENCE: [Outcome; 12] = [
        Outcome::EmptyOutput,
        Outcome::ContentFiltered,
        // The answer names the broken deployment better than its shape does: an answer that
        // does not depend on the question, then one far from the known-good answer, outrank a
        // loop, a cut at max_tokens and a missed pattern, which are what such answers show.
        Outcome::PromptIgnored,
        Outcome::AnswerDrift,
        Outcome::Repetition,
        Outcome::Truncated,
        Outcome::FormatError,
        Outcome::ToolCallError,
        Outcome::TooShort,
        Outcome::TooLong,
        Outcome::PatternMismatch,
        Outcome::ForbiddenPattern,
    ];

    /// The outcome of a run whose content checks failed: the one of highest precedence.
    pub fn first_content_failure(failed: &[Outcome]) -> Outcome {
        Self::CONTENT_PRECEDENCE
            .into_iter()
            .find(|o| failed.contains(o))
            .unwrap_or(Outcome::Ok)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The record's `reason`: why the server refused a run with an HTTP error status (an
/// `http_error`'s, [`HttpReason::ALL`]), so alerts can tell a quota from an outage, or what a
/// `connect_error` showed ([`HttpReason::CONNECT_ERROR`]). A fixed vocabulary, like the
/// outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HttpReason {
    /// 429.
    RateLimited,
    /// 503, 529, or an `overloaded_error` body.
    Overloaded,
    /// 401, 403.
    Auth,
    /// 404, or an unknown model.
    NotFound,
    /// The prompt is over the model's context window (a 400 that says so).
    ContextLength,
    /// The server refused the request's `priority` (a 400 whose message names it: vLLM
    /// without priority scheduling).
    PriorityUnsupported,
    /// Any other 4xx.
    BadRequest,
    /// Any other 5xx.
    ServerError,
    /// A `connect_error`: the scheme does not match the server, `https://` against a
    /// plain-HTTP one or `http://` against a TLS one.
    TlsMismatch,
    /// A `connect_error`: a certificate the server sent has expired.
    CertExpired,
    /// A `connect_error`: the server's certificate is signed by a CA the agent does not trust.
    CertUnknownAuthority,
    /// A `connect_error`: the server's certificate is not for the name the target connects to.
    CertNameMismatch,
    /// A `connect_error`: any other failed TLS handshake.
    TlsHandshake,
}

impl HttpReason {
    /// An `http_error`'s reasons, in the contract's order: the runs counter's `reason` label.
    pub const ALL: [HttpReason; 8] = [
        HttpReason::RateLimited,
        HttpReason::Overloaded,
        HttpReason::Auth,
        HttpReason::NotFound,
        HttpReason::ContextLength,
        HttpReason::PriorityUnsupported,
        HttpReason::BadRequest,
        HttpReason::ServerError,
    ];

    /// A `connect_error`'s reasons; the runs counter does not split `connect_error` by them.
    pub const CONNECT_ERROR: [HttpReason; 5] = [
        HttpReason::TlsMismatch,
        HttpReason::CertExpired,
        HttpReason::CertUnknownAuthority,
        HttpReason::CertNameMismatch,
        HttpReason::TlsHandshake,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HttpReason::RateLimited => "rate_limited",
            HttpReason::Overloaded => "overloaded",
            HttpReason::Auth => "auth",
            HttpReason::NotFound => "not_found",
            HttpReason::ContextLength => "context_length",
            HttpReason::PriorityUnsupported => "priority_unsupported",
            HttpReason::BadRequest => "bad_request",
            HttpReason::ServerError => "server_error",
            HttpReason::TlsMismatch => "tls_mismatch",
            HttpReason::CertExpired => "cert_expired",
            HttpReason::CertUnknownAuthority => "cert_unknown_authority",
            HttpReason::CertNameMismatch => "cert_name_mismatch",
            HttpReason::TlsHandshake => "tls_handshake",
        }
    }

    #[cfg(test)]
    pub fn parse(s: &str) -> Option<HttpReason> {
        Self::ALL
            .into_iter()
            .chain(Self::CONNECT_ERROR)
            .find(|r| r.as_str() == s)
    }
}

impl std::fmt::Display for HttpReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_serialize_as_design_says() {
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
            assert_eq!(
                serde_json::to_string(&o).unwrap(),
                format!("\"{}\"", o.as_str())
            );
        }
    }

    #[test]
    fn content_precedence() {
        use Outcome::*;
        assert_eq!(
            Outcome::first_content_failure(&[ForbiddenPattern, TooShort, Repetition]),
            Repetition
        );
        assert_eq!(
            Outcome::first_content_failure(&[PatternMismatch, ForbiddenPattern]),
            PatternMismatch
        );
        assert_eq!(Outcome::first_content_failure(&[]), Ok);
        assert_eq!(
            Outcome::first_content_failure(&[Truncated, EmptyOutput]),
            EmptyOutput
        );
        // docs/design.md: truncated, then format_error, then tool_call_error, then the length checks.
        assert_eq!(
            Outcome::first_content_failure(&[TooShort, ToolCallError, FormatError]),
            FormatError
        );
        assert_eq!(
            Outcome::first_content_failure(&[TooLong, ToolCallError]),
            ToolCallError
        );
        assert_eq!(
            Outcome::first_content_failure(&[FormatError, Truncated]),
            Truncated
        );
        // A filtered answer is usually empty: empty_output still names it first, and
        // content_filtered outranks what the cut left (too short, no expected text).
        assert_eq!(
            Outcome::first_content_failure(&[ContentFiltered, EmptyOutput]),
            EmptyOutput
        );
        assert_eq!(
            Outcome::first_content_failure(&[TooShort, PatternMismatch, ContentFiltered]),
            ContentFiltered
        );
        assert_eq!(
            Outcome::first_content_failure(&[Repetition, ContentFiltered]),
            ContentFiltered
        );
        // The fault's name before its symptoms: a prompt ignored, then drift from the
        // reference, before the loop, the cut and the missed pattern they show.
        assert_eq!(
            Outcome::first_content_failure(&[Truncated, Repetition, AnswerDrift, PromptIgnored]),
            PromptIgnored
        );
        assert_eq!(
            Outcome::first_content_failure(&[PatternMismatch, Truncated, AnswerDrift]),
            AnswerDrift
        );
        assert_eq!(
            Outcome::first_content_failure(&[PromptIgnored, EmptyOutput, ContentFiltered]),
            EmptyOutput
        );
    }

    #[test]
    fn reasons_round_trip_and_serialize_as_design_says() {
        for r in HttpReason::ALL.into_iter().chain(HttpReason::CONNECT_ERROR) {
            assert_eq!(HttpReason::parse(r.as_str()), Some(r));
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                format!("\"{}\"", r.as_str())
            );
        }
    }

    #[test]
    fn every_outcome_is_transport_or_ranked_content() {
        for o in Outcome::ALL.into_iter().skip(1) {
            assert_ne!(
                o.is_transport(),
                Outcome::CONTENT_PRECEDENCE.contains(&o),
                "{o}"
            );
        }
    }
}
