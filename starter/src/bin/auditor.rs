//! The `auditor` function (template.yaml), with our handlers.

fn main() -> Result<(), hookledger::Error> {
    hookledger::auditor::main()
}
