//! No `@path` mention ever reads or lists anything outside its confinement, and no
//! `_lembas/files/search` ever lists anything outside it either. Per seed: a real
//! tree on disk, a root holding the session's project (files and directories with unicode,
//! hidden and spaced names, a protected `.git`) and a sibling project, a directory outside the
//! root, and symlinks in the project (inside, to the sibling, to outside, relative through
//! `..`, absolute, to `/`, dangling, looping); every file not in the project holds
//! [`SECRET`], every name outside the root holds [`TOKEN`]. Then random prompts whose mentions
//! are made with `..`, `.`, absolute forms, link names, escapes, ranges, trailing slashes and
//! unicode. A device core is driven with the real shell's reads (`lembas::mentions`,
//! protecting `.git`), and:
//!
//! - every file or directory the shell read is, resolved, inside the project and not under
//!   `.git`;
//! - no attachment written holds [`SECRET`] or [`TOKEN`], and no notice holds [`SECRET`], nor
//!   [`TOKEN`] unless the prompt wrote it;
//! - every path a search (of the session, or of a `cwd` made like a mention's path) answers,
//!   joined to its root and resolved, is inside the project's root and not under `.git`, and
//!   no answer holds [`TOKEN`] unless the `cwd` asked for did;
//! - every command file read for the session's command set (its `.agent/commands`, holding a
//!   command and symlinks to the same targets as the project's) is, resolved, inside the
//!   project and not under `.git`, and none holds [`SECRET`].
//!
//! `LEMBAS_PROPERTY_SEEDS=n` runs n seeds (default 60); see `core/tests/property/mod.rs`.

use std::path::{Path, PathBuf};

use lembas::tools::ToolSettings;
use lembas_core::config::DeviceConfig;
use lembas_core::confine::Protected;
use lembas_core::device::{ConnId, ConnKind, Device, Effect, Output};
use lembas_core::mentions::MentionRead;
use lembas_core::rng::Rng;
use lembas_core::Time;
use serde_json::{json, Value};

#[path = "../../core/tests/property/mod.rs"]
mod property;
#[path = "common/tree.rs"]
mod tree;

use tree::{pick, Tree, LOOP_SELF};

/// What every file outside the project holds (a protected one too).
const SECRET: &str = "SECRET-7f3a";
/// What every name outside the root holds.
const TOKEN: &str = "ZQXJ-outside";
const PROMPTS: usize = 12;
const NAMES: &[&str] = &[
    "src",
    "docs",
    "é",
    "日本語",
    "a b",
    "a#b",
    ".hidden",
    "x",
    "Ω",
];

#[test]
fn no_mention_nor_search_reads_or_lists_outside_its_confinement() {
    if let Some(seed) = property::seeds(&[], 60, |seed| run(seed, false)) {
        run(seed, true);
    }
}

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    project: PathBuf,
    /// Paths made in the project, relative to it.
    names: Vec<String>,
    indexes: lembas::file_index::FileIndexes,
}

