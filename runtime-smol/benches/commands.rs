//! `cargo bench -p lembas --bench commands`: what issue 18's command set costs a turn. After
//! every turn the device reads the session's command files again (`Effect::ReadCommands`,
//! `lembas::command_files::read_commands`), so that a command file written or a skill made
//! in that turn reaches `available_commands_update`. Measured for a project with no `.agent`
//! directory (most), and with 20 and 62 command files (64 with the person's two: the default
//! `max_files`), each about 1 KiB; against a baseline in the same run: the same directories
//! listed and the same files read with `std::fs` and nothing else (no resolving, no
//! confinement, no bounds). The difference is the confinement: each project file resolved
//! and checked against the roots and the protected paths before a byte of it is read.

use std::path::Path;
use std::time::Instant;

use lembas::command_files::read_commands;
use lembas::tools::ToolSettings;
use lembas_core::commands::CommandLimits;
use lembas_core::confine::Protected;

const RUNS: usize = 200;

/// `n` command files in `project/.agent/commands`, and two in the config directory.
fn tree(root: &Path, n: usize) -> (String, std::path::PathBuf) {
    let project = root.join(format!("project{n}"));
    let commands = project.join(".agent/commands");
    if n > 0 {
        std::fs::create_dir_all(&commands).unwrap();
    } else {
        std::fs::create_dir_all(&project).unwrap();
    }
    for i in 0..n {
        let body = format!(
            "Review module {i} for:\n{}",
            "- a point to look at\n".repeat(50)
        );
        std::fs::write(commands.join(format!("cmd{i:03}.md")), body).unwrap();
    }
    let config = root.join(format!("config{n}"));
    std::fs::create_dir_all(config.join("commands")).unwrap();
    for i in 0..2 {
        std::fs::write(config.join(format!("commands/mine{i}.md")), "Do it my way.").unwrap();
    }
    (project.to_str().unwrap().to_string(), config)
}

/// The baseline: every `*.md` of the same places listed and read, nothing checked.
fn bare(project: &str, config: &Path) -> usize {
    let mut bytes = 0;
    let places = [
        Path::new(project).join(".agent/commands"),
        config.join("commands"),
        Path::new(project).join(".agent/skills"),
        config.join("skills"),
    ];
    for dir in places {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                bytes += std::fs::read(e.path()).map_or(0, |b| b.len());
            }
        }
    }
    bytes
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let settings = ToolSettings {
        protected: vec![Protected::Name(".git".into())],
        shell: "/bin/sh".into(),
        undo: None,
    };
    let limits = CommandLimits::default();
    let roots = vec![root.to_str().unwrap().to_string()];
    let us = |start: Instant| start.elapsed().as_secs_f64() * 1e6 / RUNS as f64;
    println!(
        "commands: the command files read after every turn, {RUNS} reads each, per read \
         (max_files {}, max_file_bytes {})",
        limits.max_files, limits.max_file_bytes
    );
    for n in [0, 20, 62] {
        let (project, config) = tree(&root, n);
        let read = |_: usize| {
            read_commands(
                &settings,
                Some(&config),
                &project,
                &roots,
                limits.max_files,
                limits.max_file_bytes,
            )
            .unwrap()
        };
        let files = read(0).files.len();
        assert_eq!(files, n + 2, "every file read");
        // Alternated, so a busy moment of the machine falls on both.
        let (mut ours, mut base) = (0.0, 0.0);
        for _ in 0..3 {
            let start = Instant::now();
            (0..RUNS).for_each(|i| assert_eq!(read(i).files.len(), files));
            ours += us(start) / 3.0;
            let start = Instant::now();
            (0..RUNS).for_each(|_| assert!(bare(&project, &config) > 0));
            base += us(start) / 3.0;
        }
        println!(
            "  {n:>2} project files + 2 of the person's: read_commands {ours:>8.1} µs, \
             bare std::fs {base:>8.1} µs, ratio {:.2}",
            ours / base
        );
    }
}
