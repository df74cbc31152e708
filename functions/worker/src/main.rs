//! The `worker` function's binary in this repository's reference deployment: the one call a
//! team's own binary makes too (`worker::main`, whose docs say what the function does), with
//! this repository's handlers (`handlers::APP`, handlers/src/lib.rs).

fn main() -> Result<(), lambda_runtime::Error> {
    worker::main(handlers::APP)
}
