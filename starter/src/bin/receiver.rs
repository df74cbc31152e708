//! The `receiver` function (template.yaml), with our handlers.

fn main() -> Result<(), hookledger::Error> {
    hookledger::receiver::main(webhooks::APP)
}
