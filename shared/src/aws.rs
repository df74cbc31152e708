//! The AWS SDK's configuration, loaded in one place for every client hookledger builds
//! (Secrets Manager, KMS, Lambda, SQS, EventBridge), with [`HttpClient`] as the HTTP client.
//! The SDK crates are built without their default HTTPS client (rustls on aws-lc-rs), so the
//! AWS APIs are called over the same OpenSSL as PostgreSQL ([`crate::https`]);
//! `tests/tests/api/layout.rs` keeps a second TLS stack out.
//!
//! Two ways to load it, chosen once per process:
//! - **The functions** read the environment alone ([`from_environment`]), which is what Lambda
//!   gives a function: the region, the execution role's credentials, endpoint overrides. So
//!   they never link aws-config's default chain (profiles, SSO, assumed roles, IMDS) nor the
//!   STS, SSO and SSO OIDC clients it brings (issue 29: smaller packages).
//! - **The operator CLI** calls [`use_shared_config_files`] first, and gets aws-config's full
//!   default chain ([`loader`]): `AWS_PROFILE`, `~/.aws/config`, SSO, assumed roles.

mod http_client;

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

use aws_config::meta::credentials::CredentialsProviderChain;
use aws_config::timeout::TimeoutConfig;
use aws_runtime::env_config::EnvConfigValue;
use aws_types::os_shim_internal::Env;
use aws_types::service_config::{LoadServiceConfig, ServiceConfigKey};
pub use http_client::HttpClient;

/// A loader of the whole configuration, as [`use_shared_config_files`] registers it.
type Load = fn() -> Pin<Box<dyn Future<Output = aws_config::SdkConfig> + Send>>;

/// The loader [`load`] uses when one was registered; [`from_environment`] when none was. A
/// function pointer set at run time, so a binary that never registers aws-config's default
/// chain (every function) does not link it.
static LOADER: OnceLock<Load> = OnceLock::new();

/// The SDK's own default connect timeout (aws-config's `timeout_config::default_provider`:
/// 3.1 s), which [`from_environment`] keeps.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// Makes [`load`] use aws-config's full default chain ([`loader`]) for the rest of the
/// process: credentials and region from `AWS_PROFILE` and the shared config files
/// (`~/.aws/config`, `~/.aws/credentials`), SSO, `credential_process`, assumed roles, web
/// identity, the container and instance metadata endpoints. The operator CLI calls it first
/// thing; the functions never do. Calling it again changes nothing.
pub fn use_shared_config_files() {
    let _ = LOADER.set(|| Box::pin(async { loader().load().await }));
}

/// aws-config's default loader (the full default chain, the latest behaviour version) over
/// [`HttpClient`]: what [`load`] uses after [`use_shared_config_files`].
pub fn loader() -> aws_config::ConfigLoader {
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(HttpClient::shared())
}

/// The process's AWS configuration over [`HttpClient`]: [`from_environment`], or aws-config's
/// full default chain once [`use_shared_config_files`] was called.
pub async fn load() -> aws_config::SdkConfig {
    match LOADER.get() {
        Some(load) => load().await,
        None => from_environment().await,
    }
}

