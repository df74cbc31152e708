//! A GitHub source's `github_hook`: which webhook replay lists and redelivers, and how it
//! authenticates to GitHub's REST API (`crate::replay::github`, with [`crate::github_app`]).
//!
//! | `github_hook` | webhook | credential |
//! |---|---|---|
//! | `{"repository": "owner/name", "hook_id": 123}` | `/repos/owner/name/hooks/123` | the source's `api_key`: a token allowed to read and redeliver the hook's deliveries (repository webhooks: read and write) |
//! | `{"organization": "org", "hook_id": 123}` | `/orgs/org/hooks/123` | the source's `api_key`: a token of an organisation owner (organisation webhooks: read and write) |
//! | `{"app_id": 123, "app_private_key": "-----BEGIN RSA PRIVATE KEY-----..."}` | the GitHub App's webhook, `/app/hook` | a JWT (RS256) signed with the app's private key; no `api_key` |
//!
//! Validated at start-up, failing closed; no message ever includes the key or the token.

use std::fmt;

use secrecy::SecretString;
use serde::Deserialize;

/// GitHub's REST API base URL.
pub const GITHUB_API_BASE_URL: &str = "https://api.github.com";

/// `github_hook` as written in the sources JSON (see the module's table).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GithubHookSpec {
    /// A repository webhook's repository, `owner/name`.
    #[serde(default)]
    pub repository: Option<String>,
    /// An organisation webhook's organisation.
    #[serde(default)]
    pub organization: Option<String>,
    /// The repository's or organisation's webhook id (GitHub shows it in the hook's URL).
    #[serde(default)]
    pub hook_id: Option<u64>,
    /// A GitHub App's id: replay reads the app's webhook (`/app/hook`).
    #[serde(default)]
    pub app_id: Option<u64>,
    /// The GitHub App's private key, PEM (RSA), as GitHub generated it.
    #[serde(default)]
    pub app_private_key: Option<String>,
}

impl fmt::Debug for GithubHookSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GithubHookSpec")
            .field("repository", &self.repository)
            .field("organization", &self.organization)
            .field("hook_id", &self.hook_id)
            .field("app_id", &self.app_id)
            .field(
                "app_private_key",
                &self.app_private_key.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

/// Which webhook a GitHub source's deliveries come from.
#[derive(Debug, Clone)]
pub enum GithubHookTarget {
    /// A repository webhook, authenticated with the source's `api_key`.
    Repository {
        /// `owner/name`.
        repository: String,
        /// The hook's id.
        hook_id: u64,
    },
    /// An organisation webhook, authenticated with the source's `api_key`.
    Organization {
        /// The organisation's login.
        organization: String,
        /// The hook's id.
        hook_id: u64,
    },
    /// A GitHub App's webhook, authenticated with a JWT from the app's id and private key.
    App {
        /// The app's id (the JWT's `iss`).
        app_id: u64,
        /// The app's RSA private key, PEM (checked to parse at start-up); never logged.
        private_key: SecretString,
    },
}

/// A GitHub source's webhook, validated.
#[derive(Debug, Clone)]
pub struct GithubHook {
    /// GitHub's API base URL without a trailing slash (`api_base_url`, default
    /// [`GITHUB_API_BASE_URL`]).
    pub base_url: String,
    /// The webhook and its credential.
    pub target: GithubHookTarget,
}

impl GithubHook {
    /// The hook's path under the API base URL: `/repos/{repository}/hooks/{hook_id}`,
    /// `/orgs/{organization}/hooks/{hook_id}` or `/app/hook`.
    pub fn path(&self) -> String {
        match &self.target {
            GithubHookTarget::Repository {
                repository,
                hook_id,
            } => format!("/repos/{repository}/hooks/{hook_id}"),
            GithubHookTarget::Organization {
                organization,
                hook_id,
            } => format!("/orgs/{organization}/hooks/{hook_id}"),
            GithubHookTarget::App { .. } => "/app/hook".to_owned(),
        }
    }

    /// The settings that hold this hook's credential, as an error message names them (never
    /// their values): `api_key`, or `github_hook.app_id and github_hook.app_private_key`.
    pub fn credential_setting(&self) -> &'static str {
        match self.target {
            GithubHookTarget::App { .. } => "github_hook.app_id and github_hook.app_private_key",
            _ => "api_key",
        }
    }
}

