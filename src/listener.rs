//! A listening socket on hostile ground, shared by the daemon's endpoints and the sim: accept
//! errors backed off (never a spin), a cap on open connections, a watch on every connection's
//! silence, and the descriptor budget the cap is sized from. The request-head deadline belongs
//! to each HTTP layer (hyper's for the daemon, the sim's own reader); its length comes from
//! [`Limits`], so both sides live under the same numbers.
//!
//! At the cap, the connection that has moved no byte for longest gives way to the new one. A
//! client that holds connections open without finishing a request can then never lock out a
//! scrape whose head arrives in one packet; and refusing the newcomer instead (or no longer
//! accepting) would hand the port to whoever opened connections first.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The limits every connection of one listener lives under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From the moment the server waits for a request (the connection's start, or the end of
    /// the previous response) to the end of its head. hyper 1.x counts its header read timeout
    /// so, and the sim's reader does the same; it is therefore also how long a kept-alive
    /// connection may sit idle.
    pub header_timeout: Duration,
    /// No byte either way for this long ends the connection, whatever it is doing: a response
    /// stuck on a reader that stopped reading, a handler that hangs, or keep-alive idleness if
    /// the HTTP layer stopped counting it.
    pub idle_timeout: Duration,
    /// Open connections at most; at least 1.
    pub max_connections: usize,
}

impl Limits {
    /// A client on the same network sends its head in one packet; five seconds forgive a slow
    /// one and free a slot held by a silent one soon. A scraper that waits longer between
    /// scrapes opens a new connection: one handshake per scrape.
    pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
    /// Far longer than any of our answers takes to write to a reader that is reading.
    pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default timeouts with a cap of `max_connections`.
    pub fn with_cap(max_connections: usize) -> Limits {
        Limits {
            header_timeout: Limits::HEADER_TIMEOUT,
            idle_timeout: Limits::IDLE_TIMEOUT,
            max_connections: max_connections.max(1),
        }
    }
}

/// The first pause after a failed accept; it doubles up to [`MAX_PAUSE`] while failures go on.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_secs(1);
/// How long a new connection waits for the one that gives way to release its slot (the next turn
/// of the scheduler, in practice).
const GIVE_WAY_WAIT: Duration = Duration::from_millis(200);

/// A listener with its cap and timeouts.
pub(crate) struct Door {
    listener: TcpListener,
    limits: Limits,
    slots: Arc<Slots>,
}

/// The connections open now.
struct Slots {
    free: Arc<Semaphore>,
    open: Mutex<HashMap<u64, Arc<Watch>>>,
    next_id: AtomicU64,
    /// Whether the last connection had to push another out (logged once per episode).
    full: AtomicBool,
    epoch: Instant,
}

/// One connection's shared state: when it last moved a byte, and the signal to give way.
struct Watch {
    /// Microseconds since [`Slots::epoch`]: fine enough that two connections' last bytes
    /// never tie.
    last: AtomicU64,
    give_way: Notify,
    epoch: Instant,
}

