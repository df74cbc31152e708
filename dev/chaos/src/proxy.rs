//! A small TCP proxy from a local port to another (PostgreSQL's), which can stop forwarding in
//! both directions WITHOUT closing either socket: the half-open network of a failover or of a
//! dead NAT entry, where nothing answers and nothing is reset. Neither side's kernel notices
//! (the proxy's own sockets keep acknowledging what they receive), so TCP keepalives and
//! `tcp_user_timeout` cannot fire either: only a client-side deadline ends the wait.
//!
//! While paused, a connection being opened is accepted and held (no upstream connect) until
//! the proxy resumes; bytes already read are held, not dropped. [`Proxy::strand`] is the
//! permanent variant for the connections open at that moment (a NAT entry that is gone for
//! good): they are never forwarded again, while new connections are. Loopback only.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What every connection watches: whether forwarding is paused, and below which connection
/// number (accept order, from 0) connections are stranded for good.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    paused: bool,
    stranded_below: u64,
}

/// Bytes read per forwarding step.
const CHUNK_BYTES: usize = 16 * 1024;

/// What the proxy has done so far (monotonic counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyCounters {
    /// Client connections accepted.
    pub accepted: u64,
    /// Connections open now (client side).
    pub open: u64,
    /// Bytes forwarded client -> upstream.
    pub to_upstream: u64,
    /// Bytes forwarded upstream -> client.
    pub to_client: u64,
    /// Times [`Proxy::pause`] took effect (it was running).
    pub pauses: u64,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    open: AtomicU64,
    to_upstream: AtomicU64,
    to_client: AtomicU64,
    pauses: AtomicU64,
}

/// A running proxy; stops accepting (and drops every connection it forwards) when dropped.
pub struct Proxy {
    local: SocketAddr,
    paused: watch::Sender<State>,
    counters: Arc<Counters>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("local", &self.local)
            .field("paused", &self.is_paused())
            .field("counters", &self.counters())
            .finish()
    }
}

