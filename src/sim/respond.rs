//! How a [`Generation`] is written, by a plan chosen before the first byte: refused at once,
//! held silent, one JSON answer, a stream that breaks before its content, or the tokens
//! streamed, framed as the scenario's server frames them (vLLM or llama.cpp style, CRLF, no
//! space, split writes, comments), with the faults at their moment (a reset, an error or a
//! stall at the fourth token, no end).

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::time::sleep_until;

use super::conn::Conn;
use super::generate::{Generation, Pace, Piece};
use super::http::{self, json_bytes, Chunked};
use super::scenarios::Kind;
use super::state::State;
use super::wire::{Call, Ending, Event, Oversized, PieceKind, Style};

/// The longest a scenario keeps a connection open on purpose (no answer, or keep-alives only).
pub(super) const HOLD: Duration = Duration::from_secs(120);

/// How often a stream pings while it stalls, where its flavor's servers ping.
const PING_EVERY: Duration = Duration::from_millis(250);

/// What a broken proxy splices into a stream: a line of its own error page.
const HTML_LINE: &[u8] = b"<html><body><h1>502 Bad Gateway</h1></body></html>\n";

/// The token at which a stream resets, errs or stalls.
const FAULT_AT: usize = 3;

/// What a scenario does with a request, decided before anything is written.
enum Plan {
    /// An error status, or a page that is not the protocol, answered at once.
    Refuse {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// The headers never come.
    Hold,
    /// One JSON answer, after the whole generation's time.
    Whole,
    /// A stream that breaks before any token: a line too long, keep-alives only, an event cut
    /// in half, or no end at all.
    Broken,
    /// The tokens, streamed.
    Stream,
}

impl Generation {
    fn plan(&self) -> Plan {
        let refuse = |status, body: serde_json::Value| Plan::Refuse {
            status,
            content_type: "application/json",
            body: json_bytes(&body),
        };
        match self.scenario.kind {
            Kind::Http(code) => refuse(code, self.wire.refusal(code, &self.model)),
            // vLLM's own words and error shape (`ErrorResponse`), for any priority but 0.
            Kind::VllmDefault if self.priority.is_some_and(|p| p != 0) => refuse(
                400,
                json!({"error": {
                    "message": format!(
                        "Got priority {} but Priority scheduling is not enabled.",
                        self.priority.unwrap_or_default()
                    ),
                    "type": "BadRequestError",
                    "param": null,
                    "code": 400,
                }}),
            ),
            Kind::EchoAuth => {
                let said = self.authorization.as_deref().unwrap_or("none");
                refuse(
                    401,
                    json!({"error": {"message": format!("invalid credentials: {said}")}}),
                )
            }
            Kind::Garbage => Plan::Refuse {
                status: 200,
                content_type: "text/html",
                body: HTML_LINE.to_vec(),
            },
            Kind::NoHeaders => Plan::Hold,
            kind if !self.stream || kind == Kind::NonStream => Plan::Whole,
            Kind::HugeLine | Kind::RoleOnly | Kind::Malformed | Kind::Endless => Plan::Broken,
            _ => Plan::Stream,
        }
    }

    pub(super) async fn respond(self, sock: &mut Conn, st: &State) -> std::io::Result<bool> {
        let extra = [("x-sim-cache", self.cache.as_str().to_string())];
        let pace = self.pace();
        let plan = match self.plan() {
            Plan::Refuse {
                status,
                content_type,
                body,
            } => {
                let mut extra = extra.to_vec();
                extra.extend(self.wire.refusal_headers(status));
                http::respond(sock, status, content_type, &extra, &body).await?;
                return Ok(true);
            }
            Plan::Hold => {
                hold(sock).await;
                return Ok(false);
            }
            Plan::Whole => return self.whole(sock, st, &extra, pace).await,
            plan => plan,
        };
        let mut rng = fastrand::Rng::with_seed(7);
        if let Some(id) = &self.request_id {
            st.record_headers(id, Instant::now());
        }
        let mut w = Chunked::start(sock, 200, self.wire.content_type(), &extra).await?;
        // vLLM opens chat with a role-only chunk (not a token); llama.cpp does not.
        let opening = self
            .wire
            .opening(&self.model, self.scenario.kind != Kind::LlamaCpp);
        self.send_all(&mut w, &opening, &mut rng).await?;
        if let Plan::Broken = plan {
            self.break_stream(w, pace).await?;
            return Ok(false);
        }
        let out = Streamer {
            gen: &self,
            st,
            w,
            rng,
            block: None,
            index: 0,
            writes: Vec::new(),
        };
        out.stream(pace).await
    }

