//! No tool call ever reads or changes anything outside its confinement. Per seed: a random
//! tree on disk, a project with files, directories and symlinks (inside to inside, inside to
//! outside, chains, to directories, dangling, loops, to protected paths; relative and
//! absolute; unicode names), a directory outside it, protected entries (`.git` by name, a
//! `vault` directory by path) and sometimes `remote.roots`; then random `read`, `list`,
//! `write`, `edit`, `find` and `search` calls on paths made with `..`, absolute forms, `./`,
//! `//` and unicode. Every file the confinement forbids holds [`TOKEN`], and:
//!
//! - no answer (output, diff, image bytes or refusal) ever holds [`TOKEN`];
//! - no forbidden file, directory or symlink is changed, made or removed by any call.
//!
//! `LEMBAS_PROPERTY_SEEDS=n` runs n seeds (default 100) from a random offset that
//! `LEMBAS_PROPERTY_SEED_OFFSET` fixes; `LEMBAS_PROPERTY_SEED=s` runs seed s alone and prints
//! every call and its answer (see `core/tests/property/mod.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use lembas::tools::{self, ToolSettings};
use lembas_core::confine::Protected;
use lembas_core::engine_io::{IoReply, ToolOp, ToolRequest};
use lembas_core::rng::Rng;

#[path = "../../core/tests/property/mod.rs"]
mod property;
#[path = "common/tree.rs"]
mod tree;

use tree::{join, pick, Tree};

/// What every forbidden file holds; nothing allowed holds it, nor any name or text a call sends.
const TOKEN: &str = "ZQXJ-forbidden";
const CALLS: usize = 30;
const DIR_NAMES: &[&str] = &["src", "docs", "é", "日本語", "a b", ".hidden", "x"];
const FILE_NAMES: &[&str] = &["a.txt", "b.rs", "ü.md", "note", ".env", "pic.png", "Ω"];

#[test]
fn no_tool_call_touches_anything_outside_its_confinement() {
    if let Some(seed) = property::seeds(&[], 100, |seed| run(seed, false)) {
        run(seed, true);
    }
}

/// One seed's world on disk.
struct World {
    _dir: tempfile::TempDir,
    /// Resolved: the temp directory, the project in it and the directory outside.
    root: PathBuf,
    project: PathBuf,
    vault: PathBuf,
    roots: Vec<PathBuf>,
    /// Paths relative to the project (files, dirs, links, and names that do not exist).
    names: Vec<String>,
    settings: ToolSettings,
}

impl World {
    /// Whether the confinement lets a tool act on `path` (resolved): the test's own reading
    /// of the rules, by `Path::starts_with` (component-wise).
    fn allowed(&self, path: &Path) -> bool {
        path.starts_with(&self.project)
            && (self.roots.is_empty() || self.roots.iter().any(|r| path.starts_with(r)))
            && !path.components().any(|c| c.as_os_str() == ".git")
            && !path.starts_with(&self.vault)
    }

    fn write_file(&self, path: &Path, rng: &mut Rng) {
        let text = if self.allowed(path) {
            ["alpha\nbeta\n", "alpha alpha\n", "gamma\n", ""][rng.below(4) as usize].to_string()
        } else {
            format!("{TOKEN}\nalpha\n")
        };
        std::fs::write(path, text).unwrap();
    }

    /// Every entry under the temp directory the rules forbid (symlinks not followed): a
    /// file's bytes, a directory, a symlink's target.
    fn forbidden(&self) -> BTreeMap<PathBuf, String> {
        let mut all = BTreeMap::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                let what = if meta.file_type().is_symlink() {
                    format!("link {}", std::fs::read_link(&path).unwrap().display())
                } else if meta.is_dir() {
                    stack.push(path.clone());
                    "dir".to_string()
                } else {
                    format!("file {:?}", std::fs::read(&path).unwrap())
                };
                if !self.allowed(&path) {
                    all.insert(path, what);
                }
            }
        }
        all
    }
}

