//! [`ConsoleSettings`]: the console function's own settings (read by
//! [`ConsoleSettings::from_env`], in `config::env`).

/// The `console` function's own settings, besides [`Settings`](crate::config::Settings) (which
/// it reads as every function does): `HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN` (required: the
/// Secrets Manager secret whose text keys the CSRF tokens of every execution environment),
/// `HOOKLEDGER_CONSOLE_REDRIVE` (`true` turns re-drive on; default `false`: read-only) and the
/// allow rule ([`ConsoleAllow`], required).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSettings {
    /// The CSRF key's secret (an ARN, never the value).
    pub csrf_secret_arn: String,
    /// Whether the console may re-drive (else read-only).
    pub redrive: bool,
    /// Who may use it (never empty).
    pub allow: ConsoleAllow,
}

/// Who may use the console function, besides holding a valid JWT of the issuer and audience
/// (API Gateway's authorizer checks those; with a Cognito pool open to sign-up, or a public
/// Google client, anyone can get one). Each list is a comma-separated variable; an empty list
/// is not checked, every non-empty one must match (a token must satisfy all the lists given,
/// any one entry of each), and at least one must be given:
/// [`ConsoleSettings::from_env`] refuses to start otherwise. Compared with the claims API
/// Gateway validated (`requestContext.authorizer.jwt.claims`); names and domains
/// case-insensitively, subjects, groups and scopes exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsoleAllow {
    /// `HOOKLEDGER_CONSOLE_REQUIRED_SCOPES` (template `ConsoleRequiredScopes`, also the
    /// route's `AuthorizationScopes`): the token's `scope` (space-separated) or `scp` claim
    /// must hold one of them.
    pub scopes: Vec<String>,
    /// `HOOKLEDGER_CONSOLE_ALLOWED_SUBJECTS` (`ConsoleAllowedSubjects`): the `sub` claim must
    /// be one of them.
    pub subjects: Vec<String>,
    /// `HOOKLEDGER_CONSOLE_ALLOWED_EMAIL_DOMAINS` (`ConsoleAllowedEmailDomains`): the `email`
    /// claim's domain (after its last `@`) must be one of them, exactly (no subdomains), and
    /// `email_verified` must be `true`. ID tokens carry `email`; most access tokens do not.
    pub email_domains: Vec<String>,
    /// `HOOKLEDGER_CONSOLE_ALLOWED_GROUPS` (`ConsoleAllowedGroups`): the `cognito:groups` or
    /// `groups` claim must hold one of them.
    pub groups: Vec<String>,
}

impl ConsoleAllow {
    /// Whether no list is given (the console would admit every token of the issuer).
    pub fn is_empty(&self) -> bool {
        self.scopes.is_empty()
            && self.subjects.is_empty()
            && self.email_domains.is_empty()
            && self.groups.is_empty()
    }
}
