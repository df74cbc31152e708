//! What runs for each configured source: the event types with a handler and the built-in
//! targets that take its events, and the gaps where a delivery would be answered 200 `ignored`
//! without anything running (issue "no quiet failures"). The receiver and the worker log it at
//! start-up ([`Coverage::log`]); `hookledger check-config` prints it ([`Coverage::text`]) and
//! with `--strict` fails on a gap.

use crate::handler::Registry;
use crate::Sources;

/// One configured source: what runs for its events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceCoverage {
    /// The source's configured name.
    pub source: String,
    /// Event types with a handler, sorted.
    pub handled: Vec<String>,
    /// Built-in targets as `(name, event type patterns)`, in configuration order. An empty
    /// pattern list takes only what handlers queue with `tx.outbox`.
    pub targets: Vec<(String, Vec<String>)>,
}

/// A configuration where events would be answered and recorded with nothing run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gap {
    /// Handlers are registered for a source name the configuration does not have: they never
    /// run (usually a source renamed in the sources JSON, or registered under another name).
    UnconfiguredSource {
        /// The name the handlers are registered for.
        source: String,
        /// Their event types, sorted.
        event_types: Vec<String>,
    },
    /// A configured source has no handler and no built-in target that takes events: every
    /// event is recorded and answered 200 `ignored`, and the provider stops retrying it.
    NothingRuns {
        /// The configured source.
        source: String,
    },
    /// A `meta` source without a `verify_token`: Meta's GET subscription check is answered
    /// 405, so Meta cannot subscribe the endpoint.
    NoSubscriptionCheck {
        /// The configured source.
        source: String,
    },
}

impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gap::UnconfiguredSource {
                source,
                event_types,
            } => write!(
                f,
                "handlers are registered for source \"{source}\" ({}), which is not configured: they never run",
                event_types.join(", ")
            ),
            Gap::NothingRuns { source } => write!(
                f,
                "source \"{source}\" has no handler and no built-in target: every event is recorded and answered 200 \"ignored\""
            ),
            Gap::NoSubscriptionCheck { source } => write!(
                f,
                "source \"{source}\" (meta) has no verify_token: Meta's GET subscription check is answered 405 and Meta cannot subscribe"
            ),
        }
    }
}

/// What runs for every configured source, and the gaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    /// The configured sources, sorted by name.
    pub sources: Vec<SourceCoverage>,
    /// The gaps: unconfigured sources with handlers first, then sources where nothing runs.
    pub gaps: Vec<Gap>,
}

impl Coverage {
    /// Compares `registry`'s handlers with the configured `sources`.
    pub fn of(registry: &Registry, sources: &Sources) -> Self {
        let registered = registry.registered();
        let mut covered: Vec<SourceCoverage> = sources
            .iter()
            .map(|source| SourceCoverage {
                source: source.name.clone(),
                handled: registered
                    .iter()
                    .find(|(name, _)| *name == source.name)
                    .map(|(_, types)| types.iter().map(|t| (*t).to_owned()).collect())
                    .unwrap_or_default(),
                targets: source
                    .targets
                    .iter()
                    .map(|t| (t.name.clone(), t.event_types.patterns().to_vec()))
                    .collect(),
            })
            .collect();
        covered.sort_by(|a, b| a.source.cmp(&b.source));
        let mut gaps: Vec<Gap> = registered
            .iter()
            .filter(|(name, _)| sources.get(name).is_none())
            .map(|(name, types)| Gap::UnconfiguredSource {
                source: (*name).to_owned(),
                event_types: types.iter().map(|t| (*t).to_owned()).collect(),
            })
            .collect();
        gaps.extend(
            covered
                .iter()
                .filter(|s| s.handled.is_empty() && s.targets.iter().all(|(_, p)| p.is_empty()))
                .map(|s| Gap::NothingRuns {
                    source: s.source.clone(),
                }),
        );
        let mut unsubscribable: Vec<Gap> = sources
            .iter()
            .filter(|s| s.scheme == hookledger_verify::Scheme::Meta && s.verify_token.is_none())
            .map(|s| Gap::NoSubscriptionCheck {
                source: s.name.clone(),
            })
            .collect();
        unsubscribable.sort_by_key(|gap| gap.to_string());
        gaps.extend(unsubscribable);
        Self {
            sources: covered,
            gaps,
        }
    }

    /// One log line per source at `info` (`source`, `handled`, `targets`) and one `warn` per
    /// gap (`gap`), for a function's start-up.
    pub fn log(&self) {
        for s in &self.sources {
            let targets: Vec<&str> = s.targets.iter().map(|(name, _)| name.as_str()).collect();
            tracing::info!(
                source = %s.source,
                handled = %s.handled.join(","),
                targets = %targets.join(","),
                "source coverage"
            );
        }
        for gap in &self.gaps {
            tracing::warn!(gap = gap.kind(), "{gap}");
        }
    }

