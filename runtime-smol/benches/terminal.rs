//! `cargo bench -p lembas --bench terminal`: bytes per second of `cat` of a large file through
//! a remote terminal (a real PTY in `lembas link`, `_lembas/terminal/output` frames over a
//! loopback WebSocket, decoded by the test instance's client), against two baselines measured
//! in the same run: reading the same file, and `cat` of it through a bare PTY of this process
//! (no protocol), which tells the PTY's own cost from the link's.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use lembas::instance::{Event, InstanceOptions, TestInstance};
use lembas::terminal::{OpenSpec, Terminal};
use lembas_core::client::ClientEvent;
use serde_json::json;

const FILE_BYTES: usize = 32 * 1024 * 1024;
const MARK: &str = "END-OF-CAT";

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.txt");
    write_text(&file);
    let size = std::fs::metadata(&file).unwrap().len() as f64;

    let start = Instant::now();
    let read = std::fs::read(&file).unwrap();
    let read_s = start.elapsed().as_secs_f64();
    assert_eq!(read.len() as f64, size);

    let pty_s = smol::block_on(bare_pty(&file, dir.path()));
    let link_s = smol::block_on(through_link(&file, dir.path()));

    let mib = |s: f64| size / s / (1024.0 * 1024.0);
    println!("terminal: cat of {:.0} MiB", size / (1024.0 * 1024.0));
    println!("  reading the file          {:>9.1} MiB/s", mib(read_s));
    println!("  cat through a bare PTY    {:>9.1} MiB/s", mib(pty_s));
    println!("  cat through the terminal  {:>9.1} MiB/s", mib(link_s));
    println!(
        "  ratio terminal/read {:.4}, terminal/bare PTY {:.2}",
        read_s / link_s,
        pty_s / link_s
    );
}

/// Lines of 76 printable characters, as base64 text is.
fn write_text(path: &Path) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut raw = Vec::with_capacity(FILE_BYTES * 3 / 4);
    while raw.len() < FILE_BYTES * 3 / 4 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        raw.extend_from_slice(&x.to_le_bytes());
    }
    let text = base64::engine::general_purpose::STANDARD.encode(&raw);
    let mut out = String::with_capacity(text.len() + text.len() / 76 + 1);
    for line in text.as_bytes().chunks(76) {
        out.push_str(std::str::from_utf8(line).unwrap());
        out.push('\n');
    }
    std::fs::write(path, out).unwrap();
}

fn command_line(file: &Path) -> String {
    // Quoted so the typed line's echo does not carry the mark.
    format!("stty -echo; cat {}; echo END-OF-''CAT\r", file.display())
}

/// `cat` through a PTY this process reads itself.
async fn bare_pty(file: &Path, cwd: &Path) -> f64 {
    let t = Terminal::open(&OpenSpec {
        shell: "/bin/sh".into(),
        cwd: cwd.to_path_buf(),
        cols: 80,
        rows: 24,
        integration: false,
        host: "bench".into(),
        env: Vec::new(),
    })
    .unwrap();
    let start = Instant::now();
    t.write_all(command_line(file).as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut tail = Vec::new();
    loop {
        let n = t.read(&mut buf).await.unwrap();
        assert!(n > 0, "the shell ended before the mark");
        tail.extend_from_slice(&buf[..n]);
        if find(&tail, MARK.as_bytes()) {
            break;
        }
        let keep = tail.len().saturating_sub(MARK.len());
        tail.drain(..keep);
    }
    let s = start.elapsed().as_secs_f64();
    let _ = t.hangup();
    s
}

fn find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// `cat` through `lembas link`'s terminal to the test instance's client.
async fn through_link(file: &Path, scratch: &Path) -> f64 {
    let instance = TestInstance::start(InstanceOptions {
        token: "bench-token".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let home = scratch.join("home");
    let work = scratch.canonicalize().unwrap();
    std::fs::create_dir_all(home.join("config/lembas")).unwrap();
    std::fs::write(
        home.join("config/lembas/config.yaml"),
        format!(
            "remote:\n  enabled: true\n  roots: [{}]\n  terminal: true\n  \
             terminal_integration: false\n",
            work.display()
        ),
    )
    .unwrap();
    std::fs::write(home.join("token.txt"), "bench-token").unwrap();
    let cmd = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lembas"));
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("SHELL", "/bin/sh")
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_STATE_HOME", home.join("state"));
        c
    };
    let tf = home.join("token.txt");
    let ok = cmd(&[
        "login",
        &instance.url(),
        "--token-file",
        tf.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert!(ok.status.success(), "{ok:?}");
    let _device = Killed(
        cmd(&["link"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let timeout = Duration::from_secs(30);
    instance
        .wait_for(timeout, |e| {
            matches!(e, Event::Client(ClientEvent::Ready { .. }))
        })
        .await
        .0
        .expect("the device linked");
    let id = instance
        .call("_lembas/terminal/open", json!({}))
        .await
        .unwrap();
    let (answer, _) = instance
        .wait_for(
            timeout,
            |e| matches!(e, Event::Client(ClientEvent::Answer { id: i, .. }) if *i == id),
        )
        .await;
    let Some(Event::Client(ClientEvent::Answer { outcome: Ok(r), .. })) = answer else {
        panic!("the terminal did not open: {answer:?}");
    };
    let terminal = r["terminalId"].as_str().unwrap().to_string();
    let start = Instant::now();
    instance
        .notify(
            "_lembas/terminal/input",
            json!({
                "terminalId": terminal,
                "data": base64::engine::general_purpose::STANDARD.encode(command_line(file)),
            }),
        )
        .await
        .unwrap();
    let mut tail = Vec::new();
    let mut received = 0usize;
    loop {
        let e = instance
            .next_event(Duration::from_secs(120))
            .await
            .expect("output stopped before the mark");
        let Event::Client(ClientEvent::Notification { method, params }) = e else {
            continue;
        };
        if method != "_lembas/terminal/output" {
            continue;
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(params["data"].as_str().unwrap())
            .unwrap();
        received += bytes.len();
        tail.extend_from_slice(&bytes);
        if find(&tail, MARK.as_bytes()) {
            break;
        }
        let keep = tail.len().saturating_sub(MARK.len());
        tail.drain(..keep);
    }
    let s = start.elapsed().as_secs_f64();
    assert!(received >= FILE_BYTES, "only {received} bytes arrived");
    s
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
