//! [`ConsoleSettings`]: the console function's own settings (read by
//! [`ConsoleSettings::from_env`], in `config::env`).

/// The `console` function's own settings, besides [`Settings`](crate::config::Settings) (which
/// it reads as every function does): `HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN` (required: the
/// Secrets Manager secret whose text keys the CSRF tokens of every execution environment) and
/// `HOOKLEDGER_CONSOLE_REDRIVE` (`true` turns re-drive on; default `false`: read-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSettings {
    /// The CSRF key's secret (an ARN, never the value).
    pub csrf_secret_arn: String,
    /// Whether the console may re-drive (else read-only).
    pub redrive: bool,
}
