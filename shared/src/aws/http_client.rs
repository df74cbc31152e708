//! The AWS SDK's HTTP client on reqwest over OpenSSL ([`crate::https`]): what the SDK's own
//! default client (hyper on rustls and aws-lc-rs) would do, on the TLS stack the functions
//! already link for PostgreSQL.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient as SdkHttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings,
    SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::retry::ErrorKind;

/// The SDK's HTTP client: one reqwest client per distinct connector setting (the SDK asks
/// per operation; in practice one), each keeping its own connection pool, all sharing the
/// process's TLS connector ([`crate::https::tls_connector`]). Connect timeout and read
/// timeout come from the SDK's settings (`TimeoutConfig`); the operation and attempt
/// timeouts are the SDK's own and wrap these calls.
#[derive(Debug, Default)]
pub struct HttpClient {
    /// `(connect timeout, read timeout)` and the connector built for them.
    connectors: Mutex<Vec<(Timeouts, SharedHttpConnector)>>,
}

type Timeouts = (Option<Duration>, Option<Duration>);

impl HttpClient {
    /// A new client as the SDK takes it (no connection is opened before the first call).
    pub fn shared() -> SharedHttpClient {
        SharedHttpClient::new(Self::default())
    }
}

impl SdkHttpClient for HttpClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        let timeouts = (settings.connect_timeout(), settings.read_timeout());
        // A poisoned lock only means another thread panicked while pushing: the list is
        // still whole.
        let mut connectors = self
            .connectors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, connector)) = connectors.iter().find(|(t, _)| *t == timeouts) {
            return connector.clone();
        }
        let connector = SharedHttpConnector::new(Connector::new(timeouts));
        connectors.push((timeouts, connector.clone()));
        connector
    }
}

/// One reqwest client, or why it could not be built (every call then fails with the reason).
#[derive(Debug)]
struct Connector {
    client: Result<reqwest::Client, Arc<reqwest::Error>>,
}

impl Connector {
    fn new((connect, read): Timeouts) -> Self {
        let mut builder = crate::https::client_builder();
        if let Some(connect) = connect {
            builder = builder.connect_timeout(connect);
        }
        if let Some(read) = read {
            builder = builder.read_timeout(read);
        }
        Self {
            client: builder.build().map_err(Arc::new),
        }
    }
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = match &self.client {
            Ok(client) => client.clone(),
            Err(error) => {
                return HttpConnectorFuture::ready(Err(ConnectorError::other(
                    Box::new(BuildError(error.clone())),
                    None,
                )))
            }
        };
        let request = match request.try_into_http1x() {
            Ok(request) => request,
            Err(error) => {
                return HttpConnectorFuture::ready(Err(ConnectorError::user(error.into())))
            }
        };
        let (parts, body) = request.into_parts();
        // The SDK's bodies here are in memory (JSON and query documents): sent with their
        // length. Anything else is streamed as it is.
        let body = match body.bytes() {
            Some(bytes) => reqwest::Body::from(bytes::Bytes::copy_from_slice(bytes)),
            None => reqwest::Body::wrap(body),
        };
        let request = match reqwest::Request::try_from(http::Request::from_parts(parts, body)) {
            Ok(request) => request,
            Err(error) => {
                return HttpConnectorFuture::ready(Err(ConnectorError::user(error.into())))
            }
        };
        HttpConnectorFuture::new(async move {
            let response = client.execute(request).await.map_err(connector_error)?;
            let response = http::Response::from(response).map(SdkBody::from_body_1_x);
            HttpResponse::try_from(response)
                .map_err(|error| ConnectorError::other(error.into(), None))
        })
    }
}