impl Watch {
    fn stamp(&self) {
        self.last.store(micros(self.epoch), Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.epoch + Duration::from_micros(self.last.load(Ordering::Relaxed))
    }
}

fn micros(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
}

impl Door {
    pub(crate) fn new(listener: TcpListener, limits: Limits) -> Door {
        let cap = limits.max_connections.max(1);
        Door {
            listener,
            limits: Limits {
                max_connections: cap,
                ..limits
            },
            slots: Arc::new(Slots {
                free: Arc::new(Semaphore::new(cap)),
                open: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(0),
                full: AtomicBool::new(false),
                epoch: Instant::now(),
            }),
        }
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// The next connection with its slot. Never fails: accept errors (out of descriptors, a
    /// connection reset before it was accepted) are logged and retried after a pause that
    /// doubles while they go on, so a failing accept never spins the thread.
    pub(crate) async fn accept(&self) -> (Tracked, Slot) {
        let mut pause = FIRST_PAUSE;
        loop {
            match self.listener.accept().await {
                Ok((sock, peer)) => {
                    pause = FIRST_PAUSE;
                    match self.slots.take(peer, self.limits).await {
                        Some(slot) => {
                            let io = Tracked {
                                sock,
                                watch: slot.watch.clone(),
                            };
                            return (io, slot);
                        }
                        None => {
                            tracing::debug!(%peer, cap = self.limits.max_connections, "at the connection cap with none to give way: closed")
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_ms = pause.as_millis() as u64, "accept failed; backing off");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
        }
    }
}

impl Slots {
    async fn take(self: &Arc<Self>, peer: SocketAddr, limits: Limits) -> Option<Slot> {
        let permit = match self.free.clone().try_acquire_owned() {
            Ok(p) => {
                self.full.store(false, Ordering::Relaxed);
                p
            }
            Err(_) => {
                if !self.full.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        cap = limits.max_connections,
                        "connection cap reached: the longest-silent connections give way"
                    );
                }
                if !self.push_out_longest_silent() {
                    return None;
                }
                // Its task drops the slot at its next turn.
                tokio::time::timeout(GIVE_WAY_WAIT, self.free.clone().acquire_owned())
                    .await
                    .ok()?
                    .ok()?
            }
        };
        let watch = Arc::new(Watch {
            last: AtomicU64::new(micros(self.epoch)),
            give_way: Notify::new(),
            epoch: self.epoch,
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.open
            .lock()
            .expect("connection table lock")
            .insert(id, watch.clone());
        Some(Slot {
            id,
            peer,
            watch,
            slots: self.clone(),
            idle_timeout: limits.idle_timeout,
            _permit: permit,
        })
    }

    /// Asks the connection that has moved no byte for longest to close; false if none is open.
    fn push_out_longest_silent(&self) -> bool {
        let mut open = self.open.lock().expect("connection table lock");
        let Some(id) = open
            .iter()
            .min_by_key(|(_, w)| w.last.load(Ordering::Relaxed))
            .map(|(id, _)| *id)
        else {
            return false;
        };
        if let Some(w) = open.remove(&id) {
            // A stored permit: the connection sees it even if it is not waiting right now.
            w.give_way.notify_one();
        }
        true
    }
}

/// A connection's place under the cap; dropping it frees the place.
pub(crate) struct Slot {
    id: u64,
    peer: SocketAddr,
    watch: Arc<Watch>,
    slots: Arc<Slots>,
    idle_timeout: Duration,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots
            .open
            .lock()
            .expect("connection table lock")
            .remove(&self.id);
    }
}

impl Slot {
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Drives a connection until it ends by itself (`Some`), or is cut (`None`): silent past
    /// the idle timeout, or asked to give way at the cap. The slot is freed on return.
    pub(crate) async fn run<F: Future>(self, conn: F) -> Option<F::Output> {
        tokio::pin!(conn);
        loop {
            let quiet_until = self.watch.last() + self.idle_timeout;
            tokio::select! {
                biased;
                out = &mut conn => return Some(out),
                _ = self.watch.give_way.notified() => {
                    tracing::debug!(peer = %self.peer, "connection closed: gave way to a new one at the cap");
                    return None;
                }
                _ = tokio::time::sleep_until(quiet_until) => {
                    if self.watch.last() + self.idle_timeout <= Instant::now() {
                        tracing::debug!(peer = %self.peer, idle = ?self.idle_timeout, "connection closed: silent too long");
                        return None;
                    }
                }
            }
        }
    }
}

/// A connection's socket that stamps its slot's watch whenever a byte moves.
pub struct Tracked {
    sock: TcpStream,
    watch: Arc<Watch>,
}

impl Tracked {
    pub fn get_ref(&self) -> &TcpStream {
        &self.sock
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.sock).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.watch.stamp();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.sock).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.watch.stamp();
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.sock).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.watch.stamp();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.sock.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().sock).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().sock).poll_shutdown(cx)
    }
}

/// How a process's descriptors are shared between a listener and everything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DescriptorBudget {
    /// The soft limit in force (after raising it).
    pub soft: u64,
    pub hard: u64,
    /// Kept for everything but the listener's connections.
    pub reserve: u64,
    /// The listener's connection cap.
    pub cap: usize,
}

