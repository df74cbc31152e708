//! The AWS SDK's configuration, loaded in one place for every client hookledger builds
//! (Secrets Manager, KMS, Lambda, SQS, EventBridge): the environment's region, credentials and
//! `AWS_ENDPOINT_URL_*` overrides, as `aws_config` reads them, with [`HttpClient`] as the
//! HTTP client. The SDK crates are built without their default HTTPS client (rustls on
//! aws-lc-rs), so the AWS APIs are called over the same OpenSSL as PostgreSQL
//! ([`crate::https`]); `tests/tests/api/layout.rs` keeps a second TLS stack out.

mod http_client;

pub use http_client::HttpClient;

/// The loader every AWS configuration starts from: the environment's settings (the latest
/// behaviour version) over [`HttpClient`]. A caller may add settings (the outbox's dispatch
/// timeouts) before `load()`.
pub fn loader() -> aws_config::ConfigLoader {
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(HttpClient::shared())
}

/// The environment's AWS configuration over [`HttpClient`] ([`loader`], loaded).
pub async fn load() -> aws_config::SdkConfig {
    loader().load().await
}
