//! What the end-to-end tests share: a scratch HOME with a config and a login, the built
//! `lembas` binary run in it, and the test instance's handshake. Each test binary uses a part.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use lembas::instance::{Event, InstanceOptions, TestInstance};
use lembas_core::client::ClientEvent;
use lembas_core::jsonrpc::{Id, RpcError};
use serde_json::{json, Value};

pub mod editor;
pub mod model;
pub mod programs;
pub mod scripted;

use scripted::with_scripted_engine;

/// The device token of these tests: it must appear in no output of the binary.
pub const TOKEN: &str = "tok-S3CRET-e2e-0123456789abcdef";

pub const T: Duration = Duration::from_secs(10);

pub struct Home {
    pub dir: tempfile::TempDir,
    /// The device's one root (with a `proj` directory in it), canonical.
    pub work: PathBuf,
    /// `LEMBAS_LOG` for the processes (`trace` proves the token stays out of every log line;
    /// a flood test wants less).
    pub log_level: &'static str,
}

impl Home {
    /// Remote work on over `work`, which is trusted.
    pub fn new() -> Home {
        Home::with_remote("")
    }

    /// [`Home::new`], with `extra` lines added to the `remote:` block (each `  key: value\n`).
    pub fn with_remote(extra: &str) -> Home {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("proj")).unwrap();
        let work = std::fs::canonicalize(work).unwrap();
        std::fs::create_dir_all(dir.path().join("config/lembas")).unwrap();
        std::fs::write(dir.path().join("token.txt"), format!("{TOKEN}\n")).unwrap();
        let home = Home {
            dir,
            work,
            log_level: "trace",
        };
        home.write_config(&format!(
            "remote:\n  enabled: true\n  roots: [{w}]\n{extra}trusted: [{w}]\n",
            w = home.work.display()
        ));
        home
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write config.yaml. These tests read the scripted engine's replies: `engine: scripted`
    /// is added unless `text` chooses an engine.
    pub fn write_config(&self, text: &str) {
        let text = &with_scripted_engine(text);
        let path = self.path().join("config/lembas/config.yaml");
        // Through a rename, as editors save: the watcher never reads half a file.
        let tmp = path.with_extension("yaml.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lembas"));
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env(
                "SHELL",
                programs::on_path("bash").unwrap_or_else(|| "/bin/bash".into()),
            )
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env("XDG_STATE_HOME", self.path().join("state"))
            .env("LEMBAS_LOG", self.log_level);
        c
    }

    pub fn login(&self, url: &str) -> Output {
        let tf = self.path().join("token.txt");
        let out = self
            .cmd(&["login", url, "--token-file", tf.to_str().unwrap()])
            .output()
            .unwrap();
        assert_no_token(&out.stdout);
        assert_no_token(&out.stderr);
        out
    }

    /// Save a login to `url` as `lembas login` does, without asking the instance (whose token
    /// may be another: `lembas login` would refuse it).
    pub fn save_login(&self, url: &str) {
        let dir = self.path().join("config/lembas");
        std::fs::write(dir.join("login.json"), json!({ "url": url }).to_string()).unwrap();
        std::fs::write(dir.join("token"), TOKEN).unwrap();
    }

    /// Run a one-shot command (`sessions ...`) to its end.
    pub fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = self.cmd(args).output().unwrap();
        assert_no_token(&out.stdout);
        assert_no_token(&out.stderr);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// An editor on `lembas serve --stdio -v` here (relayed to the hub when a service runs),
    /// its log in this HOME.
    pub fn editor(&self) -> editor::Editor {
        let log = self.path().join(format!("serve-{}.log", rand_suffix()));
        editor::Editor::spawn(self.cmd(&["serve", "--stdio", "-v"]), Some(log))
    }

    /// Start `lembas link` (logged in already).
    pub fn link(&self) -> Device {
        let log = self.path().join(format!("link-{}.log", rand_suffix()));
        let verbose = if self.log_level == "trace" {
            "-vv"
        } else {
            "-v"
        };
        let child = self
            .cmd(&["link", verbose])
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                std::fs::File::create(log.with_extension("out")).unwrap(),
            ))
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        Device { child, log }
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

pub fn assert_no_token(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    assert!(!text.contains(TOKEN), "the device token leaked: {text}");
    assert!(
        !text.contains("S3CRET"),
        "part of the device token leaked: {text}"
    );
}

/// A running `lembas link`; killed when dropped, and then its output must hold no token.
pub struct Device {
    pub child: Child,
    pub log: PathBuf,
}

impl Device {
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait for the process to end on its own.
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGKILL, as a crash: the process is gone when this returns, with its log so far.
    pub fn sigkill(&mut self) -> String {
        use std::os::unix::process::ExitStatusExt;
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{status:?}");
        self.stderr()
    }

    /// Its resident memory now.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("lembas link's log:\n{}", self.stderr());
            return;
        }
        assert_no_token(self.stderr().as_bytes());
        assert_no_token(&std::fs::read(self.log.with_extension("out")).unwrap_or_default());
    }
}

/// Wait for the client's handshake to finish; the capabilities the device listed.
pub async fn ready(instance: &TestInstance) -> Vec<String> {
    let (e, seen) = instance
        .wait_for(T, |e| matches!(e, Event::Client(ClientEvent::Ready { .. })))
        .await;
    match e {
        Some(Event::Client(ClientEvent::Ready { capabilities })) => capabilities,
        other => panic!("no Ready: {other:?} after {seen:?}"),
    }
}

/// A test instance, and `lembas link` in `home` logged in to it and past the handshake (with
/// the capabilities it listed).
pub async fn linked(home: Home) -> (TestInstance, Home, Device, Vec<String>) {
    let instance = instance().await;
    assert!(home.login(&instance.url()).status.success());
    let device = home.link();
    let caps = ready(&instance).await;
    (instance, home, device, caps)
}

/// A test instance on loopback that takes [`TOKEN`].
pub async fn instance() -> TestInstance {
    TestInstance::start(InstanceOptions {
        token: TOKEN.into(),
        ..Default::default()
    })
    .await
    .unwrap()
}

/// The answer to the instance client's request `id`, and every event seen until it came.
pub async fn answer(instance: &TestInstance, id: &Id) -> (Result<Value, RpcError>, Vec<Event>) {
    let (e, seen) = instance
        .wait_for(
            T,
            |e| matches!(e, Event::Client(ClientEvent::Answer { id: i, .. }) if i == id),
        )
        .await;
    match e {
        Some(Event::Client(ClientEvent::Answer { outcome, .. })) => (outcome, seen),
        other => panic!("no answer to {id:?}: {other:?} after {seen:?}"),
    }
}

/// A call through the instance's client, and its answer (an error as `"<code> <message>"`).
pub async fn call(instance: &TestInstance, method: &str, params: Value) -> Result<Value, String> {
    let id = instance
        .call(method, params)
        .await
        .map_err(|e| e.to_string())?;
    answer(instance, &id)
        .await
        .0
        .map_err(|e| format!("{} {}", e.code, e.message))
}

/// A new session in `cwd`; its id.
pub async fn new_session(instance: &TestInstance, cwd: &Path) -> String {
    let r = call(
        instance,
        "session/new",
        json!({ "cwd": cwd, "mcpServers": [] }),
    )
    .await
    .unwrap_or_else(|e| panic!("session/new: {e}"));
    r["sessionId"].as_str().unwrap().to_string()
}