impl Proxy {
    /// Listens on `127.0.0.1:0` (a free port) and forwards each connection to `upstream`.
    ///
    /// # Errors
    /// The I/O error when the listener cannot be bound.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let local = listener.local_addr()?;
        let (paused, _) = watch::channel(State::default());
        let counters = Arc::new(Counters::default());
        let accept = tokio::spawn(accept_loop(
            listener,
            upstream,
            paused.clone(),
            counters.clone(),
        ));
        Ok(Self {
            local,
            paused,
            counters,
            accept,
        })
    }

    /// The address clients connect to (`127.0.0.1:<port>`).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops forwarding in both directions; every socket stays open.
    pub fn pause(&self) {
        let mut was_paused = true;
        self.paused.send_modify(|state| {
            was_paused = std::mem::replace(&mut state.paused, true);
        });
        if !was_paused {
            self.counters.pauses.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forwards again, starting with whatever was held.
    pub fn resume(&self) {
        self.paused.send_modify(|state| state.paused = false);
    }

    /// Strands every connection accepted so far: never forwarded again, never closed (until
    /// the client closes it), while connections accepted later are forwarded as usual.
    pub fn strand(&self) {
        let accepted = self.counters.accepted.load(Ordering::SeqCst);
        self.paused
            .send_modify(|state| state.stranded_below = accepted);
    }

    /// Whether forwarding is stopped.
    pub fn is_paused(&self) -> bool {
        self.paused.borrow().paused
    }

    /// The counters so far.
    pub fn counters(&self) -> ProxyCounters {
        let c = &self.counters;
        ProxyCounters {
            accepted: c.accepted.load(Ordering::Relaxed),
            open: c.open.load(Ordering::Relaxed),
            to_upstream: c.to_upstream.load(Ordering::Relaxed),
            to_client: c.to_client.load(Ordering::Relaxed),
            pauses: c.pauses.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Waits until connection number `id` may forward (returns at once when it may).
async fn running(paused: &mut watch::Receiver<State>, id: u64) {
    // Err: the proxy is gone; its connections end with the accept task's abort anyway.
    let _ = paused
        .wait_for(|state| !state.paused && id >= state.stranded_below)
        .await;
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    paused: watch::Sender<State>,
    counters: Arc<Counters>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let id = counters.accepted.fetch_add(1, Ordering::SeqCst);
        counters.open.fetch_add(1, Ordering::Relaxed);
        let (paused, counters) = (paused.subscribe(), counters.clone());
        // Owned by the set: aborting the accept task drops the set and every connection.
        connections.spawn(async move {
            forward(client, upstream, paused, id, &counters).await;
            counters.open.fetch_sub(1, Ordering::Relaxed);
        });
        // Reap finished connections so the set does not grow with the run.
        while connections.try_join_next().is_some() {}
    }
}

async fn forward(
    client: TcpStream,
    upstream: SocketAddr,
    mut paused: watch::Receiver<State>,
    id: u64,
    counters: &Counters,
) {
    // A connection opened while paused is held open, unanswered, until the proxy resumes.
    running(&mut paused, id).await;
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(
        client_read,
        server_write,
        paused.clone(),
        id,
        &counters.to_upstream,
    );
    let down = pump(server_read, client_write, paused, id, &counters.to_client);
    // Either side closing ends both (the other's write half is dropped with this future).
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

/// Copies `from` to `to` while running; while paused, reads nothing and holds what it read.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut paused: watch::Receiver<State>,
    id: u64,
    forwarded: &AtomicU64,
) {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        running(&mut paused, id).await;
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Paused while the read was pending: hold the bytes until resumed.
        running(&mut paused, id).await;
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        forwarded.fetch_add(n as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// An echo server on a free port.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let (mut r, mut w) = socket.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn round_trip(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
        stream.write_all(bytes).await.unwrap();
        let mut back = vec![0u8; bytes.len()];
        stream.read_exact(&mut back).await.unwrap();
        back
    }

    #[tokio::test]
    async fn forwards_then_holds_without_closing_then_delivers_what_it_held() {
        let proxy = Proxy::start(echo().await).await.unwrap();
        let mut stream = TcpStream::connect(proxy.local_addr()).await.unwrap();
        assert_eq!(round_trip(&mut stream, b"hello").await, b"hello");

        proxy.pause();
        stream.write_all(b"held").await.unwrap();
        let mut back = [0u8; 4];
        // Nothing comes back, and the socket is not closed either (a read would return 0).
        let waited = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut back)).await;
        assert!(waited.is_err(), "a paused proxy answered: {waited:?}");

        // A connection opened while paused is accepted but not served.
        let mut late = TcpStream::connect(proxy.local_addr()).await.unwrap();
        late.write_all(b"late").await.unwrap();
        let mut late_back = [0u8; 4];
        let waited =
            tokio::time::timeout(Duration::from_millis(300), late.read(&mut late_back)).await;
        assert!(waited.is_err(), "a paused proxy served a new connection");

        proxy.resume();
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&back, b"held");
        tokio::time::timeout(Duration::from_secs(5), late.read_exact(&mut late_back))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&late_back, b"late");

        let counters = proxy.counters();
        assert_eq!(counters.accepted, 2);
        assert_eq!(counters.open, 2);
        assert_eq!(counters.pauses, 1);
        assert_eq!(counters.to_upstream, 5 + 4 + 4);
        assert_eq!(counters.to_client, 5 + 4 + 4);
    }

    #[tokio::test]
    async fn a_stranded_connection_stays_silent_while_new_ones_are_forwarded() {
        let proxy = Proxy::start(echo().await).await.unwrap();
        let mut old = TcpStream::connect(proxy.local_addr()).await.unwrap();
        assert_eq!(round_trip(&mut old, b"a").await, b"a");
        proxy.strand();
        old.write_all(b"b").await.unwrap();
        let mut back = [0u8; 1];
        let waited = tokio::time::timeout(Duration::from_millis(300), old.read(&mut back)).await;
        assert!(waited.is_err(), "a stranded connection answered");
        let mut new = TcpStream::connect(proxy.local_addr()).await.unwrap();
        assert_eq!(round_trip(&mut new, b"c").await, b"c");
        proxy.pause();
        proxy.resume();
        let waited = tokio::time::timeout(Duration::from_millis(300), old.read(&mut back)).await;
        assert!(waited.is_err(), "resuming revived a stranded connection");
    }

    #[tokio::test]
    async fn a_closed_client_closes_its_connection() {
        let proxy = Proxy::start(echo().await).await.unwrap();
        let mut stream = TcpStream::connect(proxy.local_addr()).await.unwrap();
        assert_eq!(round_trip(&mut stream, b"x").await, b"x");
        drop(stream);
        for _ in 0..100 {
            if proxy.counters().open == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the connection stayed open: {:?}", proxy.counters());
    }
}
