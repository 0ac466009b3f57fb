//! Arrival timestamps → the figures a user feels: ttfb, ttft (of any generated token, and of
//! the answer after any reasoning), e2e, tpot, decode speed and inter-token gaps; and how long
//! setting up the connection took, step by step (DNS, TCP connect, TLS). Pure arithmetic over instants from one monotonic clock; nothing here reads
//! a clock.

use std::time::{Duration, Instant};

/// What one run observed, as raw instants. `content` holds the arrival of every chunk that
/// carried generated content (answer text, reasoning or a tool call), in order.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub start: Instant,
    /// When each step of setting up the run's connection completed.
    pub setup: Setup,
    pub headers: Option<Instant>,
    pub content: Vec<Instant>,
    /// The first chunk of answer text (or a tool call): after the reasoning, if any.
    pub answer: Option<Instant>,
    /// The chunk that carried the finish reason: the end-of-sequence token was produced then,
    /// and servers count it in their token total.
    pub finish: Option<Instant>,
    pub end: Option<Instant>,
}

/// When each step of setting up a connection completed; `None` for a step not taken (no DNS
/// for an IP address, no TLS for `http://`) or not reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Setup {
    pub resolved: Option<Instant>,
    /// The TCP connection (through a proxy: its tunnel) is open.
    pub connected: Option<Instant>,
    /// The TLS handshake is done.
    pub secured: Option<Instant>,
}

impl Setup {
    /// When the connection was ready for the request: after TLS, if it was used.
    pub fn ready(&self) -> Option<Instant> {
        self.secured.or(self.connected)
    }
}

/// Where `output_tokens` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokensSource {
    /// The server's own count (`usage.completion_tokens` or the flavor's equivalent).
    Usage,
    /// No count was sent: the number of content chunks.
    Chunks,
}

