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
