//! AWS's binary event stream (`application/vnd.amazon.eventstream`, Bedrock's ConverseStream):
//! length-prefixed frames, each a prelude (total and header lengths, their CRC), headers, a
//! payload and the message's CRC. The frames are read by `aws-smithy-eventstream`, which checks
//! both CRCs; this reader stamps each read with its arrival (the read that completes a frame is
//! the frame's instant, as for SSE and NDJSON), caps the body, and judges a frame's length
//! before the frame is held: the crate only checks the prelude's CRC once the whole frame is
//! in, so a length from garbled bytes (an HTML page spliced in) would otherwise be waited for
//! up to the body cap. The prelude's CRC is checked here first, with the CRC crate the decoder
//! itself uses: a garbled prelude is not the protocol, an honest one over the frame cap is
//! oversized.
//!
//! An event becomes an [`Event`] named by its `:event-type` header, with its payload (JSON) as
//! data. An exception (`:message-type: exception`) is named `exception:<its :exception-type>`
//! and an error message (`:message-type: error`) `error:<its :error-code>`, with its
//! `:error-message` as data when it has no payload.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use aws_smithy_eventstream::frame::read_message_from;
use aws_smithy_types::event_stream::{HeaderValue, Message};
use bytes::{Buf, BytesMut};
use futures_util::Stream;

use super::{BodyError, Event, Progress, StreamCaps};

/// The prelude: total length, headers' length, and their CRC, four bytes each.
const PRELUDE: usize = 12;
/// The smallest frame: a prelude and the message CRC, with no headers and no payload.
const MIN_FRAME: usize = PRELUDE + 4;

/// Frames from a body, in order; ends after the first error.
pub(crate) struct EventStreamReader<S> {
    inner: S,
    caps: StreamCaps,
    progress: Arc<Progress>,
    buf: BytesMut,
    ready: VecDeque<Event>,
    /// An error met after the frames in `ready`, handed on once they are.
    failed: Option<BodyError>,
    done: bool,
}

impl<S> EventStreamReader<S> {
    /// `caps.max_line` bounds one frame, `caps.max_body` the whole body.
    pub(crate) fn new(inner: S, caps: StreamCaps, origin: Instant) -> Self {
        EventStreamReader {
            inner,
            caps,
            progress: Arc::new(Progress::new(origin)),
            buf: BytesMut::new(),
            ready: VecDeque::new(),
            failed: None,
            done: false,
        }
    }

    pub(crate) fn bytes_read(&self) -> usize {
        self.progress.bytes()
    }

    /// Takes every whole frame out of the buffer; a frame's length is judged as soon as its
    /// prelude is in.
    fn take_frames(&mut self, at: Instant) -> Result<(), BodyError> {
        while self.buf.len() >= PRELUDE {
            let total = frame_length(&self.buf[..PRELUDE])?;
            if total > self.caps.max_line {
                return Err(BodyError::FrameTooLarge {
                    claimed: total,
                    limit: self.caps.max_line,
                });
            }
            if self.buf.len() < total {
                // Room for the rest of the frame, once, rather than growth by each read.
                self.buf.reserve(total - self.buf.len());
                return Ok(());
            }
            let frame = self.buf.split_to(total).freeze();
            let message =
                read_message_from(frame).map_err(|e| BodyError::BadFrame(e.to_string()))?;
            self.ready.push_back(event_of(&message, at)?);
        }
        Ok(())
    }
}

/// The frame's total length from its prelude, once the prelude's CRC shows it is one.
fn frame_length(prelude: &[u8]) -> Result<usize, BodyError> {
    let word = |i: usize| (&prelude[i..i + 4]).get_u32();
    if crc32fast::hash(&prelude[..8]) != word(8) {
        return Err(BodyError::BadFrame(format!(
            "the prelude's checksum does not match: {:?}",
            crate::util::snippet(prelude)
        )));
    }
    let total = word(0) as usize;
    if total < MIN_FRAME {
        return Err(BodyError::BadFrame(format!(
            "a frame of {total} bytes is shorter than its prelude and checksum"
        )));
    }
    Ok(total)
}

/// A string header's value.
fn header<'m>(m: &'m Message, name: &str) -> Option<&'m str> {
    m.headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            HeaderValue::String(s) => Some(s.as_str()),
            _ => None,
        })
}

fn event_of(m: &Message, at: Instant) -> Result<Event, BodyError> {
    let data = std::str::from_utf8(m.payload())
        .map_err(|_| BodyError::BadFrame("a frame's payload is not UTF-8".into()))?;
    let (event, data) = match header(m, ":message-type").unwrap_or("event") {
        "exception" => (
            format!("exception:{}", header(m, ":exception-type").unwrap_or("")),
            data.to_string(),
        ),
        "error" => {
            let message = header(m, ":error-message").unwrap_or("");
            let data = match data.trim().is_empty() {
                true => serde_json::json!({ "message": message }).to_string(),
                false => data.to_string(),
            };
            (
                format!("error:{}", header(m, ":error-code").unwrap_or("")),
                data,
            )
        }
        _ => (
            header(m, ":event-type").unwrap_or("").to_string(),
            data.to_string(),
        ),
    };
    Ok(Event { event, data, at })
}

