//! `hookledger check-config --strict` on `sources.json`: every handler's source is configured,
//! and every configured source runs something (a handler registered under a name the sources
//! do not have would answer each event 200 `ignored` and run nothing).

#[test]
fn the_sources_and_the_handlers_match() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hookledger"))
        .args(["check-config", "--strict"])
        .env_clear()
        .env("DATABASE_URL", "postgres://127.0.0.1:1/unused")
        .env(
            "HOOKLEDGER_SOURCES_FILE",
            concat!(env!("CARGO_MANIFEST_DIR"), "/sources.json"),
        )
        .output()
        .expect("the CLI runs");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
