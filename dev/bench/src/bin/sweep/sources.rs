//! The sources the bench configures: the claim traffic's two, and the auditor's four.

/// The sources of the sweep phases' ledger and claim traffic (`github` first: the plan is of
/// its batches).
pub const SOURCES: [&str; 2] = ["github", "stripe"];

/// Two inline sources; the bench never verifies a signature, so the secrets are placeholders.
pub const SOURCES_JSON: &str = r#"[
  {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_bench_placeholder"], "mode": "inline"},
  {"name": "github", "scheme": "github", "secrets": ["bench-placeholder"], "mode": "inline"}
]"#;

/// The auditor's sources: the bench's two and two more (one deferred), as a deployment with a
/// few providers has.
pub const AUDIT_SOURCES_JSON: &str = r#"[
  {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_bench_placeholder"], "mode": "inline"},
  {"name": "github", "scheme": "github", "secrets": ["bench-placeholder"], "mode": "inline"},
  {"name": "shopify", "scheme": "shopify", "secrets": ["bench-placeholder"], "mode": "inline"},
  {"name": "stripe-deferred", "scheme": "stripe", "secrets": ["whsec_bench_placeholder"], "mode": "deferred"}
]"#;

/// The sources the per-source statements are timed for (the audit runs them once per source);
/// the table shows the slowest.
pub const AUDIT_SOURCE_NAMES: [&str; 4] = ["stripe", "github", "shopify", "stripe-deferred"];