/// Why a `github_hook` is refused, naming the field; never the key's or the token's value.
#[derive(Debug, thiserror::Error)]
pub enum GithubHookError {
    /// None or several of `repository`, `organization` and `app_id`.
    #[error("github_hook needs exactly one of repository, organization and app_id")]
    Kind,
    /// `app_private_key` with a repository or organisation hook.
    #[error("github_hook.app_private_key goes with app_id only")]
    KeyWithoutApp,
    /// A repository that is not `owner/name`.
    #[error("github_hook.repository must be \"owner/name\"")]
    Repository,
    /// An organisation that is not a login.
    #[error("github_hook.organization must be an organisation's login ([A-Za-z0-9-])")]
    Organization,
    /// A repository or organisation hook without the source's `api_key`.
    #[error(
        "github_hook.{field} needs api_key: a GitHub token that may read and redeliver the \
         webhook's deliveries"
    )]
    NeedsToken {
        /// `repository` or `organization`.
        field: &'static str,
    },
    /// A repository or organisation hook whose `hook_id` is missing or zero.
    #[error("github_hook.hook_id must be a positive integer")]
    HookId,
    /// An `app_id` of zero.
    #[error("github_hook.app_id must be a positive integer")]
    AppId,
    /// A `hook_id` with `app_id`.
    #[error("github_hook.hook_id does not go with app_id: an app has one webhook")]
    HookIdWithApp,
    /// The source's `api_key` with `app_id`.
    #[error(
        "api_key is not used with github_hook.app_id: replay signs a JWT with \
         github_hook.app_private_key instead; remove api_key"
    )]
    ApiKeyWithApp,
    /// `app_id` without `app_private_key`.
    #[error("github_hook.app_id needs github_hook.app_private_key")]
    NoAppKey,
    /// An `app_private_key` that is not an RSA private key in PEM.
    #[error("github_hook.app_private_key is not an RSA private key in PEM")]
    AppKey(#[source] crate::github_app::JwtError),
}

