//! Just enough HTTP/1.1 for the simulated replica and the agent's own endpoints: read a request (headers and a
//! Content-Length body, both capped), write a response with chunked transfer encoding so each
//! write reaches the client as its own piece, or reset the connection on purpose.

use std::io;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
pub async fn read_request(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> io::Result<Option<HttpRequest>> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
        let mut tmp = [0u8; 8192];
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        buf.extend_from_slice(&tmp[..n]);
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
        let mut tmp = [0u8; 8192];
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body = buf.drain(..len).collect();
    Ok(Some(HttpRequest {
        method,
        path,
        headers,
        body,
    }))
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
        _ => "Status",
    }
}

/// A whole response with a Content-Length body.
pub async fn respond(
    sock: &mut TcpStream,
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

/// A streamed response: each `write` is one chunk of the chunked encoding, flushed at once.
pub struct Chunked<'a> {
    pub sock: &'a mut TcpStream,
    pub bytes: usize,
}

impl<'a> Chunked<'a> {
    pub async fn start(
        sock: &'a mut TcpStream,
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
        let _ = self.sock.set_zero_linger();
    }
}
