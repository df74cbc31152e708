//! `bench-serve`: the receiver's own `receiver::handler::function_handler` (the lambda_http
//! service, unchanged) served over HTTP/1.1 by hyper 1 on a multi-thread tokio runtime, for
//! `bench-http` (issue 12, part 1).
//!
//! State is built as `functions/receiver/src/run.rs` builds it (settings from the
//! environment: `DATABASE_URL`, `HOOKLEDGER_SOURCES`, ...; the doorbell; live sources), except
//! that the pool holds `--pool-size` connections (the function's default, 4, is sized for one
//! delivery at a time per execution environment). Each hyper request becomes the
//! `lambda_http::Request` lambda_http would hand over for an HTTP API event: method, URI
//! `https://{host}{path}`, the headers as sent, a UTF-8 body as `Body::Text` (API Gateway
//! base64-encodes other bodies, which lambda_http decodes into `Body::Binary`).
//!
//! Logs one JSON line per delivery on stdout, as the function does (the harness sends it to
//! /dev/null). Prints `bench-serve listening on <addr>` on stderr once it accepts connections.

use std::convert::Infallible;

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use receiver::handler::{function_handler, AppState};
use shared::Settings;

#[derive(Parser, Debug)]
#[command(about = "the receiver's lambda_http handler over HTTP/1.1 (hyper 1)")]
struct Args {
    /// Address to listen on (port 0: any free port, printed on stderr).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Database connections in the pool: the highest concurrency the harness drives (64), so no
    /// delivery waits for a connection.
    #[arg(long, default_value_t = 64)]
    pool_size: usize,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    shared::telemetry::init();
    let mut settings = Settings::from_env()
        .await
        .map_err(|e| anyhow::anyhow!(shared::startup::config_failure(&e)))?;
    settings.database.pool_size = args.pool_size;
    // Exactly the function's state (functions/receiver/src/run.rs).
    let state = AppState::from_settings(&settings, handlers::examples::registry(&settings.sources))
        .await
        .map_err(|e| anyhow::anyhow!(shared::error_chain::error_chain(&e)))?;
    let state: &'static AppState = Box::leak(Box::new(state));

    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    eprintln!("bench-serve listening on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await.context("accepting")?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| serve(state, request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One HTTP request through the receiver's handler.
async fn serve(
    state: &'static AppState,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return Ok(plain(400, "unreadable body")),
    };
    let body = match String::from_utf8(bytes.to_vec()) {
        Ok(text) if text.is_empty() => lambda_http::Body::Empty,
        Ok(text) => lambda_http::Body::Text(text),
        Err(binary) => lambda_http::Body::Binary(binary.into_bytes()),
    };
    let host = parts
        .headers
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut lambda_request = lambda_http::Request::new(body);
    *lambda_request.method_mut() = parts.method;
    match format!("https://{host}{path}").parse() {
        Ok(uri) => *lambda_request.uri_mut() = uri,
        Err(_) => return Ok(plain(400, "bad uri")),
    }
    *lambda_request.headers_mut() = parts.headers;
    let response = match function_handler(state, lambda_request).await {
        Ok(response) => response,
        Err(e) => return Ok(plain(500, &e.to_string())),
    };
    let (parts, body) = response.into_parts();
    let bytes = match body {
        lambda_http::Body::Empty => Bytes::new(),
        lambda_http::Body::Text(text) => Bytes::from(text),
        lambda_http::Body::Binary(binary) => Bytes::from(binary),
        // A future variant: answer with nothing rather than guess its encoding.
        #[allow(unreachable_patterns)]
        _ => Bytes::new(),
    };
    Ok(hyper::Response::from_parts(parts, Full::new(bytes)))
}

fn plain(status: u16, message: &str) -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from(message.to_owned())));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response
}
