//! `cargo bench -p lembas --bench files_search`: `_lembas/files/search` over a generated
//! 100,000-file tree (1,000 directories of 100 files, two levels deep), through the shell's
//! index (`lembas::file_index`): the first query (the walk that builds the index, then the
//! match), a warm query (the index reused: the match alone), and a warm query after the index
//! is due a freshness check (the directories' mtimes looked at, nothing walked again); against
//! a baseline in the same run: the bare `ignore` walk of the same tree, which any search that
//! walked on every keystroke would pay.

use std::time::Instant;

use lembas::file_index::{FileIndexes, RECHECK};
use lembas::tools::ToolSettings;
use lembas_core::confine::Protected;

const DIRS: usize = 1_000;
const FILES_PER_DIR: usize = 100;
const WARM_RUNS: usize = 20;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    for d in 0..DIRS {
        let sub = root.join(format!("pkg{:02}/mod{:03}", d / 50, d));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(sub.join(format!("file_{f:03}_{d}.rs")), "").unwrap();
        }
    }
    let settings = ToolSettings {
        protected: vec![Protected::Name(".git".into())],
        shell: "/bin/sh".into(),
        undo: None,
    };
    let r = root.to_str().unwrap();
    let ms = |start: Instant| start.elapsed().as_secs_f64() * 1000.0;

    // The baseline: one bare walk of the tree.
    let start = Instant::now();
    let walked = ignore::WalkBuilder::new(&root).build().count();
    let walk_ms = ms(start);

    let index = FileIndexes::new(200_000);
    let start = Instant::now();
    let first = index
        .search(&settings, r, &[], "mod42file7", 20, &[])
        .unwrap();
    let first_ms = ms(start);
    assert!(!first.files.is_empty() && !first.truncated);

    let queries = ["f", "file_042", "pkg1mod4", "mod999file_099", "zzz", "rs"];
    let start = Instant::now();
    for i in 0..WARM_RUNS {
        let q = queries[i % queries.len()];
        index.search(&settings, r, &[], q, 20, &[]).unwrap();
    }
    let warm_ms = ms(start) / WARM_RUNS as f64;

    // Due a freshness check: every directory's mtime is looked at, nothing changed.
    std::thread::sleep(RECHECK);
    let start = Instant::now();
    index
        .search(&settings, r, &[], "file_042", 20, &[])
        .unwrap();
    let recheck_ms = ms(start);

    println!(
        "files_search: {} entries ({walked} walked by the baseline)",
        first.indexed
    );
    println!("  bare ignore walk (baseline)     {walk_ms:>9.1} ms");
    println!("  first query (walk + index)      {first_ms:>9.1} ms");
    println!("  warm query (index reused)       {warm_ms:>9.1} ms");
    println!("  warm query with mtime recheck   {recheck_ms:>9.1} ms");
    println!(
        "  ratio warm/walk {:.3}, first/walk {:.2}",
        warm_ms / walk_ms,
        first_ms / walk_ms
    );
}
