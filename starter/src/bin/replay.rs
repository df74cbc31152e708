//! The `replay` function (template.yaml), with our handlers.

fn main() -> Result<(), hookledger::Error> {
    hookledger::replay::main(webhooks::APP)
}
