//! Server-sent events: `eventsource-stream` parses them over the [`Body`] layer; this file adds
//! what a probe needs beyond the parser — each event stamped with the arrival of the read that
//! completed it, a line that is no SSE field (an HTML error line a broken proxy spliced in)
//! refused as not the protocol, and so is a body that carried bytes but not one event.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use eventsource_stream::{EventStream, EventStreamError};
use futures_util::Stream;

use super::{Body, BodyError, Event, Progress, Read, StreamCaps};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error("the body carried {bytes} bytes but no server-sent event: {head:?}")]
    NoEvents { bytes: usize, head: String },
    #[error("not server-sent events: {0}")]
    Syntax(String),
    /// The parser would skip such a line as an unknown field; a stream that carries one is
    /// broken, whichever flavor reads it.
    #[error("a line that is not server-sent events: {0:?}")]
    ForeignLine(String),
}

/// The fields a line may start with; anything else but a comment or a blank line is foreign.
const FIELDS: [&[u8]; 4] = [b"data", b"event", b"id", b"retry"];
const LONGEST_FIELD: usize = 5;
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Where the scan of the current line stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// Nothing of it seen yet.
    Start,
    /// Reading its field name.
    Name,
    /// Its field is known (or it is a comment): the rest does not matter.
    Rest,
}

/// The [`Body`]'s reads, passed on unchanged up to the first line that is not SSE; the bytes
/// before that line still reach the parser, then the error comes.
struct SseLines<S> {
    inner: Body<S>,
    line: Line,
    name: Vec<u8>,
    /// The last byte was a CR: a LF right after it ends nothing more.
    after_cr: bool,
    offset: usize,
    /// The bytes of a byte-order mark taken from the start of the body.
    bom: usize,
    pending: Option<SseError>,
}

impl<S> SseLines<S> {
    fn new(inner: Body<S>) -> Self {
        SseLines {
            inner,
            line: Line::Start,
            name: Vec::with_capacity(LONGEST_FIELD + 1),
            after_cr: false,
            offset: 0,
            bom: 0,
            pending: None,
        }
    }

    /// The index in `bytes` where the first foreign line starts, or the start of `bytes` when it
    /// began in an earlier read.
    fn scan(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut line_start = 0;
        let mut i = 0;
        while i < bytes.len() {
            if self.line == Line::Rest {
                // The rest of a line whose field is known does not matter: on to its end, with
                // a vector search instead of a look at every byte of an event's data.
                let Some(end) = memchr::memchr2(b'\n', b'\r', &bytes[i..]) else {
                    self.offset += bytes.len() - i;
                    return None;
                };
                self.offset += end;
                i += end;
            }
            let b = bytes[i];
            i += 1;
            self.offset += 1;
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                line_start = i;
                continue;
            }
            if b == b'\n' || b == b'\r' {
                if self.line == Line::Name && !self.known() {
                    return Some(line_start);
                }
                self.line = Line::Start;
                self.name.clear();
                self.after_cr = b == b'\r';
                line_start = i;
                continue;
            }
            match self.line {
                Line::Start if b == b':' => self.line = Line::Rest,
                Line::Start | Line::Name if b == b':' => {
                    if !self.known() {
                        return Some(line_start);
                    }
                    self.line = Line::Rest;
                }
                Line::Start | Line::Name => {
                    self.line = Line::Name;
                    self.name.push(b);
                    if self.name.len() > LONGEST_FIELD {
                        return Some(line_start);
                    }
                }
                Line::Rest => {}
            }
        }
        None
    }

    fn known(&self) -> bool {
        FIELDS.contains(&self.name.as_slice())
    }
}