    /// The report `hookledger check-config` prints: a line per source with its handled event
    /// types and targets, then a `warning:` line per gap.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for s in &self.sources {
            let handled = if s.handled.is_empty() {
                "no handler".to_owned()
            } else {
                format!("handlers for {}", s.handled.join(", "))
            };
            let targets = if s.targets.is_empty() {
                "no target".to_owned()
            } else {
                let each: Vec<String> = s
                    .targets
                    .iter()
                    .map(|(name, patterns)| {
                        if patterns.is_empty() {
                            format!("{name} (queued by handlers only)")
                        } else {
                            format!("{name} ({})", patterns.join(", "))
                        }
                    })
                    .collect();
                format!("targets {}", each.join(", "))
            };
            out.push_str(&format!("source {}: {handled}; {targets}\n", s.source));
        }
        for gap in &self.gaps {
            out.push_str(&format!("warning: {gap}\n"));
        }
        out
    }
}

impl Gap {
    /// The gap's kind for log lines: `unconfigured_source`, `nothing_runs` or
    /// `no_subscription_check`.
    pub fn kind(&self) -> &'static str {
        match self {
            Gap::UnconfiguredSource { .. } => "unconfigured_source",
            Gap::NothingRuns { .. } => "nothing_runs",
            Gap::NoSubscriptionCheck { .. } => "no_subscription_check",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_source_without_a_verify_token_is_a_gap() {
        let mut registry = Registry::new();
        registry.register("wa", "messages", crate::handler_fn!(noop));
        registry.register("wa2", "messages", crate::handler_fn!(noop));
        let coverage = Coverage::of(
            &registry,
            &sources(
                r#"[{"name": "wa", "scheme": "meta", "secrets": ["s"]},
                    {"name": "wa2", "scheme": "meta", "secrets": ["s"], "verify_token": "t"}]"#,
            ),
        );
        assert_eq!(
            coverage.gaps,
            vec![Gap::NoSubscriptionCheck {
                source: "wa".into()
            }]
        );
        assert!(
            coverage.text().contains("has no verify_token"),
            "{}",
            coverage.text()
        );
    }
    use crate::effect::{Effect, Event, HandlerError};
    use crate::ledger::Tx;

    async fn noop(_: &mut Tx<'_>, _: &Event<'_>) -> Result<Effect, HandlerError> {
        Ok(Effect::ok(serde_json::json!({})))
    }

    fn sources(json: &str) -> Sources {
        Sources::from_json(json).unwrap()
    }

    /// The issue's case: a handler registered for `billing`, the source configured as
    /// `stripe-live`.
    #[test]
    fn a_handler_for_an_unconfigured_source_and_a_source_where_nothing_runs_are_gaps() {
        let mut registry = Registry::new();
        registry.register("billing", "charge.refunded", crate::handler_fn!(noop));
        let coverage = Coverage::of(
            &registry,
            &sources(r#"[{"name": "stripe-live", "scheme": "stripe", "secrets": ["whsec_x"]}]"#),
        );
        assert_eq!(
            coverage.gaps,
            vec![
                Gap::UnconfiguredSource {
                    source: "billing".into(),
                    event_types: vec!["charge.refunded".into()],
                },
                Gap::NothingRuns {
                    source: "stripe-live".into()
                },
            ]
        );
        let text = coverage.text();
        assert!(
            text.contains("source stripe-live: no handler; no target\n"),
            "{text}"
        );
        assert!(text.contains("warning: handlers are registered for source \"billing\" (charge.refunded), which is not configured"), "{text}");
    }

    #[test]
    fn a_source_with_a_handler_or_a_target_taking_events_is_no_gap() {
        let mut registry = Registry::new();
        registry.register("stripe", "invoice.paid", crate::handler_fn!(noop));
        registry.register("stripe", "charge.refunded", crate::handler_fn!(noop));
        let coverage = Coverage::of(
            &registry,
            &sources(
                r#"[{"name": "stripe", "scheme": "stripe", "secrets": ["whsec_x"]},
                    {"name": "gh", "scheme": "github", "secrets": ["s"],
                     "targets": [{"type": "forward", "name": "ci", "url": "https://ci.example.com/hook",
                                  "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "event_types": ["push"]}]}]"#,
            ),
        );
        assert_eq!(coverage.gaps, vec![]);
        assert_eq!(
            coverage.text(),
            "source gh: no handler; targets ci (push)\nsource stripe: handlers for charge.refunded, invoice.paid; no target\n"
        );
    }

    /// A target that takes only what handlers queue does not run anything by itself.
    #[test]
    fn a_target_with_no_event_types_alone_is_a_gap() {
        let coverage = Coverage::of(
            &Registry::new(),
            &sources(
                r#"[{"name": "gh", "scheme": "github", "secrets": ["s"],
                     "targets": [{"type": "forward", "name": "ci", "url": "https://ci.example.com/hook",
                                  "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "event_types": []}]}]"#,
            ),
        );
        assert_eq!(
            coverage.gaps,
            vec![Gap::NothingRuns {
                source: "gh".into()
            }]
        );
        assert!(coverage.text().contains("ci (queued by handlers only)"));
    }
}
