//! No `_lembas/directories` answer ever lists or names anything outside the roots. Per seed: a
//! real tree on disk, a root with nested directories (unicode, hidden, spaced names) and
//! symlinks (inside to inside, to the directory outside, relative through `..`, absolute, to
//! `/`, dangling, looping), a directory outside whose every name holds [`TOKEN`], and a random
//! trust list (the outside one included, to tempt it); then random calls on paths made with
//! `..`, `.`, `//`, absolute forms, link names and unicode. A device core is driven with the
//! real shell's listing (`lembas::list_dir`) and path resolution, and:
//!
//! - no result ever holds [`TOKEN`], nor a refusal unless the path asked for did;
//! - every `Dir`'s path is inside the root as written, and an accepted one is inside it
//!   resolved too; a listed directory is inside the root resolved.
//!
//! `LEMBAS_PROPERTY_SEEDS=n` runs n seeds (default 60); see `core/tests/property/mod.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lembas_core::config::DeviceConfig;
use lembas_core::device::{ConnId, ConnKind, Device, Effect, Output};
use lembas_core::rng::Rng;
use lembas_core::Time;
use serde_json::{json, Value};

#[path = "../../core/tests/property/mod.rs"]
mod property;
#[path = "common/tree.rs"]
mod tree;

use tree::{pick, Tree, LOOP_SELF};

/// What every name outside the root holds: no answer may hold it.
const TOKEN: &str = "ZQXJ-outside";
const CALLS: usize = 25;
const DIR_NAMES: &[&str] = &["src", "docs", "é", "日本語", "a b", ".hidden", "x", "Ω"];

#[test]
fn no_directories_answer_lists_anything_outside_the_roots() {
    if let Some(seed) = property::seeds(&[], 60, |seed| run(seed, false)) {
        run(seed, true);
    }
}

/// One seed's tree: the root, the directory outside, and the relative paths made in the root.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    names: Vec<String>,
}

fn world(rng: &mut Rng) -> World {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    let outside = base.join(format!("out-{TOKEN}"));
    std::fs::create_dir_all(&root).unwrap();
    for sub in ["", "deep/er"] {
        std::fs::create_dir_all(outside.join(format!("{TOKEN}-dir")).join(sub)).unwrap();
    }
    let mut tree = Tree::new(root, vec![String::new()]);
    let dirs = 3 + rng.below(8);
    tree.grow(rng, dirs, DIR_NAMES, None);
    let targets = [
        outside.to_str().unwrap().to_string(),
        format!("{}/{TOKEN}-dir", outside.display()),
        format!("../out-{TOKEN}"),
        "../../../../..".to_string(),
        "/".to_string(),
        "..".to_string(),
        ".".to_string(),
        "nowhere".to_string(),
        LOOP_SELF.to_string(),
    ];
    let links = 2 + rng.below(6);
    tree.link(rng, links, &targets, true);
    // Nothing was made beside the root or in the directory outside: a link made under a link
    // that leads up or out lands there (or in `/`).
    let entries = |dir: &PathBuf| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(entries(&base), [format!("out-{TOKEN}"), "root".to_string()]);
    assert_eq!(entries(&outside), [format!("{TOKEN}-dir")]);
    assert_eq!(entries(&outside.join(format!("{TOKEN}-dir"))), ["deep"]);
    World {
        _dir: dir,
        root: tree.base,
        outside,
        names: tree.names,
    }
}

/// A path to ask for: inside, through `..`, absolute outside, odd forms, or none.
fn a_path(rng: &mut Rng, w: &World) -> Option<String> {
    let name = pick(rng, &w.names).clone();
    let root = w.root.to_str().unwrap();
    Some(match rng.below(9) {
        0 => return None,
        1 => format!("{root}/{name}"),
        2 => format!("{root}/{name}/.."),
        3 => format!(
            "{root}/{name}/../../{}",
            w.outside.file_name().unwrap().to_str().unwrap()
        ),
        4 => format!("{root}//./{name}/"),
        5 => w
            .outside
            .join(format!("{TOKEN}-dir"))
            .to_str()
            .unwrap()
            .to_string(),
        6 => format!("{root}/{name}/{TOKEN}-dir"),
        7 => pick(rng, &["/", "relative/dir", "", "/root/ü", "."]).to_string(),
        _ => format!("{root}/{name}/{}", pick(rng, DIR_NAMES)),
    })
}

