//! `bench-hello-pg`: bench-cold's floor of a function that answers after a PostgreSQL round
//! trip (issue 29): `bench-hello` (the smallest lambda_http function) plus, on its first
//! invocation, one tokio-postgres connection to `DATABASE_URL` over
//! postgres-native-tls (trusting the certificate in `HOOKLEDGER_DB_CA_FILE` when set, as the
//! receiver does, else the system roots), and every invocation runs `SELECT 1` on that
//! connection before answering `200 hello`;
//! an error answers 500.

use std::sync::Arc;

use lambda_http::http::StatusCode;
use lambda_http::{service_fn, Body, Error, Request, Response};
use tokio::sync::OnceCell;
use tokio_postgres::Client;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = std::env::var("DATABASE_URL").map_err(|_| "bench-hello-pg: set DATABASE_URL")?;
    let url: Arc<str> = url.into();
    let client: Arc<OnceCell<Client>> = Arc::default();
    lambda_http::run(service_fn(move |_request: Request| {
        let (url, client) = (url.clone(), client.clone());
        async move {
            match select_1(&url, &client).await {
                Ok(()) => Ok::<_, Error>(Response::new(Body::from("hello"))),
                Err(error) => {
                    eprintln!("bench-hello-pg: {error}");
                    let mut response = Response::new(Body::from("database error"));
                    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    Ok(response)
                }
            }
        }
    }))
    .await
}

/// `SELECT 1` on the one connection, opened by the first call (again by the next call if
/// opening failed).
async fn select_1(url: &str, client: &OnceCell<Client>) -> Result<(), Error> {
    let client = client.get_or_try_init(|| connect(url)).await?;
    client.simple_query("SELECT 1").await?;
    Ok(())
}

async fn connect(url: &str) -> Result<Client, Error> {
    let mut builder = native_tls::TlsConnector::builder();
    if let Ok(path) = std::env::var("HOOKLEDGER_DB_CA_FILE") {
        let pem = std::fs::read(&path).map_err(|e| format!("reading {path}: {e}"))?;
        // The CA file alone, as the receiver trusts it (shared::db::tls_connector).
        builder.disable_built_in_roots(true);
        builder.add_root_certificate(native_tls::Certificate::from_pem(&pem)?);
    }
    let tls = postgres_native_tls::MakeTlsConnector::new(builder.build()?);
    let (client, connection) = tokio_postgres::connect(url, tls).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("bench-hello-pg: connection closed: {error}");
        }
    });
    Ok(client)
}
