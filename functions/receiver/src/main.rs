//! The `receiver` function's binary in this repository's reference deployment: the one call a
//! team's own binary makes too (`receiver::main`, whose docs say what the function does), with
//! this repository's handlers (`handlers::APP`, handlers/src/lib.rs).

fn main() -> Result<(), lambda_runtime::Error> {
    receiver::main(handlers::APP)
}