impl<S, B, E> Stream for SseLines<S>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: Into<bytes::Bytes>,
    E: std::error::Error + 'static,
{
    type Item = Result<Read, SseError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(e) = self.pending.take() {
            return Poll::Ready(Some(Err(e)));
        }
        let mut read = match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(Read::Bytes(b)))) => b,
            other => return other.map(|o| o.map(|r| r.map_err(SseError::from))),
        };
        // A byte-order mark may open the body. It is taken out here: the parser slices a mark
        // split across reads in the middle of a character and panics.
        let opening = self.offset == self.bom;
        let bom = BOM
            .get(self.bom..)
            .filter(|_| opening)
            .unwrap_or_default()
            .iter()
            .zip(read.iter())
            .take_while(|(m, b)| m == b)
            .count();
        if bom > 0 {
            self.offset += bom;
            self.bom += bom;
            read = read.slice(bom..);
        }
        let Some(start) = self.scan(&read) else {
            return Poll::Ready(Some(Ok(Read::Bytes(read))));
        };
        let rest = &read[start..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .unwrap_or(rest.len());
        let line = String::from_utf8_lossy(&rest[..end.min(80)]).into_owned();
        let err = SseError::ForeignLine(line);
        if start == 0 {
            return Poll::Ready(Some(Err(err)));
        }
        self.pending = Some(err);
        Poll::Ready(Some(Ok(Read::Bytes(read.slice(..start)))))
    }
}

/// Events from a body, in order; ends after the first error.
pub struct SseReader<S> {
    events: EventStream<SseLines<S>>,
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
            events: EventStream::new(SseLines::new(body)),
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
            Poll::Ready(Some(Err(EventStreamError::Transport(e)))) => Some(Err(e)),
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
        assert_eq!(err, SseError::ForeignLine("<html>oops</html>".into()));
        // Comments only: no foreign line, but no event either.
        let err = decode_split(b": hello\n\n", &[]).unwrap_err();
        assert_eq!(
            err,
            SseError::NoEvents {
                bytes: 9,
                head: ": hello".into()
            }
        );
        // An empty body is a stream that ended, not a page.
        assert_eq!(decode_split(b"", &[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_line_spliced_into_a_stream_is_refused_after_the_events_before_it() {
        let body = b"data: a\n\n<html><body>502</body></html>\ndata: b\n\n";
        let reader = SseReader::new(crate::stream::reads([&body[..]]), CAPS, Instant::now());
        let got: Vec<Result<String, SseError>> = crate::stream::drain_ready(reader)
            .into_iter()
            .map(|r| r.map(|e| e.data))
            .collect();
        assert_eq!(
            got,
            vec![
                Ok("a".to_string()),
                Err(SseError::ForeignLine(
                    "<html><body>502</body></html>".into()
                ))
            ]
        );
        // Split anywhere, the verdict is the same.
        for cut in 1..body.len() {
            let err = decode_split(body, &[cut]).unwrap_err();
            assert!(
                matches!(err, SseError::ForeignLine(_)),
                "cut {cut}: {err:?}"
            );
        }
        // Short foreign names, names without a colon, and a name that only begins as a field.
        for line in ["x: 1", "dat", "datum: 1", "Data: 1", " data: 1", "ids: 2"] {
            let body = format!("data: a\n\n{line}\n\n");
            assert!(
                matches!(
                    decode([body.as_bytes()], CAPS),
                    Err(SseError::ForeignLine(_))
                ),
                "{line}"
            );
        }
    }

    #[test]
    fn every_field_comments_a_bom_and_bare_names_pass() {
        let body = "\u{feff}: hi\r\nretry: 10\r\nid\r\nevent\r\nid: 3\r\ndata\r\ndata:x\r\n\r\n";
        assert_eq!(decode_split(body.as_bytes(), &[]).unwrap(), vec!["\nx"]);
        // Only at the very start is it a mark.
        assert!(decode_split("data: a\n\u{feff}data: b\n\n".as_bytes(), &[9, 10]).is_err());
        for cut in 1..body.len() {
            assert_eq!(
                decode_split(body.as_bytes(), &[cut]).unwrap(),
                vec!["\nx"],
                "cut {cut}"
            );
        }
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
