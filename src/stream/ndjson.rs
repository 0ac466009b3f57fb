//! Newline-delimited JSON (Ollama's native stream): every non-empty line over the [`Body`]
//! layer is one event, stamped with the arrival of the read that completed it. The framing is
//! a split on `\n`, written here: a crate for it (tokio-util's `LinesCodec`) would need an
//! `AsyncRead` adapter and brings more than it saves, while the caps, stamps and UTF-8 check
//! that matter already live in [`Body`].

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_util::Stream;

use super::{Body, BodyError, Event, Progress, Read, StreamCaps};

/// Lines from a body, in order; ends after the first error.
pub(crate) struct NdjsonReader<S> {
    body: Body<S>,
    progress: Arc<Progress>,
    partial: Vec<u8>,
    ready: VecDeque<Event>,
    done: bool,
}

impl<S> NdjsonReader<S> {
    pub(crate) fn new(body: S, caps: StreamCaps, origin: Instant) -> Self {
        let body = Body::new(body, caps, origin);
        let progress = body.progress();
        NdjsonReader {
            body,
            progress,
            partial: Vec::new(),
            ready: VecDeque::new(),
            done: false,
        }
    }

    pub(crate) fn bytes_read(&self) -> usize {
        self.progress.bytes()
    }

    /// Splits what arrived into complete lines; the rest waits for the next read.
    fn take_lines(&mut self, bytes: &[u8], at: Instant) {
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..i]);
            rest = &rest[i + 1..];
            let line = std::mem::take(&mut self.partial);
            // Body lets only whole UTF-8 characters through by the end of a line.
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if !text.is_empty() {
                self.ready.push_back(Event {
                    event: "message".into(),
                    data: text.to_string(),
                    at,
                });
            }
        }
        self.partial.extend_from_slice(rest);
    }
}

impl<S, B, E> Stream for NdjsonReader<S>
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
            if self.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut self.body).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(Read::Bytes(b)))) => {
                    let at = self.progress.last_arrival();
                    self.take_lines(b.as_ref(), at);
                }
                // A last line without its newline still counts; its bytes came with the
                // read before.
                Poll::Ready(Some(Ok(Read::End))) => {
                    let at = self.progress.last_arrival();
                    self.take_lines(b"\n", at);
                }
                Poll::Ready(Some(Err(e))) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => self.done = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{drain_ready, reads};

    const CAPS: StreamCaps = StreamCaps {
        max_line: 1024,
        max_body: 1 << 20,
    };

    fn lines(chunks: &[&[u8]]) -> Vec<Result<String, BodyError>> {
        let r = NdjsonReader::new(reads(chunks.iter().copied()), CAPS, Instant::now());
        drain_ready(r)
            .into_iter()
            .map(|e| e.map(|e| e.data))
            .collect()
    }

    #[test]
    fn lines_whatever_the_splits() {
        let body = "{\"a\":\"世界\"}\n\r\n{\"b\":2}\n{\"c\":3}".as_bytes();
        let whole = lines(&[body]);
        assert_eq!(
            whole,
            vec![
                Ok("{\"a\":\"世界\"}".to_string()),
                Ok("{\"b\":2}".into()),
                Ok("{\"c\":3}".into())
            ]
        );
        let every: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(lines(&every), whole);
    }

    #[test]
    fn an_endless_line_hits_the_cap() {
        let long = vec![b'x'; 2000];
        let got = lines(&[&long]);
        assert_eq!(got, vec![Err(BodyError::LineTooLong { limit: 1024 })]);
    }
}
