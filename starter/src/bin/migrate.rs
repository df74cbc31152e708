//! The `migrate` function (template.yaml), with our handlers.

fn main() -> Result<(), hookledger::Error> {
    hookledger::migrate::main(webhooks::APP)
}
