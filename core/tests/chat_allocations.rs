//! The chunk parser is on the hot path: a text delta without escapes costs one allocation (the
//! `String` handed out), whatever fields the server adds around it; a usage chunk costs none.
//! Counted by a global allocator, per thread so other tests running alongside do not count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use lembas_core::model::chat::{parse_chunk, Delta};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(data: &str, out: &mut Vec<Delta>) -> usize {
    out.clear();
    let before = ALLOCATIONS.with(Cell::get);
    parse_chunk(data, out).unwrap();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn a_text_delta_costs_one_allocation() {
    let mut out = Vec::with_capacity(8);
    let llama = r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":" world"}}],"created":1760000000,"id":"chatcmpl-x","model":"qwen","system_fingerprint":"b6000","object":"chat.completion.chunk","timings":{"prompt_n":10,"predicted_per_second":40.1}}"#;
    assert_eq!(allocations(llama, &mut out), 1);
    assert_eq!(out, vec![Delta::Text(" world".into())]);

    let thought = r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"reasoning_content":"hmm"}}]}"#;
    assert_eq!(allocations(thought, &mut out), 1);
    assert_eq!(out, vec![Delta::Thought("hmm".into())]);

    // Choices other than the first are read past, their strings borrowed, not copied.
    let others = r#"{"choices":[{"index":1,"delta":{"content":"other","reasoning":"also"}}]}"#;
    assert_eq!(allocations(others, &mut out), 0);

    let usage =
        r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}"#;
    assert_eq!(allocations(usage, &mut out), 0);
    assert_eq!(allocations("[DONE]", &mut out), 0);
    assert_eq!(
        allocations(
            r#"{"choices":[{"index":0,"finish_reason":"stop","delta":{}}]}"#,
            &mut out
        ),
        0
    );
}