    /// The whole answer as one JSON body.
    async fn whole(
        &self,
        sock: &mut Conn,
        st: &State,
        extra: &[(&str, String)],
        pace: Pace,
    ) -> std::io::Result<bool> {
        let (pieces, finish) = self.script();
        let call = self.call();
        let usage = self.usage(&pieces);
        sleep_until((self.t0 + pace.ttft + pace.itl * pieces.len() as u32).into()).await;
        let text: String = pieces
            .iter()
            .filter(|p| p.kind == PieceKind::Answer)
            .map(|p| p.text.as_str())
            .collect();
        let end = Ending {
            finish,
            usage: Some(&usage),
            timings: None,
            block: 0,
            call: call.as_ref(),
        };
        let body = self.wire.whole(&self.model, &text, &end);
        self.report(st, &[Instant::now()], &usage);
        http::respond(sock, 200, "application/json", extra, &json_bytes(&body)).await?;
        if let Some(id) = &self.request_id {
            st.record_first_write(id, Instant::now());
        }
        Ok(true)
    }

    /// The streams that break before any token; the connection is not reused.
    async fn break_stream(&self, w: Chunked<'_>, pace: Pace) -> std::io::Result<()> {
        match self.scenario.kind {
            Kind::HugeLine => self.oversized(w).await,
            Kind::RoleOnly => self.keep_alives_only(w).await,
            Kind::Malformed => self.cut_event(w, pace).await,
            Kind::Endless => self.endless(w, pace).await,
            _ => Ok(()),
        }
    }

    /// One event larger than any cap: a line that never ends, or a frame that claims too much.
    async fn oversized(&self, mut w: Chunked<'_>) -> std::io::Result<()> {
        match self.wire.oversized() {
            Oversized::Frame(frame) => {
                for piece in frame.chunks(64 * 1024) {
                    w.write(piece).await?;
                }
            }
            Oversized::Line(head) => {
                w.write(head).await?;
                let block = vec![b'x'; 64 * 1024];
                for _ in 0..4096 {
                    w.write(&block).await?;
                }
            }
        }
        Ok(())
    }