/// The reqwest client could not be built (its TLS back end could not initialise).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTPS client for the AWS APIs")]
struct BuildError(#[source] Arc<reqwest::Error>);

/// The SDK's classification of a transport failure, which decides its retries: a timeout, an
/// I/O failure (connect refused, reset, DNS: retried as transient) or anything else (a
/// malformed response: not retried).
fn connector_error(error: reqwest::Error) -> ConnectorError {
    if error.is_timeout() {
        ConnectorError::timeout(error.into())
    } else if error.is_connect() || has_io_source(&error) {
        ConnectorError::io(error.into())
    } else if error.is_builder() {
        ConnectorError::user(error.into())
    } else if error.is_body() {
        // The connection dropped mid-response.
        ConnectorError::other(error.into(), Some(ErrorKind::TransientError))
    } else {
        ConnectorError::other(error.into(), None)
    }
}

/// Whether an `std::io::Error` is among `error`'s causes.
fn has_io_source(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = error.source();
    while let Some(cause) = next {
        if cause.is::<std::io::Error>() {
            return true;
        }
        next = cause.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn connector(read_timeout: Option<Duration>) -> SharedHttpConnector {
        SharedHttpConnector::new(Connector::new((Some(Duration::from_secs(5)), read_timeout)))
    }

    fn request(url: &str, body: &'static str) -> HttpRequest {
        let request = http::Request::builder()
            .method("POST")
            .uri(url)
            .header("content-type", "application/x-amz-json-1.1")
            .header("content-length", body.len())
            .body(SdkBody::from(body))
            .expect("a request");
        HttpRequest::try_from(request).expect("an SDK request")
    }

    /// Reads one request (headers and a `content-length` body) from `stream`.
    async fn read_request(stream: &mut tokio::net::TcpStream) -> String {
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let n = stream.read(&mut buffer).await.expect("read");
            seen.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&seen).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length: "))
                    .map_or(0, |n| n.trim().parse::<usize>().expect("a length"));
                if seen.len() >= end + 4 + length || n == 0 {
                    return text;
                }
            }
            if n == 0 {
                return text;
            }
        }
    }

    #[tokio::test]
    async fn a_request_goes_out_with_its_headers_and_body_and_the_answer_comes_back() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let seen = read_request(&mut stream).await;
            stream
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.1\r\ncontent-length: 30\r\n\r\n{\"__type\":\"NotFoundException\"}")
                .await
                .expect("write");
            seen
        });
        let response = connector(None)
            .call(request(&url, r#"{"SecretId":"a"}"#))
            .await
            .expect("an answer");
        assert_eq!(response.status().as_u16(), 400);
        assert_eq!(
            response.headers().get("content-type"),
            Some("application/x-amz-json-1.1")
        );
        let body = aws_smithy_types::byte_stream::ByteStream::new(response.into_body())
            .collect()
            .await
            .expect("the body")
            .into_bytes();
        assert_eq!(&body[..], &b"{\"__type\":\"NotFoundException\"}"[..]);
        let seen = server.await.expect("the server");
        assert!(seen.starts_with("POST / HTTP/1.1\r\n"), "{seen}");
        assert!(seen.contains("content-length: 16\r\n"), "{seen}");
        assert!(seen.ends_with(r#"{"SecretId":"a"}"#), "{seen}");
    }

    #[tokio::test]
    async fn a_server_that_never_answers_is_a_timeout_for_the_sdks_retries() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let _server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(stream);
        });
        let error = connector(Some(Duration::from_millis(200)))
            .call(request(&url, "{}"))
            .await
            .expect_err("no answer");
        assert!(error.is_timeout(), "{error:?}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_io_so_the_sdk_retries_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        drop(listener);
        let error = connector(None)
            .call(request(&url, "{}"))
            .await
            .expect_err("refused");
        assert!(error.is_io(), "{error:?}");
    }

    /// The TLS handshake runs through OpenSSL with the system's trust store: a certificate no
    /// CA of it signed is refused before any byte of the request is sent.
    #[tokio::test]
    async fn a_certificate_the_system_store_does_not_trust_is_refused() {
        use openssl::asn1::Asn1Time;
        use openssl::hash::MessageDigest;
        use openssl::pkey::PKey;
        use openssl::rsa::Rsa;
        use openssl::x509::{X509NameBuilder, X509};

        let key = PKey::from_rsa(Rsa::generate(2048).expect("a key")).expect("a key");
        let mut name = X509NameBuilder::new().expect("a name");
        name.append_entry_by_text("CN", "127.0.0.1").expect("CN");
        let name = name.build();
        let mut certificate = X509::builder().expect("a builder");
        certificate.set_version(2).expect("v3");
        certificate.set_subject_name(&name).expect("subject");
        certificate.set_issuer_name(&name).expect("issuer");
        certificate.set_pubkey(&key).expect("key");
        certificate
            .set_not_before(&Asn1Time::days_from_now(0).expect("now"))
            .expect("not before");
        certificate
            .set_not_after(&Asn1Time::days_from_now(1).expect("tomorrow"))
            .expect("not after");
        certificate
            .sign(&key, MessageDigest::sha256())
            .expect("sign");
        let certificate = certificate.build();
        let identity = native_tls::Identity::from_pkcs8(
            &certificate.to_pem().expect("pem"),
            &key.private_key_to_pem_pkcs8().expect("pkcs8"),
        )
        .expect("an identity");
        let acceptor = tokio_native_tls::TlsAcceptor::from(
            native_tls::TlsAcceptor::new(identity).expect("an acceptor"),
        );

        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("https://{}/", listener.local_addr().expect("addr"));
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            // The client gives up in the handshake: no request is read.
            acceptor.accept(stream).await.is_ok()
        });
        let error = connector(None)
            .call(request(&url, "{}"))
            .await
            .expect_err("an untrusted certificate");
        assert!(error.is_io(), "{error:?}");
        assert!(
            crate::error_chain::error_chain(&error).contains("certificate verify failed"),
            "{}",
            crate::error_chain::error_chain(&error)
        );
        assert!(
            !server.await.expect("the server"),
            "the handshake completed"
        );
    }
}