/// Validates `spec` for a source whose `api_key` is `has_api_key` and whose API base URL is
/// `base_url` (already checked to be http(s), without a trailing slash).
///
/// # Errors
/// A [`GithubHookError`] naming the field: none or several of `repository`, `organization` and
/// `app_id`; a repository not `owner/name`; a missing or zero `hook_id` (or one given with
/// `app_id`); an `app_private_key` missing, or not an RSA private key in PEM; a token-based hook
/// without `api_key`, or an app hook with one. Never the key's or the token's value.
pub fn validate(
    spec: GithubHookSpec,
    has_api_key: bool,
    base_url: String,
) -> Result<GithubHook, GithubHookError> {
    let hook_id = |hook_id: Option<u64>| match hook_id {
        Some(0) | None => Err(GithubHookError::HookId),
        Some(id) => Ok(id),
    };
    let needs_token = |field: &'static str| {
        if has_api_key {
            Ok(())
        } else {
            Err(GithubHookError::NeedsToken { field })
        }
    };
    let target = match (spec.repository, spec.organization, spec.app_id) {
        (Some(repository), None, None) => {
            if spec.app_private_key.is_some() {
                return Err(GithubHookError::KeyWithoutApp);
            }
            let mut parts = repository.split('/');
            let valid = |part: Option<&str>| {
                part.is_some_and(|p| {
                    !p.is_empty()
                        && p.len() <= 100
                        && p != "."
                        && p != ".."
                        && p.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                })
            };
            if !(valid(parts.next()) && valid(parts.next()) && parts.next().is_none()) {
                return Err(GithubHookError::Repository);
            }
            needs_token("repository")?;
            GithubHookTarget::Repository {
                repository,
                hook_id: hook_id(spec.hook_id)?,
            }
        }
        (None, Some(organization), None) => {
            if spec.app_private_key.is_some() {
                return Err(GithubHookError::KeyWithoutApp);
            }
            if organization.is_empty()
                || organization.len() > 100
                || !organization
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                return Err(GithubHookError::Organization);
            }
            needs_token("organization")?;
            GithubHookTarget::Organization {
                organization,
                hook_id: hook_id(spec.hook_id)?,
            }
        }
        (None, None, Some(app_id)) => {
            if app_id == 0 {
                return Err(GithubHookError::AppId);
            }
            if spec.hook_id.is_some() {
                return Err(GithubHookError::HookIdWithApp);
            }
            if has_api_key {
                return Err(GithubHookError::ApiKeyWithApp);
            }
            let Some(pem) = spec.app_private_key else {
                return Err(GithubHookError::NoAppKey);
            };
            let private_key = SecretString::from(pem);
            if let Err(error) = crate::github_app::app_key(&private_key) {
                return Err(GithubHookError::AppKey(error));
            }
            GithubHookTarget::App {
                app_id,
                private_key,
            }
        }
        _ => return Err(GithubHookError::Kind),
    };
    Ok(GithubHook { base_url, target })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Sources;

    fn error_of(json: &str) -> String {
        match Sources::from_json(json) {
            Ok(_) => panic!("expected an error for {json}"),
            Err(e) => e.to_string(),
        }
    }

    fn github(fields: &str) -> String {
        format!(r#"[{{"name": "gh", "scheme": "github", "secrets": ["s"], {fields}}}]"#)
    }

    #[test]
    fn each_hook_kind_validates_with_its_credential_and_default_base_url() {
        let sources = Sources::from_json(&github(
            r#""api_key": "ghp_token", "github_hook": {"repository": "acme/shop", "hook_id": 7}"#,
        ))
        .unwrap();
        let hook = sources.get("gh").unwrap().github_hook.clone().unwrap();
        assert_eq!(hook.base_url, GITHUB_API_BASE_URL);
        assert_eq!(hook.path(), "/repos/acme/shop/hooks/7");
        assert_eq!(hook.credential_setting(), "api_key");
        assert!(!format!("{hook:?}").contains("ghp_token"));

        let sources = Sources::from_json(&github(
            r#""api_key": "t", "api_base_url": "http://127.0.0.1:1/",
               "github_hook": {"organization": "acme", "hook_id": 8}"#,
        ))
        .unwrap();
        let hook = sources.get("gh").unwrap().github_hook.clone().unwrap();
        assert_eq!(hook.base_url, "http://127.0.0.1:1");
        assert_eq!(hook.path(), "/orgs/acme/hooks/8");

        let rsa = openssl::rsa::Rsa::generate(2048).unwrap();
        let pem = String::from_utf8(rsa.private_key_to_pem().unwrap()).unwrap();
        let app = github(&format!(
            r#""github_hook": {{"app_id": 99, "app_private_key": {}}}"#,
            serde_json::to_string(&pem).unwrap()
        ));
        let sources = Sources::from_json(&app).unwrap();
        let source = sources.get("gh").unwrap();
        assert!(source.api.is_none());
        let hook = source.github_hook.clone().unwrap();
        assert_eq!(hook.path(), "/app/hook");
        assert!(hook.credential_setting().contains("app_private_key"));
        assert!(!format!("{hook:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn a_wrong_hook_fails_closed_without_printing_a_secret() {
        for (fields, expected) in [
            (
                r#""api_key": "t", "github_hook": {"repository": "acme", "hook_id": 7}"#,
                "owner/name",
            ),
            (
                r#""api_key": "t", "github_hook": {"repository": "a/../b", "hook_id": 7}"#,
                "owner/name",
            ),
            (
                r#""github_hook": {"repository": "a/b", "hook_id": 7}"#,
                "needs api_key",
            ),
            (
                r#""api_key": "t", "github_hook": {"organization": "acme"}"#,
                "hook_id",
            ),
            (
                r#""api_key": "t", "github_hook": {"repository": "a/b", "organization": "c", "hook_id": 1}"#,
                "exactly one",
            ),
            (
                r#""github_hook": {"app_id": 1, "app_private_key": "-----BEGIN TOPSECRET-----"}"#,
                "not an RSA private key",
            ),
            (
                r#""api_key": "ghp_topsecret", "github_hook": {"app_id": 1, "app_private_key": "x"}"#,
                "remove api_key",
            ),
            (
                r#""github_hook": {"app_id": 1}"#,
                "needs github_hook.app_private_key",
            ),
            (r#""github_hook": {"repo": "a/b"}"#, "repo"),
        ] {
            let e = error_of(&github(fields));
            assert!(e.contains(expected), "{fields}: {e}");
            assert!(!e.contains("TOPSECRET") && !e.contains("topsecret"), "{e}");
        }
        let e = error_of(
            r#"[{"name": "s", "scheme": "stripe", "secrets": ["x"],
                 "github_hook": {"organization": "a", "hook_id": 1}}]"#,
        );
        assert!(e.contains("github sources only"), "{e}");
    }

    #[test]
    fn paddle_and_github_keys_default_to_the_public_apis() {
        let sources = Sources::from_json(
            r#"[{"name": "p", "scheme": "paddle", "secrets": ["pdl_x"], "api_key": "k"},
                {"name": "g", "scheme": "github", "secrets": ["x"], "api_key": "k"},
                {"name": "s", "scheme": "stripe", "secrets": ["x"], "api_key": "k"}]"#,
        )
        .unwrap();
        let base = |name: &str| sources.get(name).unwrap().api.clone().unwrap().base_url;
        assert_eq!(base("p"), "https://api.paddle.com");
        assert_eq!(base("g"), "https://api.github.com");
        assert_eq!(base("s"), "https://api.stripe.com");
        let e =
            error_of(r#"[{"name": "s", "scheme": "shopify", "secrets": ["x"], "api_key": "k"}]"#);
        assert!(e.contains("api_base_url"), "{e}");
    }

    #[test]
    fn a_refused_hook_is_typed_and_keeps_the_key_error_as_its_cause() {
        use crate::config::ConfigError;
        use std::error::Error as _;
        let error = Sources::from_json(&github(
            r#""github_hook": {"app_id": 1, "app_private_key": "-----BEGIN TOPSECRET-----"}"#,
        ))
        .unwrap_err();
        assert!(
            matches!(
                &error,
                ConfigError::GithubHook { name, error: GithubHookError::AppKey(_) } if name == "gh"
            ),
            "{error:?}"
        );
        let cause = error
            .source()
            .and_then(|e| e.source())
            .map(ToString::to_string);
        assert_eq!(cause.as_deref(), Some("not a private key in PEM"));
        let refused = Sources::from_json(&github(r#""github_hook": {"hook_id": 1}"#)).unwrap_err();
        assert!(
            matches!(
                refused,
                ConfigError::GithubHook {
                    error: GithubHookError::Kind,
                    ..
                }
            ),
            "{refused:?}"
        );
    }
}