    /// Keep-alives and nothing else, for as long as the sim holds a connection.
    async fn keep_alives_only(&self, mut w: Chunked<'_>) -> std::io::Result<()> {
        let until = Instant::now() + HOLD;
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(200)).await;
            w.write(self.wire.keep_alive()).await?;
        }
        Ok(())
    }

    /// Half an event, that is not JSON, and the end of the stream.
    async fn cut_event(&self, mut w: Chunked<'_>, pace: Pace) -> std::io::Result<()> {
        sleep_until((self.t0 + pace.ttft).into()).await;
        let half = "{\"choices\": [{\"delta\": {\"content\": \"Par";
        w.write(&self.wire.encode(None, half, self.style())).await?;
        w.finish().await
    }

    /// Words at the scenario's pace, whatever `max_tokens` says, until the client gives up.
    async fn endless(&self, mut w: Chunked<'_>, pace: Pace) -> std::io::Result<()> {
        let start = self.t0 + pace.ttft;
        let mut block = None;
        for i in 0..=1_000_000u32 {
            sleep_until((start + pace.itl * i).into()).await;
            let mut events = self.wire.block_change(block, PieceKind::Answer, 0);
            block = Some(PieceKind::Answer);
            events.push(
                self.wire
                    .piece(&self.model, PieceKind::Answer, &format!(" word{i}"), 0),
            );
            for ev in &events {
                w.write(&self.bytes(ev)).await?;
            }
        }
        Ok(())
    }

    /// How this scenario's server lays out its lines: CRLF or LF, with or without the space
    /// after `data:`.
    fn style(&self) -> Style {
        Style {
            crlf: self.scenario.kind == Kind::Crlf,
            space: self.scenario.kind != Kind::NoSpace,
        }
    }

    /// Serialises one event the way this scenario's server would, in its flavor's framing.
    fn bytes(&self, ev: &Event) -> Vec<u8> {
        self.wire
            .encode(ev.name, &ev.data.to_string(), self.style())
    }

    async fn send(
        &self,
        w: &mut Chunked<'_>,
        bytes: &[u8],
        rng: &mut fastrand::Rng,
    ) -> std::io::Result<Instant> {
        match self.scenario.kind {
            Kind::Split => {
                // The event is complete only with its last piece: that write is its instant.
                let mut rest = bytes;
                let mut at = Instant::now();
                while !rest.is_empty() {
                    let n = rng.usize(1..=7).min(rest.len());
                    at = w.write(&rest[..n]).await?;
                    rest = &rest[n..];
                }
                Ok(at)
            }
            Kind::Comments => {
                w.write(self.wire.keep_alive()).await?;
                w.write(bytes).await
            }
            _ => w.write(bytes).await,
        }
    }

    async fn send_all(
        &self,
        w: &mut Chunked<'_>,
        events: &[Event],
        rng: &mut fastrand::Rng,
    ) -> std::io::Result<()> {
        for ev in events {
            self.send(w, &self.bytes(ev), rng).await?;
        }
        Ok(())
    }
}

/// A stream being written: where its content blocks stand, and when each token left.
struct Streamer<'g, 'w> {
    gen: &'g Generation,
    st: &'g State,
    w: Chunked<'w>,
    rng: fastrand::Rng,
    /// The kind of content of the open block (Anthropic's framing), and its index.
    block: Option<PieceKind>,
    index: usize,
    /// When each piece of content left: the first token, then the gaps between them.
    writes: Vec<Instant>,
}

impl Streamer<'_, '_> {
    /// The tokens, each at its due time, then the end; with the scenario's fault on the way.
    async fn stream(mut self, pace: Pace) -> std::io::Result<bool> {
        let gen = self.gen;
        let kind = gen.scenario.kind;
        let (pieces, finish) = gen.script();
        let call = gen.call();
        // The whole call in one event, in place of its pieces, where the flavor sends it so.
        let whole_call = call
            .as_ref()
            .and_then(|c| gen.wire.whole_call(&gen.model, c));
        let mut offset = Duration::ZERO;
        for (i, piece) in pieces.iter().enumerate() {
            if i == FAULT_AT {
                match kind {
                    Kind::Reset => {
                        self.w.reset();
                        return Ok(false);
                    }
                    Kind::MidStreamError => return self.fail().await,
                    Kind::HtmlSplice => {
                        self.send(HTML_LINE).await?;
                    }
                    Kind::Stall => offset = gen.scenario.stall,
                    _ => {}
                }
            }
            let due = gen.t0 + pace.ttft + offset + pace.itl * i as u32;
            if kind == Kind::Stall && i == FAULT_AT {
                self.ping_until(due).await?;
            }
            sleep_until(due.into()).await;
            let tool = (call.as_ref(), whole_call.as_ref());
            self.piece(i, piece, tool).await?;
        }
        if kind == Kind::NoDone {
            self.w.finish().await?;
            return Ok(false);
        }
        self.close(pace, &pieces, finish, call.as_ref()).await
    }

    /// An error in the stream in place of the next token, and the end.
    async fn fail(mut self) -> std::io::Result<bool> {
        let gen = self.gen;
        let err = gen.wire.error("CUDA error: out of memory");
        self.w.write(&gen.bytes(&err)).await?;
        self.w.finish().await?;
        Ok(false)
    }

