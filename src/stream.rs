//! Bytes → server-sent events, with arrival timestamps and hard caps. Knows nothing of HTTP,
//! JSON or checks: it only splits what arrived into lines and events, and refuses to grow without
//! bound (one endless line, or a body larger than the cap, is an error, not an allocation).

use std::time::Instant;

/// One dispatched server-sent event: the joined `data:` lines and when its last line arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub data: String,
    pub at: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("a line exceeded {limit} bytes")]
    LineTooLong { limit: usize },
    #[error("the response exceeded {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("line {line} is not server-sent-event syntax: {snippet:?}")]
    NotSse { line: u64, snippet: String },
    #[error("an event is not valid UTF-8")]
    InvalidUtf8,
}

/// Incremental SSE decoder. Accepts `data:` with or without the space, `\n`, `\r\n` or `\r`
/// line ends, comment lines (`:` keep-alives), and the `event`/`id`/`retry` fields; any other
/// non-empty line is not the protocol and is reported, so an HTML error page served with a 200
/// is never mistaken for a quiet stream.
#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    data_at: Option<Instant>,
    skip_lf: bool,
    lines_seen: u64,
    bytes_seen: usize,
    max_line: usize,
    max_body: usize,
}

impl SseDecoder {
    pub fn new(max_line: usize, max_body: usize) -> Self {
        Self {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            data_at: None,
            skip_lf: false,
            lines_seen: 0,
            bytes_seen: 0,
            max_line,
            max_body,
        }
    }

    /// Bytes read so far (headers excluded).
    pub fn bytes_seen(&self) -> usize {
        self.bytes_seen
    }

    /// Feeds one read. `at` is when these bytes arrived; every event completed by them is
    /// stamped with it.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        at: Instant,
        out: &mut Vec<SseEvent>,
    ) -> Result<(), SseError> {
        self.bytes_seen = self.bytes_seen.saturating_add(bytes.len());
        if self.bytes_seen > self.max_body {
            return Err(SseError::BodyTooLarge {
                limit: self.max_body,
            });
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    self.push_line_bytes(&rest[..i])?;
                    self.skip_lf = rest[i] == b'\r';
                    rest = &rest[i + 1..];
                    self.end_line(at, out)?;
                }
                None => {
                    self.push_line_bytes(rest)?;
                    rest = &[];
                }
            }
        }
        Ok(())
    }

    /// End of body: a last line without its terminator, and a last event without its blank line,
    /// still count (many servers close right after `data: [DONE]`).
    pub fn finish(&mut self, at: Instant, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            self.end_line(at, out)?;
        }
        self.dispatch(out)
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > self.max_line {
            return Err(SseError::LineTooLong {
                limit: self.max_line,
            });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, at: Instant, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.lines_seen += 1;
        let line = std::mem::take(&mut self.line);
        let result = self.handle_line(&line, at, out);
        // Reuse the allocation for the next line.
        self.line = line;
        self.line.clear();
        result
    }

    fn handle_line(
        &mut self,
        line: &[u8],
        at: Instant,
        out: &mut Vec<SseEvent>,
    ) -> Result<(), SseError> {
        if line.is_empty() {
            return self.dispatch(out);
        }
        if line[0] == b':' {
            return Ok(()); // comment / keep-alive
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                if self.data.len() + value.len() > self.max_line {
                    return Err(SseError::LineTooLong {
                        limit: self.max_line,
                    });
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
                self.data_at = Some(at);
                Ok(())
            }
            b"event" | b"id" | b"retry" => Ok(()),
            _ => Err(SseError::NotSse {
                line: self.lines_seen,
                snippet: snippet(line),
            }),
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.has_data {
            return Ok(());
        }
        self.has_data = false;
        let at = self
            .data_at
            .take()
            .expect("data_at is set whenever has_data is");
        let data =
            String::from_utf8(std::mem::take(&mut self.data)).map_err(|_| SseError::InvalidUtf8)?;
        out.push(SseEvent { data, at });
        Ok(())
    }
}

/// A short, printable excerpt of foreign bytes for an error message.
pub fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]);
    text.chars().filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_split(input: &[u8], cuts: &[usize]) -> Result<Vec<String>, SseError> {
        let mut d = SseDecoder::new(1 << 16, 1 << 20);
        let mut out = Vec::new();
        let now = Instant::now();
        let mut last = 0;
        for &c in cuts.iter().chain(std::iter::once(&input.len())) {
            d.feed(&input[last..c], now, &mut out)?;
            last = c;
        }
        d.finish(now, &mut out)?;
        Ok(out.into_iter().map(|e| e.data).collect())
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
    fn garbage_is_not_sse() {
        let err = decode_split(b"<html>oops</html>\n", &[]).unwrap_err();
        assert!(matches!(err, SseError::NotSse { line: 1, .. }), "{err:?}");
    }

    #[test]
    fn endless_line_hits_the_cap_without_growing() {
        let mut d = SseDecoder::new(1024, usize::MAX);
        let mut out = Vec::new();
        let chunk = [b'x'; 100];
        let now = Instant::now();
        let mut fed = 0;
        let err = loop {
            match d.feed(&chunk, now, &mut out) {
                Ok(()) => fed += 100,
                Err(e) => break e,
            }
        };
        assert_eq!(err, SseError::LineTooLong { limit: 1024 });
        assert!(fed <= 1024);
    }

    #[test]
    fn body_cap() {
        let mut d = SseDecoder::new(1024, 10);
        let mut out = Vec::new();
        let err = d
            .feed(b"data: 12345678\n\n", Instant::now(), &mut out)
            .unwrap_err();
        assert_eq!(err, SseError::BodyTooLarge { limit: 10 });
    }

    #[test]
    fn events_carry_the_arrival_of_their_last_data_line() {
        let mut d = SseDecoder::new(1024, 1 << 20);
        let mut out = Vec::new();
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_millis(5);
        d.feed(b"data: x", t0, &mut out).unwrap();
        d.feed(b"\n\n", t1, &mut out).unwrap();
        assert_eq!(
            out,
            vec![SseEvent {
                data: "x".into(),
                at: t1
            }]
        );
    }
}
