//! Server-sent events: `eventsource-stream` parses them over the [`Body`] layer; this file adds
//! what a probe needs beyond the parser — each event stamped with the arrival of the read that
//! completed it, and a body that carried bytes but not one event refused as not the protocol.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use eventsource_stream::{EventStream, EventStreamError};
use futures_util::Stream;

use super::{Body, BodyError, Event, Progress, StreamCaps};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error("the body carried {bytes} bytes but no server-sent event: {head:?}")]
    NoEvents { bytes: usize, head: String },
    #[error("not server-sent events: {0}")]
    Syntax(String),
}

/// Events from a body, in order; ends after the first error.
pub struct SseReader<S> {
    events: EventStream<Body<S>>,
    progress: Arc<Progress>,
    seen_event: bool,
    done: bool,
}

impl<S> SseReader<S> {
    /// `origin` is the run's start: arrival stamps are kept relative to it.
    pub fn new(body: S, caps: StreamCaps, origin: Instant) -> Self {
        let body = Body::new(body, caps, origin);
        let progress = body.progress();
        SseReader {
            events: EventStream::new(body),
            progress,
            seen_event: false,
            done: false,
        }
    }

    /// Bytes of body read so far.
    pub fn bytes_read(&self) -> usize {
        self.progress.bytes()
    }
}

impl<S, B, E> Stream for SseReader<S>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: Into<bytes::Bytes>,
    E: std::error::Error + 'static,
{
    type Item = Result<Event, SseError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let item = match Pin::new(&mut self.events).poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(ev))) => {
                self.seen_event = true;
                return Poll::Ready(Some(Ok(Event {
                    event: ev.event,
                    data: ev.data,
                    at: self.progress.last_arrival(),
                })));
            }
            Poll::Ready(Some(Err(EventStreamError::Transport(e)))) => Some(Err(e.into())),
            // The body layer lets only valid UTF-8 through; kept for completeness.
            Poll::Ready(Some(Err(EventStreamError::Utf8(e)))) => {
                Some(Err(SseError::Syntax(e.to_string())))
            }
            Poll::Ready(Some(Err(EventStreamError::Parser(e)))) => {
                Some(Err(SseError::Syntax(e.to_string())))
            }
            // An HTML page or plain text parses as ignorable fields: only the absence of any
            // event tells it from a stream.
            Poll::Ready(None) if !self.seen_event && self.progress.bytes() > 0 => {
                Some(Err(SseError::NoEvents {
                    bytes: self.progress.bytes(),
                    head: self.progress.head().to_string(),
                }))
            }
            Poll::Ready(None) => None,
        };
        self.done = true;
        Poll::Ready(item)
    }
}

/// Decodes a whole body given as reads (tests, benchmarks, fuzzing): the events' data, or the
/// first error.
pub fn decode<'a>(
    reads: impl IntoIterator<Item = &'a [u8]>,
    caps: StreamCaps,
) -> Result<Vec<String>, SseError> {
    let reader = SseReader::new(super::reads(reads), caps, Instant::now());
    super::drain_ready(reader)
        .into_iter()
        .map(|r| r.map(|e| e.data))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const CAPS: StreamCaps = StreamCaps {
        max_line: 1 << 16,
        max_body: 1 << 20,
    };

    fn decode_split(input: &[u8], cuts: &[usize]) -> Result<Vec<String>, SseError> {
        let mut reads = Vec::new();
        let mut last = 0;
        for &c in cuts.iter().chain(std::iter::once(&input.len())) {
            reads.push(&input[last..c]);
            last = c;
        }
        decode(reads, CAPS)
    }

    const STREAM: &str = ": keep-alive\n\ndata: {\"a\":\"héllo 世界\"}\n\ndata:{\"b\":1}\r\n\r\nevent: x\nid: 7\ndata: [DONE]\n\n";

    #[test]
    fn decodes_lf_crlf_comments_and_nospace() {
        let got = decode_split(STREAM.as_bytes(), &[]).unwrap();
        assert_eq!(got, vec!["{\"a\":\"héllo 世界\"}", "{\"b\":1}", "[DONE]"]);
    }

    #[test]
    fn any_split_points_give_the_same_events() {
        let bytes = STREAM.as_bytes();
        let whole = decode_split(bytes, &[]).unwrap();
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let n = rng.usize(1..8);
            let mut cuts: Vec<usize> = (0..n).map(|_| rng.usize(0..=bytes.len())).collect();
            cuts.sort_unstable();
            assert_eq!(decode_split(bytes, &cuts).unwrap(), whole, "cuts {cuts:?}");
        }
        // Every single-byte split, which also splits every multi-byte character.
        let every: Vec<usize> = (1..bytes.len()).collect();
        assert_eq!(decode_split(bytes, &every).unwrap(), whole);
    }

    #[test]
    fn lone_cr_ends_lines_and_multiline_data_joins() {
        let got = decode_split(b"data: a\rdata: b\r\rdata: c", &[8]).unwrap();
        assert_eq!(got, vec!["a\nb", "c"]);
    }

    #[test]
    fn a_page_that_is_not_sse_is_refused() {
        let err = decode_split(b"<html>oops</html>\n", &[]).unwrap_err();
        assert_eq!(
            err,
            SseError::NoEvents {
                bytes: 18,
                head: "<html>oops</html>".into()
            }
        );
        // An empty body is a stream that ended, not a page.
        assert_eq!(decode_split(b"", &[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn named_events_keep_their_type() {
        let reader = SseReader::new(
            crate::stream::reads([&b"event: ping\ndata: {}\n\ndata: x\n\n"[..]]),
            CAPS,
            Instant::now(),
        );
        let kinds: Vec<String> = crate::stream::drain_ready(reader)
            .into_iter()
            .map(|e| e.unwrap().event)
            .collect();
        assert_eq!(kinds, ["ping", "message"]);
    }

    #[test]
    fn caps_surface_as_errors() {
        let caps = StreamCaps {
            max_line: 8,
            max_body: 1 << 20,
        };
        let err = decode([&b"data: 0123456789"[..]], caps).unwrap_err();
        assert_eq!(err, SseError::Body(BodyError::LineTooLong { limit: 8 }));
    }

    /// Reads that arrive apart in time: each yields once, after its own delay.
    fn timed_reads(
        parts: Vec<(&'static [u8], Duration)>,
    ) -> impl Stream<Item = Result<&'static [u8], std::convert::Infallible>> + Unpin {
        Box::pin(futures_util::stream::unfold(
            parts.into_iter(),
            |mut it| async move {
                let (bytes, wait) = it.next()?;
                tokio::time::sleep(wait).await;
                Some((Ok(bytes), it))
            },
        ))
    }

    #[tokio::test]
    async fn events_carry_the_arrival_of_the_read_that_completed_them() {
        use futures_util::StreamExt;
        let t0 = Instant::now();
        let mut reader = SseReader::new(
            timed_reads(vec![
                (b"data: x", Duration::ZERO),
                (b"\n\ndata: y\n\ndata: z", Duration::from_millis(30)),
                // The end of the body completes `z`, but its bytes came with the read before.
            ]),
            CAPS,
            t0,
        );
        let mut got = Vec::new();
        while let Some(ev) = reader.next().await {
            got.push(ev.unwrap());
        }
        let datas: Vec<&str> = got.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(datas, ["x", "y", "z"]);
        assert!(got[0].at - t0 >= Duration::from_millis(30), "{got:?}");
        assert_eq!(got[0].at, got[1].at);
        assert_eq!(got[1].at, got[2].at);
        assert_eq!(reader.bytes_read(), 25);
    }
}
