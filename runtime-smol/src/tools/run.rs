//! `run`: a command through the user's shell (`shell -c command`), in the session's project,
//! stdin closed, stdout and stderr into one pipe, in a process group of its own. Its output is
//! read only when the engine asks (`IoCall::Read`, one at a time): a command whose output is
//! not read blocks on its full pipe, so a fast command is held back by a slow reader and no
//! buffer grows. The engine keeps the timeout and the output's bound and aborts past either.
//!
//! The group dies with its call: an abort (or the call's end any other way) sends SIGKILL to
//! the whole group and reaps the shell, so no zombie stays and nothing it started runs on.
//! When the shell exits by itself, what it left running in its group is killed too.

use std::fs::File;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use futures_lite::AsyncReadExt;
use lembas_core::engine_io::{IoReply, ToolOp, ToolRequest};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use smol::channel::Receiver;
use smol::Async;

use super::{confine, ToolSettings};

/// Performs one `run` call: nothing until the first read; then a `Body` piece of at most the
/// read's `max` bytes per read, and at the output's end the `Exit`; or `Failed`. `send`
/// returns `false` when nobody wants the replies any more, which ends the command.
pub async fn run<F, Fut>(
    settings: Arc<ToolSettings>,
    request: ToolRequest,
    reads: Receiver<usize>,
    send: F,
) where
    F: Fn(IoReply) -> Fut,
    Fut: Future<Output = bool>,
{
    let started = blocking::unblock(move || start(&settings, &request)).await;
    let (mut group, output) = match started {
        Ok(s) => s,
        Err(reason) => {
            send(IoReply::Failed { reason }).await;
            return;
        }
    };
    let mut output = match Async::new(output) {
        Ok(o) => o,
        Err(e) => {
            let reason = format!("the command's output cannot be read: {e}");
            send(IoReply::Failed { reason }).await;
            return;
        }
    };
    let mut buf = Vec::new();
    while let Ok(max) = reads.recv().await {
        buf.resize(max.max(1), 0);
        let reply = match output.read(&mut buf).await {
            Ok(0) => IoReply::Exit {
                code: group.exited().await,
            },
            Ok(n) => IoReply::Body(buf[..n].to_vec()),
            Err(e) => IoReply::Failed {
                reason: format!("the command's output cannot be read: {e}"),
            },
        };
        let last = !matches!(reply, IoReply::Body(_));
        if !send(reply).await || last {
            return;
        }
    }
}

/// Resolve the project, check it, and start the command; its group and the pipe's read end.
fn start(settings: &ToolSettings, request: &ToolRequest) -> Result<(Group, File), String> {
    let ToolOp::Run { command } = &request.op else {
        return Err("not a command".into());
    };
    let place = confine(settings, request, ".")?;
    let (reader, writer) =
        std::io::pipe().map_err(|e| format!("no pipe for the command's output: {e}"))?;
    let writer_too = writer
        .try_clone()
        .map_err(|e| format!("no pipe for the command's output: {e}"))?;
    let mut shell = Command::new(&settings.shell);
    shell
        .arg("-c")
        .arg(command)
        .current_dir(&place.path)
        .stdin(Stdio::null())
        // The device token's variable, if the device was started with it, is not the model's.
        .env_remove("LEMBAS_TOKEN")
        .stdout(writer)
        .stderr(writer_too)
        .process_group(0);
    let child = shell
        .spawn()
        .map_err(|e| format!("`{}` cannot be started: {e}", settings.shell.display()))?;
    // The command holds this process's copies of the pipe's write end: dropped, the pipe
    // ends when the group's last writer does.
    drop(shell);
    Ok((
        Group { child: Some(child) },
        File::from(OwnedFd::from(reader)),
    ))
}

/// A command's process group, led by the shell. Dropped: the group is killed and the shell
/// reaped.
struct Group {
    /// `None` once reaped.
    child: Option<Child>,
}

impl Group {
    /// Wait for the shell to exit, kill what it left in its group, reap it: its exit code
    /// (`None`: a signal ended it).
    async fn exited(&mut self) -> Option<i32> {
        let pid = self.pid()?;
        // Waited for without reaping (the group's id stays the shell's until it is reaped, so
        // the kill below cannot reach another group); if this future is dropped, `drop` kills.
        let _ = blocking::unblock(move || {
            rustix::process::waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            )
        })
        .await;
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        let status = self.child.take()?.wait().ok()?;
        status.code()
    }

    fn pid(&self) -> Option<Pid> {
        self.child
            .as_ref()
            .and_then(|c| Pid::from_raw(c.id() as i32))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let Some(pid) = self.pid() else { return };
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        if let Some(mut child) = self.child.take() {
            // Killed, it ends at once; reaped off this thread all the same.
            blocking::unblock(move || {
                let _ = child.wait();
            })
            .detach();
        }
    }
}
