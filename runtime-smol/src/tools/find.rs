//! `find`: the files under a directory whose path (relative to it) matches a glob, at most
//! `max_results`, each shown relative to the project.

use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;

use lembas_core::engine_io::IoReply;

use super::{output, walk, Confined};

pub fn find(
    place: &Confined,
    given: &str,
    glob: &str,
    max_results: usize,
    cancel: &AtomicBool,
) -> Result<IoReply, String> {
    if !place.path.is_dir() {
        return Err(format!("`{given}` is not a directory"));
    }
    let matcher = walk::glob(glob)?;
    let mut found = Vec::new();
    let mut more = false;
    let finished = walk::files(place, Some(&matcher), cancel, |path, _| {
        if found.len() == max_results {
            more = true;
            return ControlFlow::Break(());
        }
        found.push(place.shown(path));
        ControlFlow::Continue(())
    });
    if !finished {
        return Err("the search was stopped".into());
    }
    if found.is_empty() {
        return Ok(output(format!(
            "(no file under `{given}` matches `{glob}`)"
        )));
    }
    let mut text = found.join("\n");
    if more {
        text.push_str(&format!(
            "\n(cut: more files match; max_results ({max_results}) reached)"
        ));
    }
    Ok(output(text))
}
