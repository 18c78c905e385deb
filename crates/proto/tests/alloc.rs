//! The hot-path promise, measured: encoding a publication push allocates
//! nothing but its output buffer (once), in both encodings, for JSON and
//! binary payloads. A counting global allocator makes that checkable.
#![allow(clippy::unwrap_used)]
// The one unsafe impl in this crate's tree: a test-only allocator wrapper.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use herald_proto::{Encoding, Push, ServerMsg};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

fn publication(data: &'static [u8]) -> ServerMsg {
    ServerMsg::Push(Push::Publication {
        channel: "chat:room-42".into(),
        offset: 1 << 40,
        data: Bytes::from_static(data),
    })
}

#[test]
fn publication_push_allocates_only_its_buffer() {
    let big_json =
        Box::leak(format!("{{\"text\":\"{}\",\"n\":[1,2,3]}}", "x".repeat(5000)).into_boxed_str());
    let payloads: [&'static [u8]; 4] = [
        br#"{"text":"hello","user":"u1","ts":1700000000}"#,
        b"\x00\x01\xfe\xff binary",
        b"",
        big_json.as_bytes(),
    ];
    for data in payloads {
        let msg = publication(data);
        for enc in [Encoding::Json, Encoding::Binary] {
            // Into an empty buffer: one allocation of exactly the right size,
            // so freezing it into shareable `Bytes` costs nothing more.
            let before = allocs();
            let mut fresh = BytesMut::new();
            enc.encode_server(&msg, &mut fresh);
            assert_eq!(allocs() - before, 1, "{enc:?} {}", data.len());
            assert_eq!(fresh.len(), fresh.capacity(), "{enc:?}: reserve not exact");
            let before = allocs();
            let out = enc.encode_server_bytes(&msg);
            assert_eq!(allocs() - before, 1, "{enc:?} {}", data.len());
            assert_eq!(out, fresh.freeze());

            let mut buf = BytesMut::with_capacity(out.len() + 16);
            let before = allocs();
            enc.encode_server(&msg, &mut buf);
            assert_eq!(
                allocs(),
                before,
                "{enc:?}: allocated into a big enough buffer"
            );
            assert_eq!(buf.freeze(), out);
        }
    }
}
