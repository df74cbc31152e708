//! Helpers shared by the configuration's tests: a valid sources JSON, an environment from
//! pairs, and the start-up error a sources JSON gives.

use std::collections::HashMap;

use super::sources::Sources;

/// Two valid sources: `stripe` with two secrets and the defaults, `gh` with every field set.
pub(crate) const GOOD: &str = r#"[
        {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_a", "whsec_b"]},
        {"name": "gh", "scheme": "github", "secrets": ["s"], "mode": "inline",
         "tolerance_secs": 60, "max_body_bytes": 100, "store_payload": false}
    ]"#;

/// A variable lookup over `vars`, as [`crate::config::Settings::from_lookup`] takes.
pub(crate) fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| vars.get(name).cloned()
}

/// The start-up error's text for the sources JSON `json`; panics when it is valid.
pub(crate) fn error_of(json: &str) -> String {
    match Sources::from_json(json) {
        Ok(_) => panic!("expected an error for {json}"),
        Err(e) => e.to_string(),
    }
}
