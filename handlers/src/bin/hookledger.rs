//! `hookledger`, the operator CLI of this repository's reference deployment: hookledger's CLI
//! with this repository's handlers, the one call a team's own CLI makes too (the starter
//! project's `src/bin/hookledger.rs`).

fn main() -> std::process::ExitCode {
    hookledger::cli::main(handlers::APP)
}
