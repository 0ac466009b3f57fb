//! A response body → protocol events, stamped and capped. [`Body`] is the layer every protocol
//! reader shares: it stamps each read with the instant its bytes arrived (one monotonic clock,
//! read before any parsing), refuses to grow past the body cap or one endless line, and stops at
//! the first byte that is not UTF-8. The protocol parsers sit on top of it: [`sse`] on
//! `eventsource-stream`, and [`ndjson`] (one JSON document per line). AWS's binary event stream
//! ([`eventstream`], on `aws-smithy-eventstream`) has no lines: it shares the stamps and the body
//! cap, and caps each frame as the others cap a line. Nothing here knows HTTP, JSON or checks.

pub(crate) mod eventstream;
pub(crate) mod ndjson;
pub mod sse;

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;

/// One event of a stream: its type (SSE's event name; `message` when unnamed, and for NDJSON),
/// its data, and when the read that completed it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub event: String,
    pub data: String,
    pub at: Instant,
}

/// Hard limits on what a server may send, so a hostile one cannot exhaust the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCaps {
    /// The longest line (between two line ends) the reader will hold.
    pub max_line: usize,
    /// The most bytes the body may carry.
    pub max_body: usize,
}

/// Why a body was refused before its protocol was even read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("a line exceeded {limit} bytes")]
    LineTooLong { limit: usize },
    #[error("the response exceeded {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("the response is not valid UTF-8 (byte {offset})")]
    InvalidUtf8 { offset: usize },
    #[error("an event-stream frame claimed {claimed} bytes, over the {limit}-byte cap")]
    FrameTooLarge { claimed: usize, limit: usize },
    #[error("not an event-stream frame: {0}")]
    BadFrame(String),
    #[error("{0}")]
    Transport(String),
}

/// What the [`Body`] layer has seen, shared with the reader on top so it can stamp the events
/// it completes: an event completes when the read that carried its last byte arrives.
#[derive(Debug)]
pub(crate) struct Progress {
    origin: Instant,
    bytes: AtomicUsize,
    /// Arrival of the latest read, in nanoseconds after `origin`.
    last_arrival: AtomicU64,
    /// The start of the body, printable, for an error that must show what came instead.
    head: OnceLock<String>,
}

impl Progress {
    fn new(origin: Instant) -> Self {
        Progress {
            origin,
            bytes: AtomicUsize::new(0),
            last_arrival: AtomicU64::new(0),
            head: OnceLock::new(),
        }
    }

    /// Bytes of body read so far.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// When the latest read arrived (`origin` before any).
    pub(crate) fn last_arrival(&self) -> Instant {
        self.origin + Duration::from_nanos(self.last_arrival.load(Ordering::Relaxed))
    }

    /// The first bytes of the body, printable.
    pub(crate) fn head(&self) -> &str {
        self.head.get().map_or("", String::as_str)
    }

    /// Counts a read's bytes (keeping the body's first ones, printable) and holds them to the
    /// body cap; the bytes read so far, this read's included.
    fn count(&self, bytes: &[u8], max_body: usize) -> Result<usize, BodyError> {
        if !bytes.is_empty() {
            self.head.get_or_init(|| crate::util::snippet(bytes));
        }
        let seen = self.bytes().saturating_add(bytes.len());
        self.bytes.store(seen, Ordering::Relaxed);
        if seen > max_body {
            return Err(BodyError::BodyTooLarge { limit: max_body });
        }
        Ok(seen)
    }

    fn stamp(&self, at: Instant) {
        let nanos =
            u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX);
        self.last_arrival.store(nanos, Ordering::Relaxed);
    }
}

/// What [`Body`] hands on: the server's bytes, whole lines a couple at a time (they keep the
/// arrival of the read that ended them), or the blank line that closes the body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    Bytes(Bytes),
    End,
}

impl AsRef<[u8]> for Read {
    fn as_ref(&self) -> &[u8] {
        match self {
            Read::Bytes(b) => b.as_ref(),
            Read::End => b"\n\n",
        }
    }
}

/// The capping, stamping layer over a body's byte stream. At the end of the body it yields one
/// blank line, so a last event that the server closed without its terminating blank line still
/// counts (many servers close right after `data: [DONE]`); that line carries no new arrival.
pub(crate) struct Body<S> {
    inner: S,
    caps: StreamCaps,
    progress: Arc<Progress>,
    line_len: usize,
    /// Up to three bytes of a UTF-8 character split across reads.
    utf8_carry: Vec<u8>,
    /// What is left of the last read, handed on two lines at a time: eventsource-stream copies
    /// its buffer's remainder after every line it takes, so a read of many events handed whole
    /// costs time in proportion to the read's size times its lines.
    rest: Bytes,
    /// A line not yet ended, held back until it is: eventsource-stream re-reads an unfinished
    /// line from its start at every read, so a long line handed on piece by piece costs time in
    /// proportion to its length squared (a 1 MiB line in 4 KiB reads took 147 ms of a runtime
    /// thread, and every other run's arrival stamps waited behind it). Bounded by the line cap.
    partial: BytesMut,
    /// The server ended the body: what is held back goes on, then the closing blank line.
    finished: bool,
    /// Nothing more to hand on (after the closing line or an error).
    ended: bool,
}

