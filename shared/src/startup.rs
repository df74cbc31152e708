//! A start-up failure as the one message a function stops with (Lambda's init error, the CLI's
//! `hookledger: <reason>`, the migrate function's FAILED reason): the error with the causes it
//! is safe to print.

use crate::config::ConfigError;

/// `error` as a start-up message: its own words, plus its causes
/// ([`crate::error_chain::error_chain`]) where they quote no value: Secrets Manager's refusal
/// (its code, message and request id) and the sources file's I/O error. Every other
/// configuration error is its own words only: a JSON parser's message would quote the value
/// it stopped at, which may be a secret ([`ConfigError::SourcesJson`]). Fatal: the function
/// does not start (the CLI exits 1).
pub fn config_failure(error: &ConfigError) -> String {
    match error {
        ConfigError::Secrets(_) | ConfigError::SourcesFile { .. } => {
            crate::error_chain::error_chain(error)
        }
        other => other.to_string(),
    }
}

/// The variable Lambda (Managed Instances) and cargo lambda's emulator set to the number of
/// invocations an execution environment may run at once.
pub const MAX_CONCURRENCY_VAR: &str = "AWS_LAMBDA_MAX_CONCURRENCY";

/// Drops `AWS_LAMBDA_MAX_CONCURRENCY` when it is `1`: one invocation at a time is what the
/// functions' runtime does anyway, and lambda_runtime would warn at every start that its
/// `concurrency-tokio` feature is off (cargo lambda's emulator, under `make run`, always sets
/// it). Any other value is kept, and so is the runtime's warning: more than one invocation at
/// once is not what these functions are built for.
///
/// Call first thing in `main`, before the async runtime starts any thread: the environment is
/// changed only while the process has one thread.
pub fn drop_sequential_concurrency() {
    if std::env::var(MAX_CONCURRENCY_VAR).is_ok_and(|v| v.trim() == "1") {
        std::env::remove_var(MAX_CONCURRENCY_VAR);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sources_file_error_names_its_cause_and_a_json_error_never_quotes_a_value() {
        let error = ConfigError::SourcesFile {
            path: "/nonexistent/sources.json".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let text = config_failure(&error);
        assert!(text.contains("/nonexistent/sources.json"), "{text}");
        assert!(text.contains("not found"), "{text}");
        let json = serde_json::from_str::<Vec<String>>(r#""whsec_topsecret""#).unwrap_err();
        let text = config_failure(&ConfigError::SourcesJson(json));
        assert!(text.starts_with("sources JSON is invalid"), "{text}");
        assert!(!text.contains("whsec_topsecret"), "{text}");
    }

    /// Found while splitting the errors (issue 23): the parser's error was the JSON error's
    /// `source`, so any error chain of it (a re-read's log line) quoted the secret.
    #[test]
    fn no_error_chain_of_a_json_error_quotes_a_value() {
        let json = serde_json::from_str::<Vec<String>>(r#""whsec_topsecret""#).unwrap_err();
        let text = crate::error_chain::error_chain(&ConfigError::SourcesJson(json));
        assert!(text.starts_with("sources JSON is invalid"), "{text}");
        assert!(!text.contains("whsec_topsecret"), "{text}");
    }
}
