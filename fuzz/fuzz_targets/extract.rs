#![no_main]
//! `cargo fuzz run extract`: see hookledger_fuzzing::extract (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::extract(data));