/// Where each line of `bytes` ends (the index after its end), `\r\n` counting once: a `\r`
/// ends a line unless a `\n` follows it in the same bytes.
fn line_ends(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memchr2_iter(b'\n', b'\r', bytes)
        .filter(|&i| bytes[i] == b'\n' || bytes.get(i + 1) != Some(&b'\n'))
        .map(|i| i + 1)
}

impl<S> Body<S> {
    pub(crate) fn new(inner: S, caps: StreamCaps, origin: Instant) -> Self {
        Body {
            inner,
            caps,
            progress: Arc::new(Progress::new(origin)),
            line_len: 0,
            utf8_carry: Vec::new(),
            rest: Bytes::new(),
            partial: BytesMut::new(),
            finished: false,
            ended: false,
        }
    }

    pub(crate) fn progress(&self) -> Arc<Progress> {
        self.progress.clone()
    }

    /// Checks one read against the caps and UTF-8; the read is accepted whole or not at all.
    fn admit(&mut self, bytes: &[u8]) -> Result<(), BodyError> {
        let seen = self.progress.count(bytes, self.caps.max_body)?;
        // Every line, also one that starts and ends inside this read, so where the cap trips
        // does not depend on how the body was split into reads.
        let mut run = self.line_len;
        for (i, piece) in bytes.split(|&b| b == b'\n' || b == b'\r').enumerate() {
            run = if i == 0 {
                run + piece.len()
            } else {
                piece.len()
            };
            if run > self.caps.max_line {
                return Err(BodyError::LineTooLong {
                    limit: self.caps.max_line,
                });
            }
        }
        self.line_len = run;
        self.check_utf8(bytes, seen - bytes.len())
    }

    /// Only a character split at the end of a read may be incomplete; any other invalid byte is
    /// refused at once rather than buffered by the parser up to the body cap.
    fn check_utf8(&mut self, bytes: &[u8], offset: usize) -> Result<(), BodyError> {
        let joined;
        let (data, base) = if self.utf8_carry.is_empty() {
            (bytes, offset)
        } else {
            joined = [self.utf8_carry.as_slice(), bytes].concat();
            (&joined[..], offset - self.utf8_carry.len())
        };
        match std::str::from_utf8(data) {
            Ok(_) => {
                self.utf8_carry.clear();
                Ok(())
            }
            // An incomplete last character (at most three bytes) waits for the next read.
            Err(e) if e.error_len().is_none() => {
                self.utf8_carry = data[e.valid_up_to()..].to_vec();
                Ok(())
            }
            Err(e) => Err(BodyError::InvalidUtf8 {
                offset: base + e.valid_up_to(),
            }),
        }
    }
}

impl<S, B, E> Stream for Body<S>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: Into<bytes::Bytes>,
    E: std::error::Error + 'static,
{
    type Item = Result<Read, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.ended {
                return Poll::Ready(None);
            }
            if !self.rest.is_empty() {
                // Two whole lines at a time: an event's data line and the blank line after it.
                if let Some(cut) = line_ends(&self.rest).take(2).last() {
                    return Poll::Ready(Some(Ok(Read::Bytes(self.rest.split_to(cut)))));
                }
                if self.finished {
                    let last = std::mem::take(&mut self.rest);
                    return Poll::Ready(Some(Ok(Read::Bytes(last))));
                }
                let unended = std::mem::take(&mut self.rest);
                self.partial.extend_from_slice(&unended);
            }
            if self.finished {
                self.ended = true;
                return Poll::Ready(Some(Ok(Read::End)));
            }
            match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => {
                    // The arrival is read before anything is done with the bytes.
                    let at = Instant::now();
                    self.progress.stamp(at);
                    // Reqwest hands over `Bytes`: kept as they are, not copied.
                    let bytes: Bytes = bytes.into();
                    if let Err(e) = self.admit(&bytes) {
                        self.ended = true;
                        return Poll::Ready(Some(Err(e)));
                    }
                    if self.partial.is_empty() {
                        self.rest = bytes;
                        continue;
                    }
                    // Only the new bytes are searched for the end of the held-back line.
                    let end = line_ends(&bytes).next();
                    match end {
                        None => self.partial.extend_from_slice(&bytes),
                        Some(cut) => {
                            self.partial.extend_from_slice(&bytes[..cut]);
                            self.rest = bytes.slice(cut..);
                            let line = self.partial.split().freeze();
                            return Poll::Ready(Some(Ok(Read::Bytes(line))));
                        }
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    self.ended = true;
                    let chain = crate::util::error_chain(&e);
                    return Poll::Ready(Some(Err(BodyError::Transport(chain))));
                }
                Poll::Ready(None) => {
                    if !self.utf8_carry.is_empty() {
                        self.ended = true;
                        let offset = self.progress.bytes() - self.utf8_carry.len();
                        return Poll::Ready(Some(Err(BodyError::InvalidUtf8 { offset })));
                    }
                    self.finished = true;
                    self.rest = self.partial.split().freeze();
                }
            }
        }
    }
}

