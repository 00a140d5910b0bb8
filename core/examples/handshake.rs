//! Pairs a device and a client in memory and prints every frame of the link's handshake, then
//! an editor's plain-ACP handshake on stdio. Run: `cargo run -p lembas-core --example handshake`.

use lembas_core::testing::{Dir, Pair};

fn main() {
    let mut pair = Pair::default_with_roots(&["/home/dev/work"]);
    pair.start().expect("the handshake settles");
    println!("== the instance link (device dials out, says hello, client initializes)");
    for t in &pair.transcript {
        let arrow = match t.dir {
            Dir::ToDevice => "client -> device",
            Dir::ToClient => "device -> client",
        };
        println!("{:>6?}  {arrow}  {}", t.at, t.frame);
    }
    println!(
        "   client ready with capabilities {:?}",
        pair.client.capabilities()
    );

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
