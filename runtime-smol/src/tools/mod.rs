//! The model's tools, performed on this machine and confined: every path is resolved (symlinks
//! followed) and checked with the core's rules ([`lembas_core::confine`]) before anything is
//! read or written, and the op acts on the resolved path it checked. File work runs on
//! `blocking`'s pool ([`perform`]); a command ([`run`]) is a process group whose output the
//! engine reads piece by piece.
//!
//! Races with a process that swaps a checked directory for a symlink between the check and
//! the act are not closed here (files are opened without following a last symlink, but
//! directories above are not re-checked); nor are hard links, which the model cannot make
//! without `run`.

mod edit;
mod find;
mod lines;
mod list;
mod read;
mod resolve;
pub mod run;
mod search;
mod settings;
pub(crate) mod text_file;
mod undo;
mod walk;
mod write;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use lembas_core::engine_io::{IoReply, ToolOp, ToolRequest};

pub use resolve::{confine, confine_in, real_path, Confined};
pub use settings::{ToolSettings, DEFAULT_PROTECTED};
pub use undo::{UndoJournal, UndoLimits};

/// Perform a tool call that works on files (every op but `run`), on the calling thread.
/// `cancel` set: a walk or a long read stops where it is (its call was aborted).
pub fn perform(settings: &ToolSettings, request: &ToolRequest, cancel: &AtomicBool) -> IoReply {
    let outcome = match &request.op {
        ToolOp::Read {
            path,
            first_line,
            max_lines,
            max_bytes,
        } => confine(settings, request, path)
            .and_then(|c| read::read(&c, path, *first_line, *max_lines, *max_bytes, cancel)),
        ToolOp::List { path, max_entries } => {
            confine(settings, request, path).and_then(|c| list::list(&c, path, *max_entries))
        }
        ToolOp::Find {
            path,
            glob,
            max_results,
        } => confine(settings, request, path)
            .and_then(|c| find::find(&c, path, glob, *max_results, cancel)),
        ToolOp::Search {
            path,
            pattern,
            glob,
            max_matches,
        } => confine(settings, request, path)
            .and_then(|c| search::search(&c, path, pattern, glob.as_deref(), *max_matches, cancel)),
        ToolOp::Write {
            path,
            text,
            max_bytes,
        } => confine(settings, request, path).and_then(|c| {
            kept_for_undo(settings, request, &c, || {
                write::write(&c, path, text, *max_bytes)
            })
        }),
        ToolOp::Edit {
            path,
            old,
            new,
            max_bytes,
        } => confine(settings, request, path).and_then(|c| {
            kept_for_undo(settings, request, &c, || {
                edit::edit(&c, path, old, new, *max_bytes)
            })
        }),
        ToolOp::Run { .. } => Err("a command is run by `tools::run`, not here".to_string()),
    };
    outcome.unwrap_or_else(|reason| IoReply::Failed { reason })
}

/// A change of the file at `place`, with what `/undo` needs kept around it (tools/undo.rs):
/// the file before the turn first changed it, and what the change left.
fn kept_for_undo(
    settings: &ToolSettings,
    request: &ToolRequest,
    place: &Confined,
    change: impl FnOnce() -> Result<IoReply, String>,
) -> Result<IoReply, String> {
    let Some(journal) = &settings.undo else {
        return change();
    };
    let (session, turn) = (&request.session_id, &request.turn_id);
    journal.before_change(session, turn, &place.path);
    let changed = change();
    if changed.is_ok() {
        journal.after_change(session, turn, &place.path);
    }
    changed
}

/// Sets its flag when dropped: a call's task holds one, so aborting the call (dropping the
/// task) tells the work on the pool to stop.
pub struct CancelOnDrop(pub Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A tool's plain answer, with no file changed.
fn output(text: String) -> IoReply {
    IoReply::Tool {
        output: text,
        diff: None,
    }
}
