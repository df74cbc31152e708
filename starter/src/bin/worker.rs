//! The `worker` function (template.yaml), with our handlers.

fn main() -> Result<(), hookledger::Error> {
    hookledger::worker::main(webhooks::APP)
}
