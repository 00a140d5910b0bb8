//! The model's tools performed on real files in temp directories: every op, the confinement
//! (`..`, absolute paths, symlinks out, dangling symlinks, protected paths, roots) with a
//! secret outside the project that never shows and never changes, and commands: output in
//! order through reads, exit codes, and an abort that kills the whole process group.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::future;
use lembas::channels::Input;
use lembas::engine_io::Performer;
use lembas::tools::{self, ToolSettings};
use lembas_core::confine::Protected;
use lembas_core::engine_io::{FileDiff, IoCall, IoId, IoReply, ToolOp, ToolRequest};
use smol::channel::{self, Receiver};

const SECRET: &str = "TOP-SECRET-d41d8cd9";

/// A project with files, and next to it a directory outside it holding a secret.
struct Fixture {
    _dir: tempfile::TempDir,
    project: PathBuf,
    outside: PathBuf,
    settings: ToolSettings,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let project = root.join("project");
    let outside = root.join("outside");
    std::fs::create_dir_all(project.join("src/deep")).unwrap();
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let write = |p: &Path, text: &[u8]| std::fs::write(p, text).unwrap();
    write(&outside.join("secret.txt"), SECRET.as_bytes());
    write(&project.join("a.txt"), b"one\ntwo\nthree\nfour\nfive\n");
    write(
        &project.join("src/main.rs"),
        b"fn main() {\n    println!(\"hi\");\n}\n",
    );
    write(&project.join("src/deep/lib.rs"), b"pub fn hi() {}\n");
    write(&project.join("src/ignored.rs"), b"fn hi_ignored() {}\n");
    write(&project.join(".gitignore"), b"ignored.rs\n");
    write(&project.join(".git/config"), b"[core]\nhi = 1\n");
    write(&project.join("blob.bin"), b"hi\0\x01\x02");
    write(&project.join("pic.png"), b"\x89PNG\r\n\x1a\n....");
    std::os::unix::fs::symlink("../outside", project.join("escape")).unwrap();
    std::os::unix::fs::symlink("../outside/secret.txt", project.join("escape_file")).unwrap();
    std::os::unix::fs::symlink("../outside/new.txt", project.join("dangling")).unwrap();
    std::os::unix::fs::symlink(".git/config", project.join("gitlink")).unwrap();
    std::os::unix::fs::symlink("src", project.join("inner")).unwrap();
    let settings = ToolSettings {
        protected: vec![Protected::Name(".git".into())],
        shell: PathBuf::from("/bin/sh"),
        undo: None,
    };
    Fixture {
        _dir: dir,
        project,
        outside,
        settings,
    }
}

impl Fixture {
    fn request(&self, op: ToolOp) -> ToolRequest {
        ToolRequest {
            session_id: "ses_1".into(),
            turn_id: "t1".into(),
            project: self.project.to_str().unwrap().into(),
            roots: Vec::new(),
            op,
        }
    }

    fn perform(&self, op: ToolOp) -> IoReply {
        tools::perform(&self.settings, &self.request(op), &AtomicBool::new(false))
    }

    fn output(&self, op: ToolOp) -> String {
        match self.perform(op.clone()) {
            IoReply::Tool { output, diff: None } => output,
            other => panic!("{op:?}: {other:?}"),
        }
    }

    fn refused(&self, op: ToolOp) -> String {
        match self.perform(op.clone()) {
            IoReply::Failed { reason } => reason,
            other => panic!("{op:?} was not refused: {other:?}"),
        }
    }

    /// The outside directory's files and their bytes.
    fn outside_files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut all: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let bytes = std::fs::read(&p).unwrap();
                (p, bytes)
            })
            .collect();
        all.sort();
        all
    }
}

fn read(path: &str, first_line: u64, max_lines: u64, max_bytes: u64) -> ToolOp {
    ToolOp::Read {
        path: path.into(),
        first_line,
        max_lines,
        max_bytes,
    }
}

fn write(path: &str, text: &str) -> ToolOp {
    ToolOp::Write {
        path: path.into(),
        text: text.into(),
        max_bytes: 1 << 20,
    }
}