/// A whole body given as reads, for tests, benchmarks and fuzzing: a stream that is always
/// ready, so it can be drained without a runtime.
pub fn reads<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Unpin {
    futures_util::stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect::<Vec<_>>(),
    )
}

/// Drains a stream that never waits (such as [`reads`]) without a runtime.
pub fn drain_ready<S: Stream + Unpin>(mut stream: S) -> Vec<S::Item> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut out = Vec::new();
    while let Poll::Ready(Some(item)) = Pin::new(&mut stream).poll_next(&mut cx) {
        out.push(item);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit_all(chunks: &[&[u8]], caps: StreamCaps) -> Result<Vec<u8>, BodyError> {
        let body = Body::new(reads(chunks.iter().copied()), caps, Instant::now());
        let mut all = Vec::new();
        for r in drain_ready(body) {
            all.extend_from_slice(r?.as_ref());
        }
        Ok(all)
    }

    const CAPS: StreamCaps = StreamCaps {
        max_line: 1024,
        max_body: 1 << 20,
    };

    #[test]
    fn characters_split_across_reads_pass_and_bad_bytes_stop_at_once() {
        let text = "data: héllo 世界 🎉\n\n".as_bytes();
        for cut in 1..text.len() {
            let (a, b) = text.split_at(cut);
            assert!(admit_all(&[a, b], CAPS).is_ok(), "cut at {cut}");
        }
        let every: Vec<&[u8]> = text.chunks(1).collect();
        assert!(admit_all(&every, CAPS).is_ok());
        let err = admit_all(&[b"data: ok\n", b"\xff\xfe", b"more"], CAPS).unwrap_err();
        assert_eq!(err, BodyError::InvalidUtf8 { offset: 9 });
        // A character cut short by the end of the body is not UTF-8 either.
        let err = admit_all(&[b"data: \xe4\xb8"], CAPS).unwrap_err();
        assert_eq!(err, BodyError::InvalidUtf8 { offset: 6 });
    }

    #[test]
    fn endless_line_hits_the_line_cap_without_growing() {
        let chunk = [b'x'; 100];
        let body = Body::new(
            reads(std::iter::repeat_n(&chunk[..], 1000)),
            CAPS,
            Instant::now(),
        );
        let items = drain_ready(body);
        assert!(matches!(
            items.last(),
            Some(Err(BodyError::LineTooLong { limit: 1024 }))
        ));
        assert!(items.len() <= 11, "stopped after {} reads", items.len());
    }

    #[test]
    fn a_long_line_goes_on_whole_once_it_ends() {
        // The parser re-reads an unfinished line at every piece it gets: a line must reach it
        // once, whatever the reads, or a long one costs time in proportion to its square.
        let mut body = b"data: ".to_vec();
        body.extend(std::iter::repeat_n(b'x', 100 * 1024));
        body.extend_from_slice(b"\r\n\r\ndata: y\n\n");
        let pieces: Vec<&[u8]> = body.chunks(1024).collect();
        let items: Vec<Read> = drain_ready(Body::new(reads(pieces), CAPS_BIG, Instant::now()))
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let longest = items.iter().map(|r| r.as_ref().len()).max().unwrap();
        assert!(
            longest >= 100 * 1024,
            "the line went on in pieces: {longest} bytes at most"
        );
        assert!(items.len() <= 6, "{} items", items.len());
        let all: Vec<u8> = items.iter().flat_map(|r| r.as_ref().to_vec()).collect();
        assert_eq!(all, [&body[..], b"\n\n"].concat());
    }

    const CAPS_BIG: StreamCaps = StreamCaps {
        max_line: 1 << 20,
        max_body: 1 << 20,
    };

    #[test]
    fn body_cap() {
        let caps = StreamCaps {
            max_line: 1024,
            max_body: 10,
        };
        let err = admit_all(&[b"data: 1234", b"5678\n\n"], caps).unwrap_err();
        assert_eq!(err, BodyError::BodyTooLarge { limit: 10 });
    }

    #[test]
    fn the_end_adds_one_blank_line() {
        assert_eq!(admit_all(&[b"data: x"], CAPS).unwrap(), b"data: x\n\n");
    }
}
