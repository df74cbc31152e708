//! `hookledger`, the operator CLI of this repository's reference deployment: the one call a
//! team's own CLI binary makes too (`cli::main`, whose docs say what it does), with this
//! repository's handlers (`handlers::APP`, handlers/src/lib.rs).

fn main() -> std::process::ExitCode {
    cli::main(handlers::APP)
}
