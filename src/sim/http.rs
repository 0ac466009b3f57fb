//! The sim's own HTTP/1.1, just enough to misbehave on purpose (a maintained server would not
//! let it): read a request (head and Content-Length body, both capped; the head within the
//! listener's header timeout), write a response whole or with chunked transfer encoding so each
//! write reaches the client as its own piece, or reset the connection mid-body.

use std::io;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::conn::Conn;

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

/// A header's value by case-insensitive name.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}
/// Reads one request; `Ok(None)` when the client closed the connection between requests.
///
/// The head must be whole within `header_timeout` of this call, that is of the connection's
/// start or the end of the previous response: hyper counts its header timeout the same way, so
/// the sim's idle keep-alive connections last as long as the daemon's.
///
/// Bytes that cannot begin a request (a TLS ClientHello sent to `https://` on this plain-HTTP
/// port) get a 400 at once and close the connection, as hyper, uvicorn and nginx answer them.
pub async fn read_request<S: AsyncRead + AsyncWrite + Unpin>(
    sock: &mut S,
    buf: &mut Vec<u8>,
    header_timeout: Duration,
) -> io::Result<Option<HttpRequest>> {
    let head_end = match tokio::time::timeout(header_timeout, read_head(sock, buf)).await {
        Ok(Ok(Some(i))) => i,
        Ok(Ok(None)) => return Ok(None),
        Ok(Err(e)) if e.kind() == io::ErrorKind::InvalidData && !starts_a_request(buf) => {
            let _ = sock
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            let _ = sock.shutdown().await;
            return Err(e);
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request head not received within the header timeout",
            ))
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    if len > MAX_BODY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "request body too large",
        ));
    }
    buf.drain(..head_end + 4);
    while buf.len() < len {
        if read_some(sock, buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    let body = buf.drain(..len).collect();
    Ok(Some(HttpRequest {
        method,
        path,
        headers,
        body,
    }))
}

/// Reads until `buf` holds a whole head; its end, or `None` if the client closed before
/// sending anything.
async fn read_head<S: AsyncRead + Unpin>(
    sock: &mut S,
    buf: &mut Vec<u8>,
) -> io::Result<Option<usize>> {
    loop {
        if !starts_a_request(buf) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not an HTTP request (a TLS handshake?)",
            ));
        }
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(i));
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
        if read_some(sock, buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
    }
}

/// Whether `buf` can be the start of a request: empty, or a method's first letter.
fn starts_a_request(buf: &[u8]) -> bool {
    buf.first().is_none_or(u8::is_ascii_uppercase)
}

/// One read appended to `buf`; 0 at end of stream.
async fn read_some<S: AsyncRead + Unpin>(sock: &mut S, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut tmp = [0u8; 8192];
    let n = sock.read(&mut tmp).await?;
    buf.extend_from_slice(&tmp[..n]);
    Ok(n)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// A whole response with a Content-Length body.
pub async fn respond<S: AsyncWrite + Unpin>(
    sock: &mut S,
    status: u16,
    content_type: &str,
    extra: &[(&str, String)],
    body: &[u8],
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n",
        reason(status),
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut all = head.into_bytes();
    all.extend_from_slice(body);
    sock.write_all(&all).await?;
    sock.flush().await
}

/// A value's JSON bytes.
pub(super) fn json_bytes(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize")
}

/// A whole JSON response.
pub(super) async fn respond_json<S: AsyncWrite + Unpin>(
    sock: &mut S,
    status: u16,
    extra: &[(&str, String)],
    v: &serde_json::Value,
) -> io::Result<()> {
    respond(sock, status, "application/json", extra, &json_bytes(v)).await
}

/// An OpenAI-style error answer: `{"error": {"message", "type"}}`.
pub(super) async fn respond_error<S: AsyncWrite + Unpin>(
    sock: &mut S,
    status: u16,
    kind: &str,
    message: &str,
) -> io::Result<()> {
    let v = serde_json::json!({"error": {"message": message, "type": kind}});
    respond_json(sock, status, &[], &v).await
}

/// A streamed response: each `write` is one chunk of the chunked encoding, flushed at once.
pub struct Chunked<'a> {
    pub sock: &'a mut Conn,
    pub bytes: usize,
}

impl<'a> Chunked<'a> {
    pub async fn start(
        sock: &'a mut Conn,
        status: u16,
        content_type: &str,
        extra: &[(&str, String)],
    ) -> io::Result<Chunked<'a>> {
        let mut head = format!("HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\ncache-control: no-cache\r\n", reason(status));
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        sock.write_all(head.as_bytes()).await?;
        sock.flush().await?;
        Ok(Chunked { sock, bytes: 0 })
    }

    /// Writes one chunk; returns the instant just before it was handed to the kernel (so a
    /// client can never seem to receive it earlier than it was sent).
    pub async fn write(&mut self, data: &[u8]) -> io::Result<Instant> {
        let mut frame = format!("{:x}\r\n", data.len()).into_bytes();
        frame.extend_from_slice(data);
        frame.extend_from_slice(b"\r\n");
        let at = Instant::now();
        if data.is_empty() {
            return Ok(at);
        }
        self.sock.write_all(&frame).await?;
        self.sock.flush().await?;
        self.bytes += data.len();
        Ok(at)
    }

    /// The terminating chunk: a clean end of body.
    pub async fn finish(self) -> io::Result<()> {
        self.sock.write_all(b"0\r\n\r\n").await?;
        self.sock.flush().await
    }

    /// Resets the connection (RST, not FIN) in the middle of the body.
    pub fn reset(self) {
        let _ = super::conn::tcp(self.sock).set_zero_linger();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_head_that_never_ends_times_out() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        client
            .write_all(b"GET /health HTTP/1.1\r\nHost: sim\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let e = read_request(&mut server, &mut buf, Duration::from_millis(100))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_tls_handshake_is_answered_400_at_once() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        // A ClientHello's record header: handshake, TLS 1.0 on the record layer.
        client
            .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            .await
            .unwrap();
        let mut buf = Vec::new();
        let e = read_request(&mut server, &mut buf, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn a_whole_request_and_a_clean_close() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        client
            .write_all(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let req = read_request(&mut server, &mut buf, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (req.method.as_str(), req.body.as_slice()),
            ("POST", &b"{}"[..])
        );
        drop(client);
        let next = read_request(&mut server, &mut buf, Duration::from_secs(5)).await;
        assert!(next.unwrap().is_none());
    }
}