fn edit(path: &str, old: &str, new: &str) -> ToolOp {
    ToolOp::Edit {
        path: path.into(),
        old: old.into(),
        new: new.into(),
        max_bytes: 1 << 20,
    }
}

fn list(path: &str, max_entries: usize) -> ToolOp {
    ToolOp::List {
        path: path.into(),
        max_entries,
    }
}

fn find(path: &str, glob: &str, max_results: usize) -> ToolOp {
    ToolOp::Find {
        path: path.into(),
        glob: glob.into(),
        max_results,
    }
}

fn search(path: &str, pattern: &str, glob: Option<&str>, max_matches: usize) -> ToolOp {
    ToolOp::Search {
        path: path.into(),
        pattern: pattern.into(),
        glob: glob.map(str::to_string),
        max_matches,
    }
}

#[test]
fn read_numbers_lines_and_says_where_it_cut() {
    let f = fixture();
    assert_eq!(
        f.output(read("a.txt", 1, 100, 10_000)),
        "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n     5\tfive\n"
    );
    assert_eq!(
        f.output(read("./a.txt", 2, 2, 10_000)),
        "     2\ttwo\n     3\tthree\n(cut: max_lines (2) reached; the file goes on: read on \
         from first_line 4)\n"
    );
    // Two lines of 11 bytes each fit in 25, the third does not.
    assert_eq!(
        f.output(read("a.txt", 1, 100, 25)),
        "     1\tone\n     2\ttwo\n(cut: max_bytes (25) reached; the file goes on: read on \
         from first_line 3)\n"
    );
    let long = "x".repeat(100);
    std::fs::write(f.project.join("long.txt"), &long).unwrap();
    let cut = f.output(read("long.txt", 1, 10, 20));
    assert!(
        cut.starts_with("     1\txxxxxxxxxxxx\n(cut: line 1 is 100 bytes, over max_bytes (20))"),
        "{cut}"
    );
    assert_eq!(
        f.output(read("a.txt", 9, 10, 100)),
        "(the file has 5 lines; first_line 9 is past its end)"
    );
    assert_eq!(
        f.output(read("blob.bin", 1, 10, 100)),
        "(binary file, 5 bytes)"
    );
    let absolute = f.project.join("a.txt");
    assert!(f
        .output(read(absolute.to_str().unwrap(), 5, 1, 100))
        .starts_with("     5\tfive\n"));
    // Through a symlink that stays inside.
    assert!(f
        .output(read("inner/deep/lib.rs", 1, 10, 100))
        .contains("pub fn hi"));
    assert!(f
        .refused(read("src", 1, 10, 100))
        .contains("is a directory"));
    assert!(f
        .refused(read("nope.txt", 1, 10, 100))
        .contains("`nope.txt`"));
}

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let f = fixture();
    let fifo = f.project.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for op in [
        read("fifo", 1, 10, 100),
        write("fifo", "x"),
        edit("fifo", "a", "b"),
        search("fifo", "x", None, 10),
    ] {
        let why = f.refused(op);
        assert!(why.contains("not a regular file"), "{why}");
    }
}

#[test]
fn an_image_comes_back_whole_as_a_file() {
    let f = fixture();
    assert_eq!(
        f.perform(read("pic.png", 1, 10, 100)),
        IoReply::File {
            bytes: b"\x89PNG\r\n\x1a\n....".to_vec(),
            size: 12
        }
    );
    let too_big = f.refused(read("pic.png", 1, 10, 5));
    assert!(
        too_big.contains("12 bytes, over max_bytes (5)"),
        "{too_big}"
    );
}

#[test]
fn list_sorts_marks_and_cuts() {
    let f = fixture();
    assert_eq!(f.output(list("src", 10)), "deep/\nignored.rs\nmain.rs");
    let top = f.output(list(".", 100));
    assert!(top.contains("\na.txt\n"), "{top}");
    assert!(top.contains("escape@"), "{top}");
    assert!(top.contains(".git/"), "{top}");
    let cut = f.output(list(".", 2));
    assert_eq!(
        cut,
        ".git/\n.gitignore\n(cut: 9 more entries not shown, max_entries (2))"
    );
    std::fs::create_dir(f.project.join("empty")).unwrap();
    assert_eq!(
        f.output(list("empty", 5)),
        "(`empty` is an empty directory)"
    );
    assert!(f.refused(list("a.txt", 5)).contains("is a file"));
}

