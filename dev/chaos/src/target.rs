//! A local outbox target: an HTTP server on 127.0.0.1 that the sources' `forward` targets point
//! at. It records every request it receives with its idempotency key (the `webhook-id` header
//! the forward target sends, `{source}:{event_id}:{n}`, the same on every attempt; see
//! `shared::outbox::forward`), its event id header and attempt number, and answers `200`.
//!
//! [`Target::hold`] makes it hold every new request unanswered (the dispatch is then in the
//! middle of its HTTP call, so a worker can be SIGKILLed there) until [`Target::release`].
//! Exactly-once per idempotency key is counted here: [`Target::summary`] gives the messages
//! received, the distinct keys and the redeliveries of a key (at-least-once delivery: a key
//! may arrive twice when its dispatcher died before recording the 2xx; the receiving service
//! deduplicates on it).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// One request the target received.
#[derive(Debug, Clone)]
pub struct Received {
    /// `webhook-id`: the idempotency key.
    pub key: String,
    /// `hookledger-event-id`.
    pub event_id: String,
    /// `hookledger-attempt` (0 when absent or unreadable).
    pub attempt: u32,
    /// Whether it was held before being answered.
    pub held: bool,
    /// When it arrived, from the target's start.
    pub at_ms: u64,
}

/// What the target saw, per idempotency key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetSummary {
    /// Requests received (all keys, all attempts).
    pub received: u64,
    /// Distinct idempotency keys.
    pub keys: u64,
    /// Requests beyond the first for their key.
    pub redeliveries: u64,
    /// Keys received more than once.
    pub keys_redelivered: u64,
}

#[derive(Default)]
struct Log {
    received: Vec<Received>,
    /// Requests being held right now.
    holding: u64,
}

struct Shared {
    log: Mutex<Log>,
    hold: watch::Sender<bool>,
    started: Instant,
}

/// A running target; stops serving when dropped.
pub struct Target {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl Target {
    /// Serves on `127.0.0.1:0` (a free port).
    ///
    /// # Errors
    /// The listener cannot be bound.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (hold, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            log: Mutex::new(Log::default()),
            hold,
            started: Instant::now(),
        });
        let served = shared.clone();
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let shared = served.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |r| serve(shared.clone(), r));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            shared,
            server,
        })
    }

    /// The URL a forward target points at: `http://127.0.0.1:<port>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Holds every request from now on, unanswered, until [`Target::release`].
    pub fn hold(&self) {
        self.shared.hold.send_replace(true);
    }

    /// Answers the held requests (and every later one at once).
    pub fn release(&self) {
        self.shared.hold.send_replace(false);
    }

    /// Requests being held right now.
    pub fn holding(&self) -> u64 {
        self.shared.log.lock().map(|l| l.holding).unwrap_or(0)
    }

    /// Every request received so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.shared
            .log
            .lock()
            .map(|l| l.received.clone())
            .unwrap_or_default()
    }

    /// Requests per idempotency key.
    pub fn per_key(&self) -> BTreeMap<String, u64> {
        let mut keys = BTreeMap::new();
        for r in self.received() {
            *keys.entry(r.key).or_default() += 1;
        }
        keys
    }

    /// The counts per idempotency key.
    pub fn summary(&self) -> TargetSummary {
        let keys = self.per_key();
        TargetSummary {
            received: keys.values().sum(),
            keys: keys.len() as u64,
            redeliveries: keys.values().map(|n| n - 1).sum(),
            keys_redelivered: keys.values().filter(|n| **n > 1).count() as u64,
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn header(request: &Request<Incoming>, name: &str) -> String {
    request
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

async fn serve(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let key = header(&request, "webhook-id");
    let event_id = header(&request, "hookledger-event-id");
    let attempt = header(&request, "hookledger-attempt").parse().unwrap_or(0);
    // The whole body, as a real endpoint reads it before answering.
    let _ = request.into_body().collect().await;
    let mut hold = shared.hold.subscribe();
    let held = *hold.borrow_and_update();
    if let Ok(mut log) = shared.log.lock() {
        log.received.push(Received {
            key,
            event_id,
            attempt,
            held,
            at_ms: shared.started.elapsed().as_millis() as u64,
        });
        if held {
            log.holding += 1;
        }
    }
    if held {
        // A dispatcher killed meanwhile closes its side; this wait ends at the release.
        let _ = hold.wait_for(|hold| !*hold).await;
        if let Ok(mut log) = shared.log.lock() {
            log.holding -= 1;
        }
    }
    Ok(Response::new(Full::new(Bytes::from_static(
        b"{\"ok\":true}",
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn post(target: &Target, key: &str) -> tokio::task::JoinHandle<String> {
        let addr = target.addr;
        let key = key.to_owned();
        tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let request = format!(
                "POST /hook HTTP/1.1\r\nhost: x\r\nwebhook-id: {key}\r\nhookledger-attempt: 2\r\n\
                 content-length: 2\r\nconnection: close\r\n\r\n{{}}"
            );
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        })
    }

    #[tokio::test]
    async fn records_keys_holds_and_counts_redeliveries() {
        let target = Target::start().await.unwrap();
        assert!(post(&target, "s:e1:1")
            .await
            .await
            .unwrap()
            .starts_with("HTTP/1.1 200"));
        target.hold();
        let held = post(&target, "s:e2:1").await;
        for _ in 0..100 {
            if target.holding() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(target.holding(), 1);
        assert!(!held.is_finished());
        target.release();
        let answer = tokio::time::timeout(Duration::from_secs(5), held)
            .await
            .unwrap()
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        post(&target, "s:e2:1").await.await.unwrap();
        assert_eq!(
            target.summary(),
            TargetSummary {
                received: 3,
                keys: 2,
                redeliveries: 1,
                keys_redelivered: 1
            }
        );
        let received = target.received();
        assert_eq!(received[0].attempt, 2);
        assert!(received[1].held && !received[2].held);
    }
}
