//! The service's request conversion on arbitrary protobuf bytes: a `TranslateRequest` becomes
//! an `OpRequest` and is validated as `Translate` would, or is refused with an error; never a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = umd::service::check_request_bytes(data);
});
