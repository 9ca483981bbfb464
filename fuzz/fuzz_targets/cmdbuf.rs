//! The command-buffer decoder and validator on arbitrary bytes: never a panic, and whatever
//! decodes re-encodes to a buffer that decodes to the same thing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use umd::Target;
use umd::cmdbuf::CommandBuffer;

fuzz_target!(|data: &[u8]| {
    let Ok(cb) = CommandBuffer::decode(data) else {
        return;
    };
    let _ = cb.validate(None);
    let _ = cb.validate(Some(&Target::cpu().limits));
    let _ = cb.binding_access();
    let again = CommandBuffer::decode(&cb.encode()).expect("an encoded buffer decodes");
    assert_eq!(again, cb, "decode(encode(cb)) == cb");
});
