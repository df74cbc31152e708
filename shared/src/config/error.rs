//! [`ConfigError`]: why the configuration could not be loaded, and the redaction of the sources
//! JSON's parse errors (a secret given in the wrong place is never printed).

use std::path::PathBuf;

use serde_json::error::Category;

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
    /// says the kind of problem, what was expected and where (line and column), and names our
    /// field names and enum values but never a value of the input (serde quotes values such as
    /// a secret given where a list was expected: `invalid type: string "whsec_..."`). The parser's
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
    /// One of the source's SQL handlers is configured wrongly: its number, event type
    /// patterns and statement are named (never a value of an event).
    #[error("source {name:?}: {error}")]
    SqlHandler {
        /// The source's name.
        name: String,
        /// What is wrong with the handler.
        #[source]
        error: super::sql_handlers::SqlHandlerError,
    },
    /// Payload encryption's local keys cannot be used (never includes key material).
    #[error("{var}: {problem}")]
    PayloadKeys {
        /// The variable.
        var: &'static str,
        /// What is wrong with the keys.
        problem: String,
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

/// serde_json's error rebuilt from what is known to be ours: its category, the shape our types
/// expected, our own field names, and the position (`at line L column C`). Nothing the input
/// spelled is echoed but an unknown key or enum value that reads like a name
/// ([`reads_like_a_name`]), because a typo there is the common mistake.
///
/// serde quotes a string value with `{:?}` (`invalid type: string "whsec_..."`), an unknown
/// variant and an unknown key between backticks, all unescaped for our purpose: a secret with a
/// `"`, a `\` or a backtick in it cannot be cut out of that text reliably, so the text of a value
/// is never kept. Syntax and end-of-input messages are serde_json's fixed texts and stay whole.
fn redacted_json_error(error: &serde_json::Error) -> String {
    let position = format!(" at line {} column {}", error.line(), error.column());
    let text = error.to_string();
    let message = text.strip_suffix(&position).unwrap_or(&text);
    let safe = match error.classify() {
        Category::Syntax | Category::Eof => message.to_owned(),
        Category::Io => "cannot be read".to_owned(),
        Category::Data => redacted_data_message(message),
    };
    if error.line() == 0 {
        safe
    } else {
        format!("{safe}{position}")
    }
}

/// Longest unknown key or enum value [`redacted_json_error`] repeats, characters (our longest
/// field name has 25, our longest enum value 17; a secret is longer or has upper case).
const MAX_ECHOED_NAME_LEN: usize = 32;

/// Whether an unknown key or enum value of the input may be repeated: 1 to
/// [`MAX_ECHOED_NAME_LEN`] characters of `[a-z0-9_-]`, the alphabet of our names.
fn reads_like_a_name(word: &str) -> bool {
    (1..=MAX_ECHOED_NAME_LEN).contains(&word.len())
        && word
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// What serde calls an unexpected value, by kind (serde's `de::Unexpected`'s Display): the word
/// is kept, whatever follows it (the value) is not.
const UNEXPECTED_KINDS: [&str; 16] = [
    "boolean",
    "integer",
    "floating point",
    "character",
    "string",
    "byte array",
    "unit value",
    "Option value",
    "newtype struct",
    "sequence",
    "map",
    "enum",
    "unit variant",
    "newtype variant",
    "tuple variant",
    "struct variant",
];

/// A data error's message (serde's `de::Error` texts) without any value of the input. What our
/// types expected comes last in serde's texts (`..., expected a sequence`), so it is cut at the
/// last `, expected `: a value containing that text can only move the cut to the right.
fn redacted_data_message(message: &str) -> String {
    let expected = message
        .rfind(", expected ")
        .map(|at| &message[at..])
        .unwrap_or("");
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(unexpected) = message.strip_prefix(prefix) {
            let kind = UNEXPECTED_KINDS
                .iter()
                .find(|kind| {
                    unexpected
                        .strip_prefix(**kind)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', ',']))
                })
                .unwrap_or(&"a value");
            return format!("{prefix}{kind}{expected}");
        }
    }
    for (prefix, what) in [
        ("unknown variant `", "unknown variant"),
        ("unknown field `", "unknown field"),
    ] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let name = rest
                .strip_suffix(expected)
                .and_then(|name| name.strip_suffix('`'))
                .filter(|name| reads_like_a_name(name));
            return match name {
                Some(name) => format!("{what} `{name}`{expected}"),
                None => format!("{what}{expected}"),
            };
        }
    }
    // Named by our types, never by the input: `missing field `secrets``, `duplicate field
    // `mode``, `invalid length 0, expected ...`.
    for fixed in ["missing field `", "duplicate field `", "invalid length "] {
        if message.starts_with(fixed) {
            return message.to_owned();
        }
    }
    "a value does not fit the expected shape".to_owned()
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

    /// serde renders a string value with `{:?}`: a `"` inside it becomes `\"`, so splitting the
    /// message on `"` once let the middle of such a secret through. Every escape JSON and Rust's
    /// `Debug` know, in every place serde quotes a value: a wrong type, an unknown variant.
    #[test]
    fn a_secret_with_quotes_backslashes_or_escapes_is_not_printed_in_any_part() {
        let secrets = [
            r#"whsec_a\"MIDDLEQUOTE\"end"#,
            r#"whsec_\\MIDDLEBACKSLASH\\"#,
            r#"whsec_\u0022MIDDLEUNICODE\u0022x"#,
            r#"whsec_\u00e9MIDDLEACCENT\n\tTAB"#,
            r#"whsec_`MIDDLEBACKTICK`, expected nothing"#,
        ];
        for secret in secrets {
            let cases = [
                format!(r#"[{{"name": "s", "scheme": "stripe", "secrets": "{secret}"}}]"#),
                format!(r#"[{{"name": "s", "scheme": "stripe", "secrets": [1, "{secret}"]}}]"#),
                format!(r#"[{{"name": "s", "scheme": "{secret}", "secrets": ["x"]}}]"#),
                format!(
                    r#"[{{"name": "s", "scheme": "stripe", "mode": "{secret}", "secrets": []}}]"#
                ),
                format!(
                    r#"[{{"name": "s", "scheme": "stripe", "secrets": [], "shadow": "{secret}"}}]"#
                ),
            ];
            for json in cases {
                let e = error_of(&json);
                assert!(e.starts_with("sources JSON is invalid: "), "{e}");
                assert!(!e.contains("MIDDLE"), "{e}");
                assert!(!e.contains("whsec_"), "{e}");
                assert!(e.contains(" at line 1 column "), "the position stays: {e}");
            }
        }
    }

    #[test]
    fn the_category_the_expected_shape_and_the_known_names_stay() {
        let e = error_of(r#"[{"name": "s", "scheme": "stripe", "secrets": "whsec_a"}]"#);
        assert!(
            e.contains("invalid type: string, expected a sequence"),
            "{e}"
        );
        let e = error_of(r#"[{"name": "s", "scheme": "strip", "secrets": ["x"]}]"#);
        assert!(
            e.contains("unknown variant `strip`, expected one of `stripe`"),
            "{e}"
        );
        let e = error_of(r#"[{"name": "s", "scheme": "stripe"}]"#);
        assert!(e.contains("missing field `secrets`"), "{e}");
        let e = error_of(r#"[{"name": "s", "scheme": "stripe", "secrets": [], "sekrets": 1}]"#);
        assert!(
            e.contains("unknown field `sekrets`, expected one of `name`"),
            "{e}"
        );
        let e =
            error_of(r#"[{"name": "s", "scheme": "stripe", "secrets": [], "tolerance_secs": -1}]"#);
        assert!(e.contains("invalid value: integer, expected u64"), "{e}");
        // A lowercase secret is longer than any name of ours.
        let e = error_of(r#"[{"name": "s", "scheme": "shpss_0123456789abcdef0123456789abcdef"}]"#);
        assert!(e.contains("unknown variant, expected one of"), "{e}");
        assert!(!e.contains("shpss_"), "{e}");
        let e = error_of(r#"[{"name": "s", "#);
        assert!(e.contains("EOF while parsing"), "{e}");
    }
}
