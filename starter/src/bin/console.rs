//! The `console` function (template.yaml), with our handlers.

fn main() -> Result<(), hookledger::Error> {
    hookledger::console::main(webhooks::APP)
}
