//! The `auditor` function's binary in this repository's reference deployment: the one call a
//! team's own binary makes too (`auditor::main`, whose docs say what the function does).

fn main() -> Result<(), lambda_runtime::Error> {
    auditor::main()
}