fn build(rng: &mut Rng) -> World {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let project = root.join("project");
    let outside = root.join("outside");
    let vault = project.join("vault");
    for d in [
        &project,
        &outside,
        &vault,
        &project.join(".git"),
        &outside.join("deep"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    let made = vec![String::new(), "vault".into(), ".git".into()];
    let mut tree = Tree::new(project.clone(), made);
    let count = rng.below(5) + 2;
    tree.grow(rng, count, DIR_NAMES, None);
    let dirs = tree.names;
    let roots = match rng.below(5) {
        0 => vec![root.clone()],
        1 => vec![project.clone()],
        2 => vec![project.join(pick(rng, &dirs))],
        3 => vec![outside.clone()],
        _ => Vec::new(),
    };
    let settings = ToolSettings {
        protected: vec![
            Protected::Name(".git".into()),
            Protected::Path(vault.to_str().unwrap().into()),
        ],
        shell: PathBuf::from("/bin/sh"),
        undo: None,
    };
    let mut world = World {
        _dir: dir,
        root: root.clone(),
        project: project.clone(),
        vault,
        roots,
        names: Vec::new(),
        settings,
    };
    world.write_file(&project.join(".git/config"), rng);
    world.write_file(&outside.join("secret.txt"), rng);
    world.write_file(&outside.join("deep/key.png"), rng);
    let mut files = vec![".git/config".to_string()];
    for _ in 0..rng.below(8) + 3 {
        let parent = pick(rng, &dirs);
        let name = join(parent, pick::<&str>(rng, FILE_NAMES));
        world.write_file(&project.join(&name), rng);
        files.push(name);
    }
    let mut links: Vec<String> = Vec::new();
    for i in 0..rng.below(8) + 3 {
        let parent = pick(rng, &dirs).clone();
        let name = join(&parent, &format!("link{i}"));
        let up = "../".repeat(parent.split('/').filter(|p| !p.is_empty()).count() + 1);
        let inside = |rng: &mut Rng| {
            let all: Vec<&String> = files.iter().chain(dirs.iter()).collect();
            pick(rng, &all).to_string()
        };
        let target = match rng.below(9) {
            0 => format!("{up}project/{}", inside(rng)),
            1 => project.join(inside(rng)).to_str().unwrap().to_string(),
            2 => format!("{up}outside/secret.txt"),
            3 => outside.to_str().unwrap().to_string(),
            4 => format!("{up}outside/new-{i}.txt"),
            5 => format!("{up}project/nope-{i}/x"),
            6 if !links.is_empty() => {
                format!("{up}project/{}", pick(rng, &links))
            }
            7 => format!("{up}project/{name}"),
            _ => format!("{up}project/.git"),
        };
        if std::os::unix::fs::symlink(&target, project.join(&name)).is_ok() {
            links.push(name);
        }
    }
    world.names = files
        .into_iter()
        .chain(dirs)
        .chain(links)
        .chain(["new.txt".to_string(), "new dir/ñ.txt".to_string()])
        .collect();
    world
}

/// A path to one of the world's names, or outside it, written some way a model might.
fn path(world: &World, rng: &mut Rng) -> String {
    let name = pick(rng, &world.names).clone();
    let mut path = match rng.below(14) {
        0 => format!("./{name}"),
        1 => format!("{}/{name}", world.project.display()),
        2 => format!("{}//{}", world.project.display(), name.replace('/', "//")),
        3 => format!("../project/{name}"),
        4 => format!("{name}/../../outside/secret.txt"),
        5 => format!("{}/outside/deep/key.png", world.root.display()),
        6 => format!("src/../{name}"),
        7 => "../".repeat(rng.below(12) as usize + 1) + "outside",
        _ => name,
    };
    if rng.below(8) == 0 {
        path.push_str("/.");
    }
    if rng.below(10) == 0 {
        path = path.replacen('/', "/./", 1);
    }
    path
}

fn call(world: &World, rng: &mut Rng) -> ToolOp {
    let path = path(world, rng);
    match rng.below(6) {
        0 => ToolOp::Read {
            path,
            first_line: rng.below(3),
            max_lines: rng.below(5) + 1,
            max_bytes: 1 << 16,
        },
        1 => ToolOp::List {
            path,
            max_entries: 100,
        },
        2 => ToolOp::Write {
            path,
            text: "written\n".into(),
            max_bytes: 1 << 16,
        },
        3 => ToolOp::Edit {
            path,
            old: ["alpha", "beta", TOKEN][rng.below(3) as usize].into(),
            new: "edited".into(),
            max_bytes: 1 << 16,
        },
        4 => ToolOp::Find {
            path,
            glob: ["*", "*.txt", "**/*"][rng.below(3) as usize].into(),
            max_results: 1000,
        },
        _ => ToolOp::Search {
            path,
            pattern: [".", "alpha", "Z.X"][rng.below(3) as usize].into(),
            glob: (rng.below(2) == 0).then(|| "*".to_string()),
            max_matches: 1000,
        },
    }
}

fn run(seed: u64, verbose: bool) {
    let mut rng = Rng::new(seed);
    let world = build(&mut rng);
    if verbose {
        println!("roots {:?}", world.roots);
    }
    for _ in 0..CALLS {
        let op = call(&world, &mut rng);
        let before = world.forbidden();
        let request = ToolRequest {
            session_id: "ses_p".into(),
            turn_id: "t".into(),
            project: world.project.to_str().unwrap().into(),
            roots: world
                .roots
                .iter()
                .map(|r| r.to_str().unwrap().to_string())
                .collect(),
            op: op.clone(),
        };
        let reply = tools::perform(&world.settings, &request, &AtomicBool::new(false));
        if verbose {
            println!("{op:?}\n  -> {reply:?}");
        }
        let shown = match &reply {
            IoReply::Tool { output, diff } => format!("{output}{diff:?}"),
            IoReply::Failed { reason } => reason.clone(),
            IoReply::File { bytes, .. } => String::from_utf8_lossy(bytes).into_owned(),
            other => panic!("{op:?}: {other:?}"),
        };
        assert!(
            !shown.contains(TOKEN),
            "seed {seed}: {op:?} showed a forbidden file: {shown}"
        );
        if let IoReply::Tool { diff: Some(d), .. } = &reply {
            assert!(
                world.allowed(Path::new(&d.path)),
                "seed {seed}: {op:?} changed {}",
                d.path
            );
        }
        let after = world.forbidden();
        assert!(
            before == after,
            "seed {seed}: {op:?} changed a forbidden entry"
        );
    }
}