/// The AWS configuration a Lambda function gets from its environment, and nothing else (no
/// file, no metadata endpoint), with the latest behaviour version and [`HttpClient`]:
/// - region: `AWS_REGION`, else `AWS_DEFAULT_REGION` (Lambda sets both);
/// - credentials: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` (Lambda
///   sets them from the execution role), else the container credentials endpoint when
///   `AWS_CONTAINER_CREDENTIALS_FULL_URI` or `_RELATIVE_URI` is set (Lambda Managed Instances,
///   ECS, EKS Pod Identity);
/// - endpoints: `AWS_ENDPOINT_URL_<SERVICE>` (`AWS_ENDPOINT_URL_SECRETS_MANAGER`, ...), else
///   `AWS_ENDPOINT_URL`; neither when `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`;
/// - `AWS_USE_FIPS_ENDPOINT`, `AWS_USE_DUALSTACK_ENDPOINT` (`true`/`false`);
/// - the SDK's standard retries (3 attempts) and its 3.1 s connect timeout.
///
/// The SDK reports a missing region or missing credentials on the first call, as with
/// aws-config's loader.
pub async fn from_environment() -> aws_config::SdkConfig {
    let env = Env::real();
    let flag = |name: &str| {
        env.get(name)
            .ok()
            .map(|value| value.trim().eq_ignore_ascii_case("true"))
    };
    let region = aws_config::meta::region::ProvideRegion::region(
        &aws_config::environment::EnvironmentVariableRegionProvider::new(),
    )
    .await;
    let container = aws_config::ecs::EcsCredentialsProvider::builder()
        .configure(
            &aws_config::provider_config::ProviderConfig::empty()
                .with_http_client(HttpClient::shared())
                .with_sleep_impl(aws_smithy_async::rt::sleep::TokioSleep::new()),
        )
        .build();
    let credentials = CredentialsProviderChain::first_try(
        "Environment",
        aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
    )
    .or_else("EcsContainer", container);
    let ignore_endpoints = flag("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS").unwrap_or(false);
    let endpoint_url = if ignore_endpoints {
        None
    } else {
        env.get("AWS_ENDPOINT_URL").ok()
    };
    let mut builder = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .http_client(HttpClient::shared())
        .sleep_impl(aws_smithy_async::rt::sleep::SharedAsyncSleep::new(
            aws_smithy_async::rt::sleep::TokioSleep::new(),
        ))
        .time_source(aws_smithy_async::time::SharedTimeSource::default())
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(credentials),
        )
        .identity_cache(aws_config::identity::IdentityCache::lazy().build())
        .retry_config(aws_config::retry::RetryConfig::standard())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .build(),
        )
        .service_config(EnvironmentServiceConfig {
            env: env.clone(),
            ignore_endpoints,
        });
    builder.set_region(region);
    builder.set_endpoint_url(endpoint_url);
    builder.set_use_fips(flag("AWS_USE_FIPS_ENDPOINT"));
    builder.set_use_dual_stack(flag("AWS_USE_DUALSTACK_ENDPOINT"));
    builder.build()
}

/// Service-specific settings from the environment alone (no shared config file): what an SDK
/// client asks for when it is built, today its endpoint, `AWS_ENDPOINT_URL_<SERVICE_ID>` before
/// `AWS_ENDPOINT_URL` (the AWS SDKs' "service-specific endpoints" setting).
#[derive(Debug)]
struct EnvironmentServiceConfig {
    env: Env,
    /// `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`: no endpoint from the environment.
    ignore_endpoints: bool,
}

impl LoadServiceConfig for EnvironmentServiceConfig {
    fn load_config(&self, key: ServiceConfigKey<'_>) -> Option<String> {
        if self.ignore_endpoints && key.env() == "AWS_ENDPOINT_URL" {
            return None;
        }
        let (value, _source) = EnvConfigValue::new()
            .env(key.env())
            .service_id(key.service_id())
            .load(&self.env, None)?;
        Some(value.into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(env: &'a str, service_id: &'a str) -> ServiceConfigKey<'a> {
        ServiceConfigKey::builder()
            .service_id(service_id)
            .env(env)
            .profile("endpoint_url")
            .build()
            .expect("a complete key")
    }

    #[test]
    fn a_service_s_own_endpoint_comes_before_the_global_one() {
        let config = EnvironmentServiceConfig {
            env: Env::from_slice(&[
                ("AWS_ENDPOINT_URL", "http://global:1"),
                ("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://secrets:2"),
            ]),
            ignore_endpoints: false,
        };
        assert_eq!(
            config.load_config(key("AWS_ENDPOINT_URL", "Secrets Manager")),
            Some("http://secrets:2".to_owned())
        );
        assert_eq!(
            config.load_config(key("AWS_ENDPOINT_URL", "Lambda")),
            Some("http://global:1".to_owned())
        );
    }

    #[test]
    fn ignoring_configured_endpoints_ignores_both() {
        let config = EnvironmentServiceConfig {
            env: Env::from_slice(&[
                ("AWS_ENDPOINT_URL", "http://global:1"),
                ("AWS_ENDPOINT_URL_LAMBDA", "http://lambda:2"),
            ]),
            ignore_endpoints: true,
        };
        assert_eq!(config.load_config(key("AWS_ENDPOINT_URL", "Lambda")), None);
    }
}