/// A linked, initialized device core over the root, its link's id.
fn device(rng: &mut Rng, w: &World) -> (Device, ConnId) {
    let mut config = DeviceConfig::default();
    config.remote.enabled = true;
    config.remote.roots = vec![w.root.to_str().unwrap().to_string()];
    config.remote.require_trust = rng.below(2) == 0;
    config.remote.max_directory_entries = 1 + rng.below(8) as usize;
    let mut trusted = vec![w.outside.to_str().unwrap().to_string()];
    for name in &w.names {
        if rng.below(3) == 0 {
            trusted.push(w.root.join(name).to_str().unwrap().to_string());
        }
    }
    config.remote.trusted = trusted;
    let mut d = Device::new(config, Time::ZERO).unwrap();
    d.start_link(Time::ZERO);
    let conn = d.handle_open(ConnKind::Link, Time::ZERO).unwrap();
    let init = json!({ "jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": { "protocolVersion": 1, "clientCapabilities": { "_meta": { "lembas": { "protocol": 3 } } } } });
    d.handle_frame(conn, init.to_string().as_bytes(), Time::ZERO)
        .unwrap();
    drain(&mut d);
    (d, conn)
}

/// Perform every effect as the real shell does (listing and resolving on disk); the answers
/// sent, by id.
fn drain(d: &mut Device) -> BTreeMap<String, Value> {
    let now = Time::ZERO;
    let mut answers = BTreeMap::new();
    while let Some(out) = d.poll_output() {
        match out {
            Output::Send { frame, .. } => {
                let v: Value = serde_json::from_slice(&frame).unwrap();
                if let Some(id) = v.get("id").filter(|_| v.get("method").is_none()) {
                    answers.insert(id.to_string(), v);
                }
            }
            Output::Effect(Effect::ListDirectory {
                request,
                path,
                max_entries,
            }) => {
                let listed = lembas::list_dir::list_directory(&path, max_entries);
                d.handle_directory_listed(request, listed, now);
            }
            Output::Effect(Effect::Persist { seq, .. }) => d.handle_persisted(seq, now),
            // The link is opened by hand, before the handshake.
            Output::Effect(Effect::Dial) => {}
            Output::Effect(Effect::ResolvePath { request, path }) => {
                let resolved = std::fs::canonicalize(&path)
                    .map(|p| p.to_str().unwrap().to_string())
                    .map_err(|e| e.to_string());
                d.handle_path_resolved(request, resolved, now);
            }
            other => panic!("not asked for by a directories call: {other:?}"),
        }
    }
    answers
}

/// Every `Dir` of an answer (the listed directory itself included), with whether it is the
/// listed one.
fn dirs(result: &Value) -> Vec<(&Value, bool)> {
    let mut all: Vec<(&Value, bool)> = ["places", "entries"]
        .iter()
        .filter_map(|m| result[*m].as_array())
        .flatten()
        .map(|d| (d, false))
        .collect();
    if result["path"].as_str().is_some_and(|p| !p.is_empty()) {
        all.push((result, true));
    }
    all
}

fn run(seed: u64, verbose: bool) {
    let mut rng = Rng::new(seed);
    let w = world(&mut rng);
    let (mut d, conn) = device(&mut rng, &w);
    if verbose {
        eprintln!("root {} names {:?}", w.root.display(), w.names);
    }
    for i in 0..CALLS {
        let path = a_path(&mut rng, &w);
        let params = path.as_ref().map_or(json!({}), |p| json!({ "path": p }));
        let frame = json!({ "jsonrpc": "2.0", "id": i, "method": "_lembas/directories",
            "params": params });
        d.handle_frame(conn, frame.to_string().as_bytes(), Time::ZERO)
            .unwrap();
        let answers = drain(&mut d);
        let answer = answers
            .get(&i.to_string())
            .unwrap_or_else(|| panic!("seed {seed}: no answer to {path:?}"));
        if verbose {
            eprintln!("{path:?} -> {answer}");
        }
        let text = answer.to_string();
        let Some(result) = answer.get("result") else {
            // A refusal may repeat the path asked for, and nothing more of outside.
            let asked_it = path.as_ref().is_some_and(|p| p.contains(TOKEN));
            assert!(
                asked_it || !text.contains(TOKEN),
                "seed {seed}: {path:?} named outside: {text}"
            );
            continue;
        };
        assert!(
            !text.contains(TOKEN),
            "seed {seed}: {path:?} listed outside: {text}"
        );
        for (dir, listed) in dirs(result) {
            let p = Path::new(dir["path"].as_str().unwrap());
            assert!(p.starts_with(&w.root), "seed {seed}: {path:?} gave {dir}");
            let real = std::fs::canonicalize(p);
            if listed || dir["accepted"] == true {
                let real = real.unwrap_or_else(|e| panic!("seed {seed}: {dir}: {e}"));
                assert!(
                    real.starts_with(&w.root),
                    "seed {seed}: {path:?}: {dir} resolves to {}",
                    real.display()
                );
            }
        }
    }
}