#[test]
fn find_is_ignore_aware_skips_git_and_follows_no_symlink() {
    let f = fixture();
    assert_eq!(
        f.output(find(".", "*.rs", 10)),
        "src/deep/lib.rs\nsrc/main.rs"
    );
    assert_eq!(f.output(find("src", "deep/*", 10)), "src/deep/lib.rs");
    assert_eq!(
        f.output(find(".", "*", 2)),
        ".gitignore\na.txt\n(cut: more files match; max_results (2) reached)"
    );
    let all = f.output(find(".", "*", 100));
    assert!(!all.contains(".git/"), "{all}");
    assert!(!all.contains("ignored"), "{all}");
    assert!(!all.contains("secret"), "{all}");
    assert!(!all.contains("escape"), "{all}");
    assert_eq!(
        f.output(find(".", "*.zig", 10)),
        "(no file under `.` matches `*.zig`)"
    );
    assert!(f.refused(find(".", "a[", 10)).contains("is not a glob"));
}

#[test]
fn search_finds_lines_in_text_files_only() {
    let f = fixture();
    assert_eq!(
        f.output(search(".", r"fn \w+", None, 10)),
        "src/deep/lib.rs:1: pub fn hi() {}\nsrc/main.rs:1: fn main() {"
    );
    assert_eq!(
        f.output(search(".", "hi", Some("**/deep/*"), 10)),
        "src/deep/lib.rs:1: pub fn hi() {}"
    );
    assert_eq!(
        f.output(search(".", "hi", None, 1)),
        "src/deep/lib.rs:1: pub fn hi() {}\n(cut: more lines match; max_matches (1) reached)"
    );
    assert_eq!(
        f.output(search("a.txt", "^t", None, 10)),
        "a.txt:2: two\na.txt:3: three"
    );
    let long = format!("{}needle", "y".repeat(1000));
    std::fs::write(f.project.join("long.txt"), &long).unwrap();
    let found = f.output(search("long.txt", "needle", None, 10));
    assert!(found.len() < 400 && found.ends_with('…'), "{found}");
    // Not in .git, not in the binary file, not in the ignored one.
    assert!(f.output(search(".", "hi", None, 100)).lines().count() == 2);
    assert!(f
        .refused(search(".", "(", None, 10))
        .contains("is not a regex"));
}