fn world(rng: &mut Rng) -> World {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    let project = root.join("proj");
    let sibling = root.join("sibling");
    let outside = base.join(format!("out-{TOKEN}"));
    for d in [&project, &sibling, &outside, &project.join(".git")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(project.join(".git/config"), SECRET).unwrap();
    std::fs::write(sibling.join("notes.md"), SECRET).unwrap();
    std::fs::write(outside.join(format!("{TOKEN}.txt")), SECRET).unwrap();
    std::fs::write(base.join(format!("{TOKEN}-beside")), SECRET).unwrap();
    let mut tree = Tree::new(project, vec![String::new()]);
    let entries = 4 + rng.below(8);
    let lines: String = (1..=5).map(|n| format!("inside {n}\n")).collect();
    tree.grow(rng, entries, NAMES, Some(&lines));
    let targets = [
        outside.to_str().unwrap().to_string(),
        format!("{}/{TOKEN}.txt", outside.display()),
        "../sibling".to_string(),
        "../sibling/notes.md".to_string(),
        format!("../../{TOKEN}-beside"),
        "../../../../..".to_string(),
        "/".to_string(),
        "/etc/passwd".to_string(),
        "..".to_string(),
        ".".to_string(),
        ".git/config".to_string(),
        "nowhere".to_string(),
        LOOP_SELF.to_string(),
    ];
    let links = 2 + rng.below(6);
    tree.link(rng, links, &targets, false);
    let Tree {
        base: project,
        names,
    } = tree;
    // The session's command files: one of its own, and symlinks leading where the others do.
    let commands = project.join(".agent/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(commands.join("fix.md"), "Fix $ARGUMENTS").unwrap();
    for i in 0..(1 + rng.below(4)) {
        let target = pick(rng, &targets);
        let target = if target.starts_with('/') || target == LOOP_SELF {
            target.clone()
        } else {
            format!("../../{target}")
        };
        let _ = std::os::unix::fs::symlink(&target, commands.join(format!("c{i}.md")));
    }
    World {
        _dir: dir,
        root,
        project,
        names,
        indexes: lembas::file_index::FileIndexes::new(1 + rng.below(40) as usize),
    }
}

/// A mention as a person could type it (escapes for spaces and `#`).
fn a_mention(rng: &mut Rng, w: &World) -> String {
    let name = pick(rng, &w.names).clone();
    let project = w.project.to_str().unwrap();
    let path = match rng.below(12) {
        0 => format!("{name}/.."),
        1 => format!("{name}/../../sibling/notes.md"),
        2 => format!("../sibling/{name}"),
        3 => format!("{project}/{name}"),
        4 => format!(
            "{}/out-{TOKEN}/{TOKEN}.txt",
            w.root.parent().unwrap().display()
        ),
        5 => format!(".//{name}/"),
        6 => pick(
            rng,
            &[
                "/",
                "/etc/passwd",
                ".git/config",
                ".git/",
                "..",
                "../..",
                "./",
                "~/x",
            ],
        )
        .to_string(),
        7 => format!("{name}/{}", pick(rng, NAMES)),
        8 => format!("{name}/"),
        _ => name,
    };
    let escaped = path.replace(' ', "\\ ").replace('#', "\\#");
    let range = match rng.below(5) {
        0 => format!("#{}-{}", rng.below(7), rng.below(9)),
        1 => format!("#{}", 1 + rng.below(6)),
        _ => String::new(),
    };
    format!("@{escaped}{range}")
}

/// A linked, initialized device core over the root, with a session in the project.
fn device(rng: &mut Rng, w: &World) -> (Device, ConnId, String) {
    let mut config = DeviceConfig::default();
    config.remote.enabled = true;
    config.remote.roots = vec![w.root.to_str().unwrap().to_string()];
    config.remote.trusted = config.remote.roots.clone();
    config.models = vec![lembas_core::config::Model::served("lembas/default")];
    config.mentions.max_file_bytes = 1 + rng.below(64);
    config.mentions.max_listing_entries = 1 + rng.below(6) as usize;
    config.mentions.max_per_prompt = 1 + rng.below(6) as usize;
    let mut d = Device::new(config, Time::ZERO).unwrap();
    d.start_link(Time::ZERO);
    let conn = d.handle_open(ConnKind::Link, Time::ZERO).unwrap();
    let init = json!({ "jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": { "protocolVersion": 1, "clientCapabilities": { "_meta": { "lembas": { "protocol": 3 } } } } });
    d.handle_frame(conn, init.to_string().as_bytes(), Time::ZERO)
        .unwrap();
    let new = json!({ "jsonrpc": "2.0", "id": "new", "method": "session/new",
        "params": { "cwd": w.project.to_str().unwrap() } });
    d.handle_frame(conn, new.to_string().as_bytes(), Time::ZERO)
        .unwrap();
    let mut seen = Seen::default();
    drain(&mut d, w, &mut seen);
    let session = seen
        .frames
        .iter()
        .find(|f| f["id"] == "new")
        .and_then(|f| f["result"]["sessionId"].as_str())
        .unwrap_or_else(|| panic!("no session: {:?}", seen.frames))
        .to_string();
    (d, conn, session)
}

#[derive(Default)]
struct Seen {
    frames: Vec<Value>,
    /// Every attachment's bytes.
    written: Vec<Vec<u8>>,
    /// Every path the shell read, resolved.
    read: Vec<String>,
}

/// Perform every effect as the real shell does; the turn is left to run (no engine here).
fn drain(d: &mut Device, w: &World, seen: &mut Seen) {
    let now = Time::ZERO;
    let indexes = &w.indexes;
    let settings = ToolSettings {
        protected: vec![Protected::Name(".git".into())],
        shell: "/bin/sh".into(),
        undo: None,
    };
    while let Some(out) = d.poll_output() {
        match out {
            Output::Send { frame, .. } => seen.frames.push(serde_json::from_slice(&frame).unwrap()),
            Output::Effect(Effect::ReadMentions {
                request,
                project,
                roots,
                mentions,
                max_file_bytes,
                max_entries,
            }) => {
                assert_eq!(Path::new(&project), w.project);
                let read = lembas::mentions::read_mentions(
                    &settings,
                    &project,
                    &roots,
                    &mentions,
                    max_file_bytes,
                    max_entries,
                );
                for r in &read {
                    if let MentionRead::File { real, .. } | MentionRead::Listing { real, .. } = r {
                        seen.read.push(real.clone());
                    }
                }
                d.handle_mentions_read(request, Ok(read), now);
            }
            Output::Effect(Effect::SearchFiles {
                request,
                root,
                roots,
                query,
                limit,
                recent,
            }) => {
                let found = indexes.search(&settings, &root, &roots, &query, limit, &recent);
                d.handle_files_found(request, found, now);
            }
            Output::Effect(Effect::ReadCommands {
                request,
                project,
                roots,
                max_files,
                max_file_bytes,
            }) => {
                let read = lembas::command_files::read_commands(
                    &settings,
                    None,
                    &project,
                    &roots,
                    max_files,
                    max_file_bytes,
                );
                for f in read.iter().flat_map(|r| &r.files) {
                    assert!(!f.text.contains(SECRET), "{f:?}");
                    let real = std::fs::canonicalize(&f.source).unwrap();
                    seen.read.push(real.to_str().unwrap().to_string());
                }
                d.handle_commands_read(request, read, now);
            }
            Output::Effect(Effect::WriteAttachment { request, bytes, .. }) => {
                seen.written.push(bytes);
                d.handle_attachment_written(request, Ok(()), now);
            }
            Output::Effect(Effect::Persist { seq, .. }) => d.handle_persisted(seq, now),
            Output::Effect(Effect::ResolvePath { request, path }) => {
                let resolved = std::fs::canonicalize(&path)
                    .map(|p| p.to_str().unwrap().to_string())
                    .map_err(|e| e.to_string());
                d.handle_path_resolved(request, resolved, now);
            }
            Output::Effect(Effect::Dial) | Output::Engine(_) | Output::Ping { .. } => {}
            other => panic!("not asked for by a prompt: {other:?}"),
        }
    }
}

fn run(seed: u64, verbose: bool) {
    let mut rng = Rng::new(seed);
    let w = world(&mut rng);
    let (mut d, conn, session) = device(&mut rng, &w);
    if verbose {
        eprintln!("project {} names {:?}", w.project.display(), w.names);
    }
    for i in 0..PROMPTS {
        let text: Vec<String> = (0..1 + rng.below(4))
            .map(|_| a_mention(&mut rng, &w))
            .collect();
        let text = text.join(" ");
        let frame = json!({ "jsonrpc": "2.0", "id": i, "method": "session/prompt",
            "params": { "sessionId": session, "prompt": [{ "type": "text", "text": text }] } });
        d.handle_frame(conn, frame.to_string().as_bytes(), Time::ZERO)
            .unwrap();
        let mut seen = Seen::default();
        drain(&mut d, &w, &mut seen);
        // Each prompt's turn runs on no engine: cancel it so the next one starts.
        let cancel = json!({ "jsonrpc": "2.0", "method": "session/cancel",
            "params": { "sessionId": session } });
        d.handle_frame(conn, cancel.to_string().as_bytes(), Time::ZERO)
            .unwrap();
        let done =
            lembas_core::engine::EngineEvent::Done(lembas_core::engine::StopReason::Cancelled);
        let turn = seen
            .frames
            .iter()
            .find_map(|f| {
                (f["params"]["event"]["type"] == "task")
                    .then(|| f["params"]["event"]["turnId"].clone())
            })
            .and_then(|t| t.as_str().map(str::to_string));
        if let Some(turn) = turn {
            d.handle_engine(&session, &turn, done, Time::ZERO);
        }
        let mut after = Seen::default();
        drain(&mut d, &w, &mut after);
        if verbose {
            eprintln!("{text}\n  read {:?}", seen.read);
        }
        for real in &seen.read {
            let p = Path::new(real);
            assert!(
                p.starts_with(&w.project) && !p.starts_with(w.project.join(".git")),
                "seed {seed}: `{text}` read {real}"
            );
        }
        for bytes in &seen.written {
            let shown = String::from_utf8_lossy(bytes);
            assert!(
                !shown.contains(SECRET) && !shown.contains(TOKEN),
                "seed {seed}: `{text}` attached {shown}"
            );
        }
        for f in &seen.frames {
            if f["params"]["event"]["type"] != "notice" {
                continue;
            }
            let notice = f["params"]["event"]["text"].as_str().unwrap();
            assert!(!notice.contains(SECRET), "seed {seed}: `{text}`: {notice}");
            assert!(
                text.contains(TOKEN) || !notice.contains(TOKEN),
                "seed {seed}: `{text}` named outside: {notice}"
            );
        }
        let answered = seen
            .frames
            .iter()
            .chain(&after.frames)
            .any(|f| f["id"] == i);
        assert!(answered, "seed {seed}: `{text}` was never answered");
        search(seed, &mut rng, &w, &mut d, conn, &session, i, verbose);
    }
}

/// A search of the session or of a `cwd` made like a mention's path: nothing it lists is
/// outside the root, nor under `.git`.
#[allow(clippy::too_many_arguments)]
fn search(
    seed: u64,
    rng: &mut Rng,
    w: &World,
    d: &mut Device,
    conn: ConnId,
    session: &str,
    i: usize,
    verbose: bool,
) {
    let id = format!("search{i}");
    let query = pick(rng, &["", "md", "in", "link", "secret", "é", "a b", "git"]).to_string();
    let cwd = (rng.below(2) == 0).then(|| {
        let mention = a_mention(rng, w);
        let path = mention[1..].split('#').next().unwrap().replace('\\', "");
        if path.starts_with('/') {
            path
        } else {
            format!("{}/{path}", w.project.display())
        }
    });
    let params = match &cwd {
        Some(cwd) => json!({ "cwd": cwd, "query": query }),
        None => json!({ "sessionId": session, "query": query }),
    };
    let frame = json!({ "jsonrpc": "2.0", "id": id, "method": "_lembas/files/search",
        "params": params });
    d.handle_frame(conn, frame.to_string().as_bytes(), Time::ZERO)
        .unwrap();
    let mut seen = Seen::default();
    drain(d, w, &mut seen);
    let answer = seen
        .frames
        .iter()
        .find(|f| f["id"] == id.as_str())
        .unwrap_or_else(|| panic!("seed {seed}: no answer to search {params}"));
    if verbose {
        eprintln!("search {params} -> {answer}");
    }
    let text = answer.to_string();
    let asked_it = cwd.as_ref().is_some_and(|c| c.contains(TOKEN));
    assert!(
        asked_it || !text.contains(TOKEN),
        "seed {seed}: {params} named outside: {text}"
    );
    let Some(result) = answer.get("result") else {
        return;
    };
    let root = std::fs::canonicalize(result["root"].as_str().unwrap()).unwrap();
    assert!(
        root.starts_with(&w.root),
        "seed {seed}: {params} searched {}",
        root.display()
    );
    for f in result["files"].as_array().unwrap() {
        let path = root.join(f["path"].as_str().unwrap());
        let real = std::fs::canonicalize(&path)
            .unwrap_or_else(|e| panic!("seed {seed}: {params}: {}: {e}", path.display()));
        assert!(
            real.starts_with(&root) && !real.components().any(|c| c.as_os_str() == ".git"),
            "seed {seed}: {params} listed {} ({})",
            path.display(),
            real.display()
        );
    }
}
