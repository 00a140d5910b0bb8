//! Pairs a device and a client in memory and prints every frame of the link: the handshake, a
//! session, a streamed prompt, and the same prompt sent again (answered from the turn ledger,
//! not run twice); then an editor's plain-ACP handshake on stdio.
//! Run: `cargo run -p lembas-core --features testing --example handshake`.

use lembas_core::testing::{Dir, Pair};
use serde_json::json;

fn print_from(pair: &Pair, from: usize) -> usize {
    for t in &pair.transcript[from..] {
        let arrow = match t.dir {
            Dir::ToDevice => "client -> device",
            Dir::ToClient => "device -> client",
        };
        println!("{:>9?}  {arrow}  {}", t.at, t.frame);
    }
    pair.transcript.len()
}

fn main() {
    let mut pair = Pair::default_with_roots(&["/home/dev/work"]);
    pair.start().expect("the handshake settles");
    println!("== the instance link (device dials out, says hello, client initializes)");
    let mut seen = print_from(&pair, 0);
    println!(
        "   client ready with capabilities {:?}",
        pair.client.capabilities()
    );

    println!("\n== a session and a prompt that streams (the scripted engine)");
    pair.client
        .call(
            "session/new",
            &json!({ "cwd": "/home/dev/work/app" }),
            pair.now,
        )
        .expect("session/new is always allowed");
    pair.settle().expect("settles");
    let session = pair
        .frames_to_client()
        .iter()
        .find_map(|f| f["result"]["sessionId"].as_str().map(str::to_string))
        .expect("a session was made");
    let text = "say Reading the code.\nsleep 200\nsay Done.";
    pair.client
        .prompt(
            &session,
            json!([{ "type": "text", "text": text }]),
            Some("msg_1"),
            pair.now,
        )
        .expect("prompting is allowed");
    pair.advance(1_000).expect("settles");
    seen = print_from(&pair, seen);

    println!("\n== the same turn id again (a retry after a dropped link): answered, not run");
    pair.client
        .prompt(
            &session,
            json!([{ "type": "text", "text": text }]),
            Some("msg_1"),
            pair.now,
        )
        .expect("prompting is allowed");
    pair.settle().expect("settles");
    print_from(&pair, seen);
    let runs = pair.started.iter().filter(|t| t.turn_id == "msg_1").count();
    println!("   turn msg_1 ran {runs} time(s) on the engine");

    println!("\n== an editor on stdio (plain ACP: no hello, limits null)");
    let editor = pair.open_stdio();
    let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
    println!("editor -> device  {}", String::from_utf8_lossy(init));
    for line in pair.stdio(editor, init).expect("stdio settles") {
        println!("device -> editor  {}", String::from_utf8_lossy(&line));
    }
    let bad = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/nope\"}";
    println!("editor -> device  {}", String::from_utf8_lossy(bad));
    for line in pair.stdio(editor, bad).expect("stdio settles") {
        println!("device -> editor  {}", String::from_utf8_lossy(&line));
    }
}