/// Raises the soft descriptor limit to the hard one, keeps `reserve` descriptors for everything
/// else, and gives the listener half of the rest, at most `most` (at least 1). Half, not all:
/// what the reserve does not foresee (a slow disk's blocking threads, a DNS lookup) still finds
/// a descriptor.
pub(crate) fn descriptor_budget(most: usize, reserve: u64) -> DescriptorBudget {
    let (soft, hard) = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(soft) => (
            soft,
            rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(soft, |l| l.1),
        ),
        Err(e) => {
            let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap_or((1024, 1024));
            tracing::warn!(error = %e, soft, "cannot raise the descriptor limit; keeping it");
            (soft, hard)
        }
    };
    DescriptorBudget {
        soft,
        hard,
        reserve,
        cap: cap_for(soft, reserve, most),
    }
}

fn cap_for(soft: u64, reserve: u64, most: usize) -> usize {
    let half = soft.saturating_sub(reserve) / 2;
    usize::try_from(half)
        .unwrap_or(usize::MAX)
        .clamp(1, most.max(1))
}

/// A served connection, plain or over TLS: what an HTTP layer reads from and writes to,
/// whichever it is (tokio-util's `Either` forwards both ways).
pub(crate) type MaybeTls =
    tokio_util::either::Either<Tracked, Box<tokio_rustls::server::TlsStream<Tracked>>>;

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn the_cap_leaves_the_reserve_alone() {
        assert_eq!(cap_for(20_000, 48, 256), 256);
        assert_eq!(cap_for(128, 48, 256), 40);
        assert_eq!(cap_for(40, 48, 256), 1);
    }

    async fn door(cap: usize, idle: Duration) -> (Arc<Door>, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let limits = Limits {
            header_timeout: Duration::from_secs(5),
            idle_timeout: idle,
            max_connections: cap,
        };
        (Arc::new(Door::new(l, limits)), addr)
    }

    /// Echo server: each accepted connection echoes until it ends or is cut.
    fn echo(door: Arc<Door>) {
        tokio::spawn(async move {
            loop {
                let (mut io, slot) = door.accept().await;
                tokio::spawn(slot.run(async move {
                    let mut b = [0u8; 64];
                    while let Ok(n) = io.read(&mut b).await {
                        if n == 0 || io.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                }));
            }
        });
    }

    async fn eof(s: &mut TcpStream) -> bool {
        let mut b = [0u8; 8];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), s.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    #[tokio::test]
    async fn at_the_cap_the_longest_silent_connection_gives_way() {
        let (door, addr) = door(2, Duration::from_secs(60)).await;
        echo(door);
        let mut old = TcpStream::connect(addr).await.unwrap();
        old.write_all(b"a").await.unwrap();
        old.read_exact(&mut [0u8; 1]).await.unwrap();
        let mut busy = TcpStream::connect(addr).await.unwrap();
        busy.write_all(b"b").await.unwrap();
        busy.read_exact(&mut [0u8; 1]).await.unwrap();
        // `old` has been silent longer than `busy`; the third connection takes its place.
        let mut new = TcpStream::connect(addr).await.unwrap();
        new.write_all(b"c").await.unwrap();
        new.read_exact(&mut [0u8; 1]).await.unwrap();
        assert!(
            eof(&mut old).await,
            "the longest-silent connection was closed"
        );
        busy.write_all(b"d").await.unwrap();
        busy.read_exact(&mut [0u8; 1]).await.unwrap();
    }

    #[tokio::test]
    async fn a_silent_connection_is_closed_after_the_idle_timeout() {
        let (door, addr) = door(4, Duration::from_millis(200)).await;
        echo(door);
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"x").await.unwrap();
        s.read_exact(&mut [0u8; 1]).await.unwrap();
        let quiet = std::time::Instant::now();
        assert!(eof(&mut s).await);
        assert!(quiet.elapsed() >= Duration::from_millis(150));
    }
}
