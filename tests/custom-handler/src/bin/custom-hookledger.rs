//! The operator CLI of a team whose handlers are this crate's: hookledger's `hookledger`
//! command, handed this crate's [`custom_handler::APP`].

fn main() -> std::process::ExitCode {
    cli::main(custom_handler::APP)
}