/// The derived figures, in milliseconds (absent figures are `None`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Each step of setting up the connection, on its own: DNS, TCP connect (after DNS), TLS
    /// (after connect).
    pub dns_ms: Option<f64>,
    pub connect_ms: Option<f64>,
    pub tls_ms: Option<f64>,
    pub ttfb_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub answer_ttft_ms: Option<f64>,
    /// From the connection being ready to the first generated content: TTFT without the
    /// connection's setup.
    pub ttft_after_connect_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub tokens_per_second: Option<f64>,
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub itl_max_ms: Option<f64>,
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Timeline {
    pub fn new(start: Instant) -> Self {
        Self {
            start,
            setup: Setup::default(),
            headers: None,
            content: Vec::new(),
            answer: None,
            finish: None,
            end: None,
        }
    }

    pub fn first_content(&self) -> Option<Instant> {
        self.content.first().copied()
    }

    pub fn last_content(&self) -> Option<Instant> {
        self.content.last().copied()
    }

    /// Gaps between successive content chunks.
    pub fn gaps(&self) -> Vec<Duration> {
        self.content.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// The last token of the decode window: counted by the server, the chunk that carried the
    /// finish reason counts too (its end-of-sequence token is in the count but has no text);
    /// counted from chunks, only the last content chunk.
    pub fn last_token(&self, source: TokensSource) -> Option<Instant> {
        match source {
            TokensSource::Usage => self.last_content().max(self.finish),
            TokensSource::Chunks => self.last_content(),
        }
    }

    /// `output_tokens` is the count docs/design.md prescribes (usage when sent, else content chunks),
    /// with where it came from.
    pub fn figures(&self, output_tokens: Option<(u64, TokensSource)>) -> Figures {
        let since = |t: Instant| ms(t - self.start);
        let s = self.setup;
        let mut f = Figures {
            dns_ms: s.resolved.map(since),
            connect_ms: s
                .connected
                .map(|c| ms(c - s.resolved.unwrap_or(self.start))),
            tls_ms: s.secured.zip(s.connected).map(|(t, c)| ms(t - c)),
            ttfb_ms: self.headers.map(since),
            ttft_after_connect_ms: self
                .first_content()
                .zip(s.ready())
                .map(|(first, ready)| ms(first - ready)),
            ttft_ms: self.first_content().map(since),
            answer_ttft_ms: self.answer.map(since),
            e2e_ms: self.end.map(since),
            ..Figures::default()
        };
        if let (Some(first), Some((tokens, source))) = (self.first_content(), output_tokens) {
            let last = self.last_token(source).unwrap_or(first);
            let decode = last - first;
            if tokens > 1 && !decode.is_zero() {
                let steps = (tokens - 1) as f64;
                f.tpot_ms = Some(ms(decode) / steps);
                f.tokens_per_second = Some(steps / decode.as_secs_f64());
            }
        }
        let mut gaps: Vec<f64> = self.gaps().into_iter().map(ms).collect();
        if !gaps.is_empty() {
            gaps.sort_by(f64::total_cmp);
            f.itl_p50_ms = Some(nearest_rank(&gaps, 0.50));
            f.itl_p99_ms = Some(nearest_rank(&gaps, 0.99));
            f.itl_max_ms = gaps.last().copied();
        }
        f
    }
}

/// Nearest-rank quantile of sorted values: always a value that was observed, never an
/// interpolation between two of them.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_follow_the_definitions() {
        let s = Instant::now();
        let at = |m: u64| s + Duration::from_millis(m);
        let t = Timeline {
            start: s,
            setup: Setup::default(),
            headers: Some(at(10)),
            content: vec![at(100), at(120), at(140), at(200)],
            answer: Some(at(120)),
            finish: None,
            end: Some(at(210)),
        };
        let f = t.figures(Some((4, TokensSource::Usage)));
        assert_eq!(f.ttfb_ms, Some(10.0));
        assert_eq!(f.ttft_ms, Some(100.0));
        assert_eq!(f.answer_ttft_ms, Some(120.0));
        assert_eq!(f.e2e_ms, Some(210.0));
        assert!((f.tpot_ms.unwrap() - 100.0 / 3.0).abs() < 1e-9);
        assert!((f.tokens_per_second.unwrap() - 30.0).abs() < 1e-9);
        assert_eq!(f.itl_p50_ms, Some(20.0));
        assert_eq!(f.itl_p99_ms, Some(60.0));
        assert_eq!(f.itl_max_ms, Some(60.0));
        // Usage may report more tokens than chunks (several tokens per chunk).
        let f = t.figures(Some((7, TokensSource::Usage)));
        assert!((f.tokens_per_second.unwrap() - 60.0).abs() < 1e-9);
    }

    #[test]
    fn each_setup_step_is_timed_on_its_own_and_ttft_after_connect_leaves_them_out() {
        let s = Instant::now();
        let at = |m: u64| s + Duration::from_millis(m);
        let mut t = Timeline::new(s);
        t.setup = Setup {
            resolved: Some(at(2)),
            connected: Some(at(5)),
            secured: Some(at(15)),
        };
        t.content = vec![at(100)];
        let f = t.figures(None);
        assert_eq!(
            (f.dns_ms, f.connect_ms, f.tls_ms),
            (Some(2.0), Some(3.0), Some(10.0))
        );
        assert_eq!(
            (f.ttft_ms, f.ttft_after_connect_ms),
            (Some(100.0), Some(85.0))
        );
        // An IP address over http://: no DNS, no TLS; connect from the start.
        t.setup = Setup {
            connected: Some(at(5)),
            ..Setup::default()
        };
        let f = t.figures(None);
        assert_eq!((f.dns_ms, f.connect_ms, f.tls_ms), (None, Some(5.0), None));
        assert_eq!(f.ttft_after_connect_ms, Some(95.0));
    }

    #[test]
    fn the_finish_chunk_closes_the_decode_window_when_the_server_counted() {
        let s = Instant::now();
        let at = |m: u64| s + Duration::from_millis(m);
        // Three text tokens 20 ms apart, then the end-of-sequence token 20 ms later: the server
        // counts 4 tokens over 3 steps of 20 ms.
        let t = Timeline {
            start: s,
            setup: Setup::default(),
            headers: Some(at(10)),
            content: vec![at(100), at(120), at(140)],
            answer: Some(at(100)),
            finish: Some(at(160)),
            end: Some(at(161)),
        };
        let f = t.figures(Some((4, TokensSource::Usage)));
        assert!((f.tokens_per_second.unwrap() - 50.0).abs() < 1e-9, "{f:?}");
        assert!((f.tpot_ms.unwrap() - 20.0).abs() < 1e-9);
        // Counted from chunks, the count has no end-of-sequence token: the window ends at the
        // last content chunk.
        let f = t.figures(Some((3, TokensSource::Chunks)));
        assert!((f.tokens_per_second.unwrap() - 50.0).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn one_chunk_has_no_decode_speed() {
        let s = Instant::now();
        let t = Timeline {
            start: s,
            setup: Setup::default(),
            headers: Some(s),
            content: vec![s + Duration::from_millis(5)],
            answer: None,
            finish: None,
            end: Some(s + Duration::from_millis(6)),
        };
        let f = t.figures(Some((12, TokensSource::Usage)));
        assert_eq!(f.tpot_ms, None);
        assert_eq!(f.tokens_per_second, None);
        assert_eq!(f.itl_max_ms, None);
    }

    #[test]
    fn nearest_rank_is_an_observed_value() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(nearest_rank(&v, 0.5), 5.0);
        assert_eq!(nearest_rank(&v, 0.99), 10.0);
        assert_eq!(nearest_rank(&v, 0.0), 1.0);
    }
}
