//! `check-config` of a team's own CLI says what runs for each source, and a handler registered
//! under a name the configuration does not have is a warning, a failure with `--strict`
//! (issue 25: with the handler registered for one name and the source configured under
//! another, every event was answered 200 `ignored` and `check-config` said nothing).

use std::process::{Command, Output};

fn check_config(sources: &str, strict: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_custom-hookledger"));
    command
        .arg("check-config")
        .env_clear()
        .env("DATABASE_URL", "postgres://127.0.0.1:1/unused")
        .env("HOOKLEDGER_SOURCES", sources);
    if strict {
        command.arg("--strict");
    }
    command.output().expect("the CLI runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// This crate registers `charge.refunded` for the source `stripe`.
#[test]
fn a_source_configured_under_another_name_than_its_handlers_is_a_warning_and_fails_strict() {
    let renamed = r#"[{"name": "stripe-live", "scheme": "stripe", "secrets": ["whsec_x"]}]"#;
    let output = check_config(renamed, false);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains(
            "warning: handlers are registered for source \"stripe\" (charge.refunded), which is not configured"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: source \"stripe-live\" has no handler and no built-in target"),
        "{stdout}"
    );
    let strict = check_config(renamed, true);
    assert_eq!(strict.status.code(), Some(1), "{strict:?}");
    assert!(
        text(&strict.stderr).contains("--strict: 2 warning(s)"),
        "{}",
        text(&strict.stderr)
    );
}

#[test]
fn a_source_whose_handlers_match_passes_strict_and_lists_them() {
    let matching = r#"[{"name": "stripe", "scheme": "stripe", "secrets": ["whsec_x"]}]"#;
    let output = check_config(matching, true);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        text(&output.stdout),
        "configuration: sources stripe\nsource stripe: handlers for charge.refunded; no target\n"
    );
}

#[test]
fn a_target_filter_that_does_not_compile_fails_with_the_source_the_target_and_the_column() {
    let bad = r#"[{"name": "stripe", "scheme": "stripe", "secrets": ["whsec_x"],
                   "targets": [{"name": "big-refunds", "type": "eventbridge",
                                "filter": "body.amount > `1000"}]}]"#;
    let output = check_config(bad, false);
    assert!(!output.status.success(), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "source \"stripe\": target \"big-refunds\": filter: expression \"body.amount > `1000\" \
             is invalid: "
        ) && stderr.contains("(column "),
        "{stderr}"
    );
}
