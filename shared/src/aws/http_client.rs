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
        // No proxy, whatever HTTP_PROXY or HTTPS_PROXY say (reqwest would follow them, with no
        // loopback bypass): the SDK's own client uses none unless configured, and the AWS APIs,
        // the instance metadata and container credential endpoints must not go through one
        // set for the forward targets.
        let mut builder = crate::https::client_builder().no_proxy();
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

/// The SDK's classification of a transport failure, which decides its retries, as the SDK's
/// own hyper client makes it (aws-smithy-http-client's `downcast_error`): a timeout; an I/O
/// failure (connect refused or reset, DNS, a TLS handshake, a pooled connection the server had
/// closed: retried as transient); a message cut short (`IncompleteMessage`: transient); our own
/// request's fault (not retried); anything else (a malformed response: not retried).
fn connector_error(error: reqwest::Error) -> ConnectorError {
    if error.is_timeout() {
        return ConnectorError::timeout(error.into());
    }
    if error.is_connect() || cause::<std::io::Error>(&error).is_some() {
        return ConnectorError::io(error.into());
    }
    if let Some(hyper) = cause::<hyper::Error>(&error) {
        if hyper.is_timeout() {
            return ConnectorError::timeout(error.into());
        }
        if hyper.is_closed() || hyper.is_canceled() {
            return ConnectorError::io(error.into());
        }
        if hyper.is_incomplete_message() {
            return ConnectorError::other(error.into(), Some(ErrorKind::TransientError));
        }
        if hyper.is_user() {
            return ConnectorError::user(error.into());
        }
    }
    if error.is_builder() {
        ConnectorError::user(error.into())
    } else if error.is_body() {
        // The connection dropped mid-response.
        ConnectorError::other(error.into(), Some(ErrorKind::TransientError))
    } else {
        ConnectorError::other(error.into(), None)
    }
}

/// The first error of type `E` among `error`'s causes.
fn cause<'a, E: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a E> {
    let mut next = error.source();
    while let Some(cause) = next {
        if let Some(found) = cause.downcast_ref::<E>() {
            return Some(found);
        }
        next = cause.source();
    }
    None
}

#[cfg(test)]
mod tests;
