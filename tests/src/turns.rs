//! A TCP proxy between a client (the in-process receiver, or pgbench) and PostgreSQL that
//! counts round trips as client "turns": on each connection, a client write that comes after
//! the server last wrote (or the connection's first client write) starts a new turn. A
//! pipelined batch (several messages written before any reply) is one turn; a statement that
//! waits for the previous one's reply is another. Bytes are forwarded unchanged. [`proxied`]
//! points a `DATABASE_URL` at the proxy.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Who wrote last on one proxied connection.
const NOBODY: u8 = 0;
const CLIENT: u8 = 1;
const SERVER: u8 = 2;

/// A running proxy: `port` on 127.0.0.1 forwards to the upstream address.
pub struct TurnProxy {
    /// The local port clients connect to.
    pub port: u16,
    turns: Arc<AtomicU64>,
}

impl TurnProxy {
    /// Starts the proxy in the background (it runs until the process ends).
    ///
    /// # Errors
    /// When the local listener cannot be bound.
    pub async fn start(upstream: String) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the turn-counting proxy")?;
        let port = listener.local_addr()?.port();
        let turns = Arc::new(AtomicU64::new(0));
        let counter = turns.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, counter) = (upstream.clone(), counter.clone());
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        let _ = relay(client, server, counter).await;
                    }
                });
            }
        });
        Ok(Self { port, turns })
    }

    /// Client turns counted so far, over all connections.
    pub fn turns(&self) -> u64 {
        self.turns.load(Ordering::SeqCst)
    }
}

async fn relay(client: TcpStream, server: TcpStream, turns: Arc<AtomicU64>) -> Result<()> {
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let last = Arc::new(AtomicU8::new(NOBODY));
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up_last = last.clone();
    let up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = client_read.read(&mut buf).await?;
            if n == 0 {
                server_write.shutdown().await.ok();
                return Ok::<(), std::io::Error>(());
            }
            if up_last.swap(CLIENT, Ordering::SeqCst) != CLIENT {
                turns.fetch_add(1, Ordering::SeqCst);
            }
            server_write.write_all(&buf[..n]).await?;
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = server_read.read(&mut buf).await?;
            if n == 0 {
                client_write.shutdown().await.ok();
                return Ok::<(), std::io::Error>(());
            }
            last.store(SERVER, Ordering::SeqCst);
            client_write.write_all(&buf[..n]).await?;
        }
    };
    let _ = tokio::join!(up, down);
    Ok(())
}

/// `url` with its host and port replaced by 127.0.0.1:`port` (the proxy), and the upstream
/// `host:port`.
///
/// # Errors
/// When `url` does not parse or names no TCP host.
pub fn proxied(url: &str, port: u16) -> Result<(String, String)> {
    let config: tokio_postgres::Config = url.parse().context("parsing DATABASE_URL")?;
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => bail!("DATABASE_URL must name a TCP host"),
    };
    let upstream_port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    let db = config.get_dbname().unwrap_or("postgres");
    let password = config
        .get_password()
        .map(|p| format!(":{}", String::from_utf8_lossy(p)))
        .unwrap_or_default();
    Ok((
        format!("postgres://{user}{password}@127.0.0.1:{port}/{db}?sslmode=disable"),
        format!("{host}:{upstream_port}"),
    ))
}