impl<S, B, E> Stream for EventStreamReader<S>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: Into<bytes::Bytes>,
    E: std::error::Error + 'static,
{
    type Item = Result<Event, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Poll::Ready(Some(Ok(ev)));
            }
            if let Some(e) = self.failed.take() {
                return Poll::Ready(Some(Err(e)));
            }
            if self.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => {
                    // The arrival is read before anything is done with the bytes.
                    let at = Instant::now();
                    self.progress.stamp(at);
                    let bytes: bytes::Bytes = bytes.into();
                    if let Err(e) = self.progress.count(&bytes, self.caps.max_body) {
                        self.done = true;
                        return Poll::Ready(Some(Err(e)));
                    }
                    self.buf.extend_from_slice(&bytes);
                    if let Err(e) = self.take_frames(at) {
                        // What was whole before the error still counts, then the error.
                        self.done = true;
                        self.failed = Some(e);
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    self.done = true;
                    let chain = crate::util::error_chain(&e);
                    return Poll::Ready(Some(Err(BodyError::Transport(chain))));
                }
                // A frame cut short by the end of the body is dropped: the stream ended
                // before it, and the reader judges what it had.
                Poll::Ready(None) => self.done = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{drain_ready, reads};
    use aws_smithy_eventstream::frame::write_message_to;
    use aws_smithy_types::event_stream::Header;

    const CAPS: StreamCaps = StreamCaps {
        max_line: 4096,
        max_body: 1 << 20,
    };

    fn frame(event_type: &'static str, payload: &str) -> Vec<u8> {
        let m = Message::new(payload.as_bytes().to_vec())
            .add_header(Header::new(
                ":event-type",
                HeaderValue::String(event_type.into()),
            ))
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String("event".into()),
            ));
        let mut out = Vec::new();
        write_message_to(&m, &mut out).unwrap();
        out
    }

    fn events(chunks: &[&[u8]], caps: StreamCaps) -> Vec<Result<(String, String), BodyError>> {
        let r = EventStreamReader::new(reads(chunks.iter().copied()), caps, Instant::now());
        drain_ready(r)
            .into_iter()
            .map(|e| e.map(|e| (e.event, e.data)))
            .collect()
    }

    #[test]
    fn frames_whatever_the_splits() {
        let body = [
            frame("messageStart", "{\"role\":\"assistant\"}"),
            frame("contentBlockDelta", "{\"delta\":{\"text\":\"世界\"}}"),
        ]
        .concat();
        let whole = events(&[&body], CAPS);
        assert_eq!(
            whole,
            vec![
                Ok(("messageStart".into(), "{\"role\":\"assistant\"}".into())),
                Ok((
                    "contentBlockDelta".into(),
                    "{\"delta\":{\"text\":\"世界\"}}".into()
                )),
            ]
        );
        let every: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(events(&every, CAPS), whole);
    }

    #[test]
    fn exceptions_and_errors_are_named_by_their_type() {
        let m = Message::new(&b"{\"message\":\"Too many requests\"}"[..])
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String("exception".into()),
            ))
            .add_header(Header::new(
                ":exception-type",
                HeaderValue::String("throttlingException".into()),
            ));
        let mut body = Vec::new();
        write_message_to(&m, &mut body).unwrap();
        let m = Message::new(&b""[..])
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String("error".into()),
            ))
            .add_header(Header::new(
                ":error-code",
                HeaderValue::String("InternalFailure".into()),
            ))
            .add_header(Header::new(
                ":error-message",
                HeaderValue::String("boom".into()),
            ));
        write_message_to(&m, &mut body).unwrap();
        assert_eq!(
            events(&[&body], CAPS),
            vec![
                Ok((
                    "exception:throttlingException".into(),
                    "{\"message\":\"Too many requests\"}".into()
                )),
                Ok((
                    "error:InternalFailure".into(),
                    "{\"message\":\"boom\"}".into()
                )),
            ]
        );
    }

    #[test]
    fn a_flipped_byte_is_not_the_protocol() {
        let mut body = frame("contentBlockDelta", "{\"delta\":{\"text\":\"Paris\"}}");
        let n = body.len();
        body[n - 10] ^= 1;
        let got = events(&[&body], CAPS);
        assert!(
            matches!(&got[..], [Err(BodyError::BadFrame(m))] if m.contains("checksum")),
            "{got:?}"
        );
    }

    #[test]
    fn spliced_text_is_not_the_protocol_and_is_not_waited_for() {
        // "<htm" read as a length would be about a gigabyte.
        let mut body = frame("messageStart", "{}");
        body.extend_from_slice(b"<html><body><h1>502 Bad Gateway</h1></body></html>\n");
        let got = events(&[&body], CAPS);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(matches!(&got[1], Err(BodyError::BadFrame(m)) if m.contains("prelude")));
    }

    #[test]
    fn a_frame_over_the_cap_is_refused_from_its_prelude() {
        let big = "x".repeat(10_000);
        let body = frame("contentBlockDelta", &big);
        // Only the prelude arrives: the claim alone is refused, nothing is held for it.
        let got = events(&[&body[..PRELUDE]], CAPS);
        assert!(
            matches!(
                &got[..],
                [Err(BodyError::FrameTooLarge { limit: 4096, .. })]
            ),
            "{got:?}"
        );
    }

    #[test]
    fn body_cap_and_a_cut_frame() {
        let body = frame("contentBlockDelta", "{\"delta\":{\"text\":\"Paris\"}}");
        let caps = StreamCaps {
            max_line: 4096,
            max_body: 20,
        };
        assert_eq!(
            events(&[&body], caps),
            vec![Err(BodyError::BodyTooLarge { limit: 20 })]
        );
        // The body ends inside the frame: no event, no error; the reader judges the ending.
        assert_eq!(events(&[&body[..body.len() - 1]], CAPS), vec![]);
    }
}
