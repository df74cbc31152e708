//! A local fake of a provider's HTTP API for tests: answers `GET` requests by path with canned
//! JSON and records every request it saw (method, path, `Authorization`). Only 127.0.0.1.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target, e.g. `/v1/subscriptions/sub_1`.
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

/// A running fake API; stops when dropped.
#[derive(Debug)]
pub struct FakeApi {
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeApi {
    /// Serves `routes` (path -> (status, JSON body)); anything else is 404.
    pub async fn start(routes: HashMap<String, (u16, serde_json::Value)>) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let routes = Arc::new(routes);
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                while let Ok((mut socket, _)) = listener.accept().await {
                    let seen = seen.clone();
                    let routes = routes.clone();
                    tokio::spawn(async move {
                        let mut buf = Vec::new();
                        let mut chunk = [0u8; 4096];
                        // Read the head (bodies are not used by the fake's routes).
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let head = String::from_utf8_lossy(&buf).into_owned();
                        let mut lines = head.split("\r\n");
                        let mut request = lines.next().unwrap_or("").split(' ');
                        let method = request.next().unwrap_or("").to_owned();
                        let path = request.next().unwrap_or("").to_owned();
                        let authorization = lines.find_map(|line| {
                            let (name, value) = line.split_once(':')?;
                            name.eq_ignore_ascii_case("authorization")
                                .then(|| value.trim().to_owned())
                        });
                        let (status, body) = routes
                            .get(&path)
                            .cloned()
                            .unwrap_or((404, serde_json::json!({"error": "no such route"})));
                        if let Ok(mut seen) = seen.lock() {
                            seen.push(Seen {
                                method,
                                path,
                                authorization,
                            });
                        }
                        let body = body.to_string();
                        let response = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = socket.write_all(response.as_bytes()).await;
                        let _ = socket.shutdown().await;
                    });
                }
            })
        };
        Ok(Self {
            base_url,
            seen,
            task,
        })
    }

    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}