    /// Keeps a stalled stream alive until `due` where the flavor's servers do (Anthropic's
    /// ping): pings are not chunks, so the gap is still a stall.
    async fn ping_until(&mut self, due: Instant) -> std::io::Result<()> {
        let Some(ping) = self.gen.wire.ping(self.gen.style()) else {
            return Ok(());
        };
        while Instant::now() + PING_EVERY < due {
            sleep_until((Instant::now() + PING_EVERY).into()).await;
            self.send(&ping).await?;
        }
        Ok(())
    }

    /// One token, with the block and tool-call events its flavor puts before it. `tool`: the
    /// call the answer makes, and the whole call in one event where the flavor sends it so.
    async fn piece(
        &mut self,
        i: usize,
        piece: &Piece,
        (call, whole_call): (Option<&Call>, Option<&Event>),
    ) -> std::io::Result<()> {
        let gen = self.gen;
        // A new kind of content opens the next content block (Anthropic's framing).
        if self.block.is_some_and(|b| b != piece.kind) {
            self.index += 1;
        }
        let mut changes = gen.wire.block_change(self.block, piece.kind, self.index);
        let call_starts = piece.kind == PieceKind::Tool && self.block != Some(PieceKind::Tool);
        self.block = Some(piece.kind);
        if let (true, Some(c)) = (call_starts, call) {
            if let Some(whole) = whole_call {
                self.content(&gen.bytes(whole)).await?;
            }
            changes.extend(gen.wire.tool_call_start(&gen.model, &c.name, self.index));
        }
        if piece.kind == PieceKind::Tool && whole_call.is_some() {
            return Ok(());
        }
        for ev in &changes {
            self.send(&gen.bytes(ev)).await?;
        }
        // Where the flavor's servers ping between deltas (Anthropic's); they are not tokens.
        if i % 4 == 2 {
            if let Some(ping) = gen.wire.ping(gen.style()) {
                self.send(&ping).await?;
            }
        }
        let ev = gen
            .wire
            .piece(&gen.model, piece.kind, &piece.text, self.index);
        self.content(&gen.bytes(&ev)).await
    }

    /// The end, after the last token: what was served is reported on /metrics, then the
    /// closing events go out with the usage (when sent) and the server's timings (llama.cpp's).
    async fn close(
        mut self,
        pace: Pace,
        pieces: &[Piece],
        finish: &str,
        call: Option<&Call>,
    ) -> std::io::Result<bool> {
        let gen = self.gen;
        let kind = gen.scenario.kind;
        let usage = gen.usage(pieces);
        let timings =
            (kind == Kind::LlamaCpp).then(|| gen.server_timings(pace, pieces.len(), &usage));
        gen.report(self.st, &self.writes, &usage);
        let end = Ending {
            finish,
            usage: (gen.include_usage && kind != Kind::NoUsage).then_some(&usage),
            timings,
            block: self.index,
            call,
        };
        for frame in gen.wire.closing(&gen.model, end) {
            let bytes = gen.wire.write(&frame, gen.style());
            self.send(&bytes).await?;
        }
        self.w.finish().await?;
        Ok(true)
    }

    async fn send(&mut self, bytes: &[u8]) -> std::io::Result<Instant> {
        self.gen.send(&mut self.w, bytes, &mut self.rng).await
    }

    /// Content: its instant is kept, and the first is the sim's own first-token stamp.
    async fn content(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let at = self.send(bytes).await?;
        if self.writes.is_empty() {
            if let Some(id) = &self.gen.request_id {
                self.st.record_first_write(id, at);
            }
        }
        self.writes.push(at);
        Ok(())
    }
}

/// Holds a connection open without answering, until the client gives up (bounded).
async fn hold(sock: &mut Conn) {
    let mut b = [0u8; 64];
    let _ = tokio::time::timeout(HOLD, async {
        while let Ok(n) = sock.read(&mut b).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}