#[test]
fn write_creates_with_no_old_text_and_replaces_with_it() {
    let f = fixture();
    let IoReply::Tool {
        output,
        diff: Some(diff),
    } = f.perform(write("new/dir/n.txt", "hello\n"))
    else {
        panic!("no diff");
    };
    assert!(output.contains("a new file of 6 bytes"), "{output}");
    let path = f.project.join("new/dir/n.txt");
    assert_eq!(
        diff,
        FileDiff {
            path: path.to_str().unwrap().into(),
            old_text: None,
            new_text: "hello\n".into()
        }
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello\n");
    let IoReply::Tool {
        diff: Some(diff), ..
    } = f.perform(write("new/dir/n.txt", "bye\n"))
    else {
        panic!("no diff");
    };
    assert_eq!(diff.old_text.as_deref(), Some("hello\n"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "bye\n");
    let big = f.refused(ToolOp::Write {
        path: "a.txt".into(),
        text: "x".into(),
        max_bytes: 4,
    });
    assert!(big.contains("over max_bytes (4)"), "{big}");
    assert!(f.refused(write("src", "x")).contains("is a directory"));
    assert_eq!(
        std::fs::read_to_string(f.project.join("a.txt")).unwrap(),
        "one\ntwo\nthree\nfour\nfive\n"
    );
}

#[test]
fn edit_replaces_the_one_occurrence_and_refuses_doubt() {
    let f = fixture();
    let IoReply::Tool {
        diff: Some(diff), ..
    } = f.perform(edit("a.txt", "two", "2"))
    else {
        panic!("no diff");
    };
    assert_eq!(
        diff.old_text.as_deref(),
        Some("one\ntwo\nthree\nfour\nfive\n")
    );
    assert_eq!(diff.new_text, "one\n2\nthree\nfour\nfive\n");
    assert_eq!(
        std::fs::read_to_string(f.project.join("a.txt")).unwrap(),
        diff.new_text
    );
    let twice = f.refused(edit("a.txt", "f", "F"));
    assert!(twice.contains("occurs 2 times in `a.txt`"), "{twice}");
    let never = f.refused(edit("a.txt", "six", "6"));
    assert!(never.contains("does not occur in `a.txt`"), "{never}");
    assert!(f.refused(edit("a.txt", "", "x")).contains("empty"));
    assert_eq!(
        std::fs::read_to_string(f.project.join("a.txt")).unwrap(),
        diff.new_text,
        "a refused edit changed the file"
    );
    assert!(f.refused(edit("nope.txt", "a", "b")).contains("`nope.txt`"));
}

#[test]
fn nothing_outside_the_project_is_read_or_changed() {
    let f = fixture();
    let before = f.outside_files();
    let secret = f.outside.join("secret.txt");
    let secret = secret.to_str().unwrap();
    let escapes = [
        "../outside/secret.txt",
        secret,
        "escape/secret.txt",
        "escape_file",
        "inner/../../outside/secret.txt",
        "src/../../outside/secret.txt",
    ];
    for path in escapes {
        for op in [
            read(path, 1, 100, 10_000),
            write(path, "pwned"),
            edit(path, SECRET, "pwned"),
            search(path, "SECRET", None, 10),
        ] {
            let why = f.refused(op);
            assert!(
                why.contains("outside the session's project"),
                "{path}: {why}"
            );
            assert!(!why.contains(SECRET), "{why}");
        }
    }
    let why = f.refused(read("escape_file", 1, 10, 100));
    assert!(
        why.starts_with(&format!(
            "`escape_file` leads to `{secret}`, which is outside"
        )),
        "{why}"
    );
    for op in [list("escape", 10), find("escape", "*", 10), list("..", 10)] {
        assert!(f.refused(op).contains("outside the session's project"));
    }
    // A dangling symlink is not written through, nor a new file made under a symlink out.
    assert!(f
        .refused(write("dangling", "pwned"))
        .contains("outside the session's project"));
    assert!(f
        .refused(write("escape/new.txt", "pwned"))
        .contains("outside the session's project"));
    assert!(f.refused(read("/../../..", 1, 1, 1)).contains("goes above"));
    // Walks of the whole project show nothing of it.
    for op in [
        find(".", "*", 1000),
        search(".", ".", None, 1000),
        search(".", "SECRET", None, 1000),
        list(".", 1000),
    ] {
        assert!(!f.output(op).contains(SECRET));
    }
    assert_eq!(f.outside_files(), before, "a file outside changed");
}

#[test]
fn protected_paths_are_refused_as_written_and_as_resolved() {
    let f = fixture();
    for path in [".git/config", "gitlink", ".git", "src/../.git/config"] {
        for op in [
            read(path, 1, 10, 100),
            write(path, "x"),
            edit(path, "hi", "x"),
            list(path, 10),
        ] {
            let why = f.refused(op);
            assert!(
                why.contains("is protected (tools.protected: `.git`): tools do not touch it"),
                "{path}: {why}"
            );
        }
    }
    assert_eq!(
        f.refused(read(".git/config", 1, 10, 100)),
        "`.git/config` is protected (tools.protected: `.git`): tools do not touch it"
    );
    assert_eq!(
        std::fs::read_to_string(f.project.join(".git/config")).unwrap(),
        "[core]\nhi = 1\n"
    );
    // A protected path entry covers what is below it.
    let mut f = f;
    f.settings.protected.push(Protected::Path(
        f.project.join("src").to_str().unwrap().into(),
    ));
    assert!(f
        .refused(read("inner/main.rs", 1, 1, 100))
        .contains("tools.protected"));
    assert!(!f.output(search(".", "fn", None, 100)).contains("main.rs"));
}

#[test]
fn roots_bound_a_session_under_the_limits() {
    let f = fixture();
    let mut request = f.request(read("a.txt", 1, 10, 100));
    request.roots = vec![f.outside.to_str().unwrap().into()];
    let IoReply::Failed { reason } = tools::perform(&f.settings, &request, &AtomicBool::new(false))
    else {
        panic!("not refused");
    };
    assert!(
        reason.contains("outside the device's roots (remote.roots"),
        "{reason}"
    );
    request.roots = vec![f.project.parent().unwrap().to_str().unwrap().into()];
    assert!(matches!(
        tools::perform(&f.settings, &request, &AtomicBool::new(false)),
        IoReply::Tool { .. }
    ));
}

// --- Through the performer: the wiring, and commands. ---

fn performer(f: &Fixture) -> (Performer, Receiver<Input>) {
    let (tx, rx) = channel::bounded(16);
    let mut p = Performer::new(None, PathBuf::from("/nonexistent"), tx);
    p.set_tools(Arc::new(f.settings.clone()));
    (p, rx)
}

/// The next reply (within 10 s), passed through `accept` as the driver does.
async fn reply(p: &mut Performer, rx: &Receiver<Input>) -> (IoId, IoReply) {
    let input = future::or(async { rx.recv().await.ok() }, async {
        smol::Timer::after(Duration::from_secs(10)).await;
        None
    })
    .await
    .expect("no reply within 10 s");
    let Input::Io { id, reply } = input else {
        panic!("not an engine reply");
    };
    assert!(p.accept(id, &reply), "a reply for a call not open");
    (id, reply)
}

fn tool(f: &Fixture, id: u64, op: ToolOp) -> IoCall {
    IoCall::Tool {
        id: IoId(id),
        request: Box::new(f.request(op)),
    }
}

fn run(command: &str) -> ToolOp {
    ToolOp::Run {
        command: command.into(),
    }
}

/// Read a command's output to its end: the bytes, and the exit code.
async fn run_to_end(
    p: &mut Performer,
    rx: &Receiver<Input>,
    id: u64,
    max: usize,
) -> (Vec<u8>, Option<i32>) {
    let mut out = Vec::new();
    loop {
        assert_eq!(p.perform(IoCall::Read { id: IoId(id), max }), None);
        match reply(p, rx).await.1 {
            IoReply::Body(bytes) => {
                assert!(!bytes.is_empty() && bytes.len() <= max, "{bytes:?}");
                out.extend(bytes);
            }
            IoReply::Exit { code } => return (out, code),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn the_performer_answers_file_tools() {
    let f = fixture();
    smol::block_on(async {
        let (mut p, rx) = performer(&f);
        assert_eq!(p.perform(tool(&f, 1, read("a.txt", 1, 1, 100))), None);
        let (id, r) = reply(&mut p, &rx).await;
        assert_eq!(id, IoId(1));
        assert!(matches!(r, IoReply::Tool { output, .. } if output.starts_with("     1\tone")));
        p.perform(tool(&f, 2, read("../outside/secret.txt", 1, 1, 100)));
        assert!(matches!(reply(&mut p, &rx).await.1, IoReply::Failed { .. }));
        assert_eq!(p.running(), 0);
    });
}

#[test]
fn a_command_runs_in_the_project_and_its_output_comes_in_order() {
    let f = fixture();
    smol::block_on(async {
        let (mut p, rx) = performer(&f);
        p.perform(tool(
            &f,
            1,
            run("pwd; echo out; echo err >&2; echo end; exit 3"),
        ));
        let (out, code) = run_to_end(&mut p, &rx, 1, 3).await;
        let expected = format!("{}\nout\nerr\nend\n", f.project.display());
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        assert_eq!(code, Some(3));
        p.perform(tool(&f, 2, run("kill -9 $$")));
        assert_eq!(run_to_end(&mut p, &rx, 2, 100).await, (Vec::new(), None));
        // Stdin is closed: a command that reads it ends.
        p.perform(tool(&f, 3, run("cat; echo done")));
        assert_eq!(
            run_to_end(&mut p, &rx, 3, 100).await,
            (b"done\n".to_vec(), Some(0))
        );
        assert_eq!(p.running(), 0);
    });
}

#[test]
fn output_is_read_as_it_comes() {
    let f = fixture();
    smol::block_on(async {
        let (mut p, rx) = performer(&f);
        // The second line waits for a file the test makes after reading the first.
        p.perform(tool(
            &f,
            1,
            run("echo first; while [ ! -e go ]; do sleep 0.01; done; echo second"),
        ));
        p.perform(IoCall::Read {
            id: IoId(1),
            max: 100,
        });
        assert_eq!(
            reply(&mut p, &rx).await.1,
            IoReply::Body(b"first\n".to_vec())
        );
        std::fs::write(f.project.join("go"), b"").unwrap();
        p.perform(IoCall::Read {
            id: IoId(1),
            max: 100,
        });
        assert_eq!(
            reply(&mut p, &rx).await.1,
            IoReply::Body(b"second\n".to_vec())
        );
        p.perform(IoCall::Read {
            id: IoId(1),
            max: 100,
        });
        assert_eq!(reply(&mut p, &rx).await.1, IoReply::Exit { code: Some(0) });
    });
}

/// Whether process `pid` is gone: no such process, or a zombie no longer ours (its parent
/// reaps it).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

fn wait_gone(pid: u32, what: &str) {
    let start = Instant::now();
    while !gone(pid) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{what} {pid} still runs 5 s after the abort"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn an_abort_kills_the_whole_group_and_reaps_the_shell() {
    let f = fixture();
    smol::block_on(async {
        let (mut p, rx) = performer(&f);
        p.perform(tool(&f, 1, run("sleep 300 & echo $$ $!; wait")));
        p.perform(IoCall::Read {
            id: IoId(1),
            max: 100,
        });
        let IoReply::Body(line) = reply(&mut p, &rx).await.1 else {
            panic!("no pids");
        };
        let line = String::from_utf8(line).unwrap();
        let (shell, sleeper) = line.trim().split_once(' ').expect("two pids");
        let (shell, sleeper): (u32, u32) = (shell.parse().unwrap(), sleeper.parse().unwrap());
        assert!(!gone(sleeper));
        assert_eq!(p.perform(IoCall::Abort { id: IoId(1) }), None);
        assert_eq!(p.running(), 0);
        wait_gone(sleeper, "the grandchild");
        // The shell is this process's child: reaped, not a zombie.
        let start = Instant::now();
        while std::fs::metadata(format!("/proc/{shell}")).is_ok() {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "the shell was not reaped"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    });
}

#[test]
fn a_dropped_performer_kills_its_commands() {
    let f = fixture();
    smol::block_on(async {
        let (mut p, rx) = performer(&f);
        p.perform(tool(&f, 1, run("sleep 300 & echo $!; wait")));
        p.perform(IoCall::Read {
            id: IoId(1),
            max: 100,
        });
        let IoReply::Body(line) = reply(&mut p, &rx).await.1 else {
            panic!("no pid");
        };
        let pid: u32 = String::from_utf8(line).unwrap().trim().parse().unwrap();
        drop(p);
        wait_gone(pid, "the grandchild");
    });
}

#[test]
fn leftovers_of_a_command_that_ended_are_killed() {
    let f = fixture();
    smol::block_on(async {
        let (mut p, rx) = performer(&f);
        p.perform(tool(&f, 1, run("sleep 300 >/dev/null 2>&1 & echo $!")));
        let (out, code) = run_to_end(&mut p, &rx, 1, 100).await;
        assert_eq!(code, Some(0));
        let pid: u32 = String::from_utf8(out).unwrap().trim().parse().unwrap();
        wait_gone(pid, "the left-over");
    });
}

#[test]
fn a_command_outside_its_confinement_is_refused() {
    let f = fixture();
    smol::block_on(async {
        let (mut p, rx) = performer(&f);
        let mut request = f.request(run("echo hi"));
        request.roots = vec![f.outside.to_str().unwrap().into()];
        p.perform(IoCall::Tool {
            id: IoId(1),
            request: Box::new(request),
        });
        p.perform(IoCall::Read {
            id: IoId(1),
            max: 100,
        });
        let IoReply::Failed { reason } = reply(&mut p, &rx).await.1 else {
            panic!("not refused");
        };
        assert!(reason.contains("remote.roots"), "{reason}");
    });
}
