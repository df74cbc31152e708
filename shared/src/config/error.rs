//! [`ConfigError`]: why the configuration could not be loaded, and the redaction of the sources
//! JSON's parse errors (a secret given in the wrong place is never printed).

use std::path::PathBuf;

use super::github_hook::GithubHookError;
use super::targets::TargetError;
use hookledger_verify::VerifierError;

/// Why the configuration could not be loaded. All of these stop the function at cold start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is not set.
    #[error("{0} must be set")]
    Missing(&'static str),
    /// The console function was given no allow rule: it would admit every token of its issuer
    /// and audience.
    #[error(
        "the console must be told who may use it: set at least one of \
         HOOKLEDGER_CONSOLE_REQUIRED_SCOPES, HOOKLEDGER_CONSOLE_ALLOWED_SUBJECTS, \
         HOOKLEDGER_CONSOLE_ALLOWED_EMAIL_DOMAINS and HOOKLEDGER_CONSOLE_ALLOWED_GROUPS \
         (the template's ConsoleRequiredScopes, ConsoleAllowedSubjects, \
         ConsoleAllowedEmailDomains, ConsoleAllowedGroups)"
    )]
    ConsoleOpenToAnyone,
    /// More than one of `HOOKLEDGER_SOURCES`, `HOOKLEDGER_SOURCES_FILE` and
    /// `HOOKLEDGER_SOURCES_SECRET_ARN` is set.
    #[error("set only one of HOOKLEDGER_SOURCES, HOOKLEDGER_SOURCES_FILE and HOOKLEDGER_SOURCES_SECRET_ARN")]
    SourcesAmbiguous,
    /// Both `DATABASE_URL` and `HOOKLEDGER_DB_SECRET_ARN` are set.
    #[error("set only one of DATABASE_URL and HOOKLEDGER_DB_SECRET_ARN")]
    DatabaseAmbiguous,
    /// A secret could not be fetched from Secrets Manager or has the wrong shape.
    #[error(transparent)]
    Secrets(#[from] crate::secrets::SecretsError),
    /// The sources file could not be read.
    #[error("cannot read HOOKLEDGER_SOURCES_FILE {path}: {source}")]
    SourcesFile {
        /// The path that was given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The sources JSON does not parse, or has an unknown scheme, mode or field. The message
    /// names keys and enum values but never a string value (serde quotes values such as a
    /// secret given where a list was expected: `invalid type: string "whsec_..."`). The parser's
    /// error is kept but is deliberately not this error's `source`, so no error chain (a log
    /// line's, a start-up message's) can reach its text.
    #[error("sources JSON is invalid: {}", redacted_json_error(.0))]
    SourcesJson(serde_json::Error),
    /// One source is configured wrongly.
    #[error("source {name:?}: {problem}")]
    Source {
        /// The source's name as configured.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The source's verification cannot be prepared: no secret, a secret the scheme cannot
    /// use, or an invalid `generic` block (never includes a secret).
    #[error("source {name:?}: {error}")]
    Verifier {
        /// The source's name.
        name: String,
        /// Why.
        #[source]
        error: VerifierError,
    },
    /// A GitHub source's `github_hook` is configured wrongly (never includes the key or the
    /// token).
    #[error("source {name:?}: {error}")]
    GithubHook {
        /// The source's name.
        name: String,
        /// What is wrong with the hook.
        #[source]
        error: GithubHookError,
    },
    /// One of the source's outbox targets is configured wrongly (never includes a secret).
    #[error("source {name:?}: {error}")]
    Target {
        /// The source's name.
        name: String,
        /// What is wrong with the target.
        #[source]
        error: TargetError,
    },
    /// Two settings that cannot work together.
    #[error("{first} and {second} cannot work together: {rule}")]
    Incompatible {
        /// One setting.
        first: &'static str,
        /// The other.
        second: &'static str,
        /// The rule, with both values.
        rule: String,
    },
    /// A numeric variable does not parse or is out of range.
    #[error("{var} must be {expected}, got {value:?}")]
    Number {
        /// The variable's name.
        var: &'static str,
        /// What was expected, e.g. "a positive integer".
        expected: &'static str,
        /// The value found.
        value: String,
    },
}

/// serde_json's message with every double-quoted value replaced by `"[redacted]"`: keys and enum
/// variants are quoted with backticks and stay; string values (a secret in the wrong place) go.
fn redacted_json_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let mut out = String::with_capacity(text.len());
    let mut parts = text.split('"');
    if let Some(first) = parts.next() {
        out.push_str(first);
    }
    let mut inside = true;
    for part in parts {
        if inside {
            out.push_str("\"[redacted]\"");
        } else {
            out.push_str(part);
        }
        inside = !inside;
    }
    out
}

impl From<serde_json::Error> for ConfigError {
    fn from(error: serde_json::Error) -> Self {
        Self::SourcesJson(error)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::error_of;

    #[test]
    fn a_secret_in_the_wrong_place_is_not_printed_in_the_start_up_error() {
        let e = error_of(r#"[{"name": "s", "scheme": "stripe", "secrets": "whsec_topsecret"}]"#);
        assert!(e.contains("invalid type"), "{e}");
        assert!(!e.contains("whsec_topsecret"), "{e}");
        let e = error_of(r#"[{"name": "s", "scheme": "stripe", "secrets": [1, "whsec_x"]}]"#);
        assert!(!e.contains("whsec_x"), "{e}");
    }
}
