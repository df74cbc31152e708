//! The `sweeper` function (template.yaml), with our handlers.

fn main() -> Result<(), hookledger::Error> {
    hookledger::sweeper::main()
}
