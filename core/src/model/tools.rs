//! The model's tools: their table (names, JSON schemas, ACP `kind`, a title for the person),
//! their bounds (`engine.tools.*`), and the model's arguments read into what the engine does.
//!
//! | tool | arguments | ACP kind | class (see `policy.rs`) |
//! |---|---|---|---|
//! | `read` | `path`, `offset?` (first line, from 1), `limit?` (lines) | `read` | reading |
//! | `list` | `path?` | `read` | reading |
//! | `find` | `pattern` (glob), `path?` | `search` | reading |
//! | `search` | `pattern` (regex), `path?`, `glob?` | `search` | reading |
//! | `write` | `path`, `content` | `edit` | writing |
//! | `edit` | `path`, `old_string`, `new_string` | `edit` | writing |
//! | `run` | `command`, `description?` | `execute` | running |
//! | `ask_user` | `why?`, `questions` (`_lembas/question`'s shape) | `think` | the engine's own |
//! | `plan_write` | `plan` (`{ phases: [{ title?, tasks: [{ title, status? }] }] }`) | `think` | the engine's own |
//! | `plan_update` | `tasks: [{ title, status }]` | `think` | the engine's own |
//! | `plan_submit` | `text` (markdown), `plan?` | `think` | the engine's own |
//!
//! `plan_write` replaces the session's plan; `plan_update` changes the status of tasks (named by
//! their title) in the plan this turn wrote, so a model ticks tasks off without sending the
//! whole plan again. Bad arguments (not JSON, a missing or mistyped field, a bound broken) are
//! told to the model as the call's result, naming what was wrong; nothing here panics.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config::ConfigError;
use crate::engine::Question;
use crate::engine_io::ToolOp;
use crate::text::floor_char;

/// The tools' bounds (`engine.tools.<field>` in config.yaml), each named where it cuts or
/// refuses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub struct ToolsConfig {
    /// Whether the model is offered tools at all.
    pub enabled: bool,
    /// Model calls in one turn; the turn then ends (`max_turn_requests`) with a notice.
    pub max_steps: u32,
    /// Tool calls in one model call; more fails the turn.
    pub max_calls_per_step: usize,
    /// Bytes of one call's id, name and arguments; a longer call is refused to the model.
    pub max_argument_bytes: usize,
    /// Bytes of one tool result given to the model; more is cut, and the model told.
    pub max_result_bytes: usize,
    /// Lines one `read` returns at most (and its `limit` when it gives none).
    pub read_max_lines: u64,
    /// Bytes one `read` returns at most (an image larger is not shown).
    pub read_max_bytes: u64,
    pub list_max_entries: usize,
    pub find_max_results: usize,
    pub search_max_matches: usize,
    /// The largest file `write` or `edit` works on.
    pub max_file_bytes: u64,
    /// A command running longer is stopped (its process group killed) and the model told.
    pub run_timeout_ms: u64,
    /// A command's output kept; more is read and dropped, and the model told where it was cut.
    pub run_max_output_bytes: usize,
    /// A running command's output reaches the client at most once per this interval.
    pub progress_interval_ms: u64,
    /// "Allow always" rules kept, across sessions; the oldest is forgotten first.
    pub max_remembered: usize,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            enabled: true,
            max_steps: 50,
            max_calls_per_step: 32,
            max_argument_bytes: 1024 * 1024,
            max_result_bytes: 64 * 1024,
            read_max_lines: 2_000,
            read_max_bytes: 256 * 1024,
            list_max_entries: 1_000,
            find_max_results: 1_000,
            search_max_matches: 500,
            max_file_bytes: 1024 * 1024,
            run_timeout_ms: 120_000,
            run_max_output_bytes: 256 * 1024,
            progress_interval_ms: 250,
            max_remembered: 256,
        }
    }
}

impl ToolsConfig {
    /// Bounds of zero would refuse every call: refused, naming the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let at_least_one = [
            ("engine.tools.max_steps", u64::from(self.max_steps)),
            (
                "engine.tools.max_calls_per_step",
                self.max_calls_per_step as u64,
            ),
            (
                "engine.tools.max_argument_bytes",
                self.max_argument_bytes as u64,
            ),
            (
                "engine.tools.max_result_bytes",
                self.max_result_bytes as u64,
            ),
            ("engine.tools.read_max_lines", self.read_max_lines),
            ("engine.tools.read_max_bytes", self.read_max_bytes),
            (
                "engine.tools.list_max_entries",
                self.list_max_entries as u64,
            ),
            (
                "engine.tools.find_max_results",
                self.find_max_results as u64,
            ),
            (
                "engine.tools.search_max_matches",
                self.search_max_matches as u64,
            ),
            ("engine.tools.max_file_bytes", self.max_file_bytes),
            ("engine.tools.run_timeout_ms", self.run_timeout_ms),
            (
                "engine.tools.run_max_output_bytes",
                self.run_max_output_bytes as u64,
            ),
            (
                "engine.tools.progress_interval_ms",
                self.progress_interval_ms,
            ),
        ];
        match at_least_one.iter().find(|(_, v)| *v == 0) {
            Some((name, _)) => Err(ConfigError(format!("{name} must be at least 1 (got 0)"))),
            None => Ok(()),
        }
    }
}

/// What a tool call comes to.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Done on this machine by the shell (`IoCall::Tool`).
    Op(ToolOp),
    /// A `_lembas/question` card.
    AskUser {
        why: Option<String>,
        questions: Vec<Question>,
    },
    /// The session's plan replaced.
    PlanWrite(Value),
    /// Tasks' statuses changed, by title.
    PlanUpdate(Vec<TaskStatus>),
    /// The plan written for the record, then a `_lembas/plan` card.
    PlanSubmit { text: String, plan: Option<Value> },
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskStatus {
    pub title: String,
    pub status: String,
}

/// What the mode table rules on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Reading,
    Writing,
    Running,
    /// Asking, planning: the engine's own, never the machine's.
    Own,
}

/// A call read: what it does, and how the person sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub name: &'static str,
    pub action: Action,
    pub title: String,
    pub purpose: Option<String>,
}

impl Call {
    pub fn class(&self) -> Class {
        class(self.name)
    }
}

/// The tools' names, in the order they are offered.
pub const NAMES: [&str; 11] = [
    "read",
    "list",
    "find",
    "search",
    "write",
    "edit",
    "run",
    "ask_user",
    "plan_write",
    "plan_update",
    "plan_submit",
];

pub fn class(name: &str) -> Class {
    match name {
        "read" | "list" | "find" | "search" => Class::Reading,
        "write" | "edit" => Class::Writing,
        "run" => Class::Running,
        _ => Class::Own,
    }
}

/// ACP's `kind` of a tool call.
pub fn kind(name: &str) -> &'static str {
    match name {
        "read" | "list" => "read",
        "find" | "search" => "search",
        "write" | "edit" => "edit",
        "run" => "execute",
        "ask_user" | "plan_write" | "plan_update" | "plan_submit" => "think",
        _ => "other",
    }
}

/// The OpenAI function tools offered to the model.
pub fn definitions() -> Value {
    let string = |d: &str| json!({ "type": "string", "description": d });
    let integer = |d: &str| json!({ "type": "integer", "minimum": 1, "description": d });
    let plan = json!({
        "type": "object",
        "description": "The plan: phases, each with tasks.",
        "properties": { "phases": { "type": "array", "items": {
            "type": "object",
            "properties": {
                "title": { "type": "string" },
                "tasks": { "type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "title": { "type": "string" },
                        "status": { "type": "string", "enum": STATUSES },
                    },
                    "required": ["title"],
                }},
            },
            "required": ["tasks"],
        }}},
        "required": ["phases"],
    });
    let tools = [
        (
            "read",
            "Read a file of the project: numbered lines (an image is shown to a model that sees).",
            json!({ "path": string("The file, relative to the project."),
                    "offset": integer("The first line to read, from 1."),
                    "limit": integer("How many lines to read.") }),
            &["path"][..],
        ),
        (
            "list",
            "List a directory's entries (directories end with /).",
            json!({ "path": string("The directory, relative to the project; the project when left out.") }),
            &[][..],
        ),
        (
            "find",
            "Find files whose path matches a glob, skipping ignored files.",
            json!({ "pattern": string("A glob, such as **/*.rs."),
                    "path": string("The directory to look under; the project when left out.") }),
            &["pattern"][..],
        ),
        (
            "search",
            "Search the files' lines for a regular expression, skipping ignored files.",
            json!({ "pattern": string("A regular expression."),
                    "path": string("The directory to look under; the project when left out."),
                    "glob": string("Only files matching this glob.") }),
            &["pattern"][..],
        ),
        (
            "write",
            "Create a file, or replace its whole content.",
            json!({ "path": string("The file, relative to the project."),
                    "content": string("The file's whole new content.") }),
            &["path", "content"][..],
        ),
        (
            "edit",
            "Replace the one occurrence of old_string in a file with new_string.",
            json!({ "path": string("The file, relative to the project."),
                    "old_string": string("The exact text to replace; it must occur exactly once."),
                    "new_string": string("The text to put in its place.") }),
            &["path", "old_string", "new_string"][..],
        ),
        (
            "run",
            "Run a shell command in the project; its output (stdout and stderr) comes back.",
            json!({ "command": string("The command line."),
                    "description": string("What it is for, in a few words, shown to the person.") }),
            &["command"][..],
        ),
        (
            "ask_user",
            "Ask the person up to 4 questions of up to 6 options each.",
            json!({ "why": string("Why you ask."),
                    "questions": { "type": "array", "maxItems": 4, "items": {
                        "type": "object",
                        "properties": {
                            "header": { "type": "string" },
                            "question": { "type": "string" },
                            "multiple": { "type": "boolean" },
                            "options": { "type": "array", "maxItems": 6, "items": {
                                "type": "object",
                                "properties": {
                                    "label": { "type": "string" },
                                    "description": { "type": "string" },
                                    "recommended": { "type": "boolean" },
                                },
                                "required": ["label"],
                            }},
                        },
                        "required": ["header", "question", "options"],
                    }} }),
            &["questions"][..],
        ),
        (
            "plan_write",
            "Write the session's plan (replacing it).",
            json!({ "plan": plan.clone() }),
            &["plan"][..],
        ),
        (
            "plan_update",
            "Change the status of tasks of the plan written in this turn, by their title.",
            json!({ "tasks": { "type": "array", "items": {
                "type": "object",
                "properties": { "title": { "type": "string" },
                                "status": { "type": "string", "enum": STATUSES } },
                "required": ["title", "status"],
            }}}),
            &["tasks"][..],
        ),
        (
            "plan_submit",
            "Submit the plan for the person's approval; approved, you carry it out.",
            json!({ "text": string("The plan, as markdown."), "plan": plan }),
            &["text"][..],
        ),
    ];
    Value::Array(
        tools
            .into_iter()
            .map(|(name, description, properties, required)| {
                json!({ "type": "function", "function": {
                    "name": name,
                    "description": description,
                    "parameters": { "type": "object", "properties": properties, "required": required },
                }})
            })
            .collect(),
    )
}

/// A task's statuses (`plan_entries` in the device reads them).
const STATUSES: [&str; 4] = ["pending", "in_progress", "completed", "dropped"];

#[derive(Deserialize)]
struct ReadArgs {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

#[derive(Deserialize)]
struct ListArgs {
    path: Option<String>,
}

#[derive(Deserialize)]
struct FindArgs {
    pattern: String,
    path: Option<String>,
}

#[derive(Deserialize)]
struct SearchArgs {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
}

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
}

#[derive(Deserialize)]
struct RunArgs {
    command: String,
    description: Option<String>,
}

#[derive(Deserialize)]
struct AskArgs {
    why: Option<String>,
    questions: Vec<Question>,
}

#[derive(Deserialize)]
struct PlanArgs {
    plan: Value,
}

#[derive(Deserialize)]
struct PlanUpdateArgs {
    tasks: Vec<TaskStatus>,
}

#[derive(Deserialize)]
struct SubmitArgs {
    text: String,
    plan: Option<Value>,
}

fn args<T: DeserializeOwned>(name: &str, arguments: &str) -> Result<T, String> {
    // Some servers send no arguments at all for a call that needs none.
    let arguments = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    serde_json::from_str(arguments).map_err(|e| {
        let mut why = e.to_string();
        if why.len() > 200 {
            why = format!("{}…", floor_char(&why, 200));
        }
        format!("the arguments of `{name}` are not what it takes: {why}")
    })
}

/// `text` cut to a title's length.
fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    const MOST: usize = 80;
    if line.len() > MOST || line.len() < text.trim_end().len() {
        format!("{}…", floor_char(line, MOST))
    } else {
        line.to_string()
    }
}

fn dir(path: Option<String>) -> String {
    path.filter(|p| !p.is_empty()).unwrap_or_else(|| ".".into())
}

/// Read a call's arguments (a JSON object as text) into what it does.
pub fn parse(name: &str, arguments: &str, c: &ToolsConfig) -> Result<Call, String> {
    let Some(&name) = NAMES.iter().find(|n| **n == name) else {
        return Err(format!(
            "there is no tool named `{}`; the tools are: {}",
            short(name),
            NAMES.join(", ")
        ));
    };
    let call = |action, title: String| Call {
        name,
        action,
        title,
        purpose: None,
    };
    Ok(match name {
        "read" => {
            let a: ReadArgs = args(name, arguments)?;
            let title = format!("Read {}", short(&a.path));
            call(
                Action::Op(ToolOp::Read {
                    path: a.path,
                    first_line: a.offset.unwrap_or(1).max(1),
                    max_lines: a.limit.unwrap_or(c.read_max_lines).min(c.read_max_lines),
                    max_bytes: c.read_max_bytes,
                }),
                title,
            )
        }
        "list" => {
            let a: ListArgs = args(name, arguments)?;
            let path = dir(a.path);
            let title = format!("List {}", short(&path));
            call(
                Action::Op(ToolOp::List {
                    path,
                    max_entries: c.list_max_entries,
                }),
                title,
            )
        }
        "find" => {
            let a: FindArgs = args(name, arguments)?;
            let path = dir(a.path);
            let title = format!("Find {} in {}", short(&a.pattern), short(&path));
            call(
                Action::Op(ToolOp::Find {
                    path,
                    glob: a.pattern,
                    max_results: c.find_max_results,
                }),
                title,
            )
        }
        "search" => {
            let a: SearchArgs = args(name, arguments)?;
            let path = dir(a.path);
            let title = format!("Search `{}` in {}", short(&a.pattern), short(&path));
            call(
                Action::Op(ToolOp::Search {
                    path,
                    pattern: a.pattern,
                    glob: a.glob.filter(|g| !g.is_empty()),
                    max_matches: c.search_max_matches,
                }),
                title,
            )
        }
        "write" => {
            let a: WriteArgs = args(name, arguments)?;
            if a.content.len() as u64 > c.max_file_bytes {
                return Err(format!(
                    "the content is {} bytes, more than engine.tools.max_file_bytes ({})",
                    a.content.len(),
                    c.max_file_bytes
                ));
            }
            let title = format!("Write {}", short(&a.path));
            call(
                Action::Op(ToolOp::Write {
                    path: a.path,
                    text: a.content,
                    max_bytes: c.max_file_bytes,
                }),
                title,
            )
        }
        "edit" => {
            let a: EditArgs = args(name, arguments)?;
            if a.old_string.is_empty() {
                return Err(
                    "`old_string` is empty: give the exact text to replace (to create \
                            a file, use `write`)"
                        .into(),
                );
            }
            let title = format!("Edit {}", short(&a.path));
            call(
                Action::Op(ToolOp::Edit {
                    path: a.path,
                    old: a.old_string,
                    new: a.new_string,
                    max_bytes: c.max_file_bytes,
                }),
                title,
            )
        }
        "run" => {
            let a: RunArgs = args(name, arguments)?;
            if a.command.trim().is_empty() {
                return Err("`command` is empty".into());
            }
            let title = format!("Run {}", short(&a.command));
            Call {
                purpose: a.description.filter(|d| !d.trim().is_empty()),
                ..call(Action::Op(ToolOp::Run { command: a.command }), title)
            }
        }
        "ask_user" => {
            let a: AskArgs = args(name, arguments)?;
            if a.questions.is_empty() {
                return Err("`questions` is empty: ask at least one".into());
            }
            call(
                Action::AskUser {
                    why: a.why,
                    questions: a.questions,
                },
                "Ask the person".into(),
            )
        }
        "plan_write" => {
            let a: PlanArgs = args(name, arguments)?;
            check_plan(&a.plan)?;
            call(Action::PlanWrite(a.plan), "Write the plan".into())
        }
        "plan_update" => {
            let a: PlanUpdateArgs = args(name, arguments)?;
            if let Some(bad) = a
                .tasks
                .iter()
                .find(|t| !STATUSES.contains(&t.status.as_str()))
            {
                return Err(format!(
                    "task `{}`: status `{}` is not one of {}",
                    short(&bad.title),
                    short(&bad.status),
                    STATUSES.join(", ")
                ));
            }
            call(Action::PlanUpdate(a.tasks), "Update the plan".into())
        }
        // plan_submit, the last of NAMES.
        _ => {
            let a: SubmitArgs = args(name, arguments)?;
            if let Some(plan) = &a.plan {
                check_plan(plan)?;
            }
            call(
                Action::PlanSubmit {
                    text: a.text,
                    plan: a.plan,
                },
                "Submit the plan".into(),
            )
        }
    })
}

/// A plan is `{ phases: [{ title?, tasks: [{ title, status? }] }] }`; what else it holds is
/// kept as given.
fn check_plan(plan: &Value) -> Result<(), String> {
    let phases = plan
        .get("phases")
        .and_then(Value::as_array)
        .ok_or("the plan needs `phases`, an array")?;
    for (p, phase) in phases.iter().enumerate() {
        let tasks = phase
            .get("tasks")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("phase {}: `tasks` must be an array", p + 1))?;
        for (t, task) in tasks.iter().enumerate() {
            if !task.get("title").is_some_and(Value::is_string) {
                return Err(format!(
                    "phase {}, task {}: `title` must be a string",
                    p + 1,
                    t + 1
                ));
            }
            if let Some(status) = task.get("status") {
                if !status.as_str().is_some_and(|s| STATUSES.contains(&s)) {
                    return Err(format!(
                        "phase {}, task {}: `status` must be one of {}",
                        p + 1,
                        t + 1,
                        STATUSES.join(", ")
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Change tasks' statuses in `plan` by title; the titles not found, if any, are an error
/// (nothing is changed then).
pub fn update_plan(plan: &mut Value, tasks: &[TaskStatus]) -> Result<(), String> {
    let missing: Vec<&str> = tasks
        .iter()
        .filter(|u| task_mut(plan, &u.title).is_none())
        .map(|u| u.title.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the plan has no task titled {}",
            missing
                .iter()
                .map(|t| format!("`{}`", short(t)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for u in tasks {
        if let Some(task) = task_mut(plan, &u.title) {
            task["status"] = Value::String(u.status.clone());
        }
    }
    Ok(())
}

fn task_mut<'a>(plan: &'a mut Value, title: &str) -> Option<&'a mut Value> {
    plan.get_mut("phases")?
        .as_array_mut()?
        .iter_mut()
        .filter_map(|phase| phase.get_mut("tasks")?.as_array_mut())
        .flatten()
        .find(|task| task.get("title").and_then(Value::as_str) == Some(title))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_offered_with_an_object_schema_and_a_kind() {
        let defs = definitions();
        let names: Vec<&str> = defs
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, NAMES);
        for d in defs.as_array().unwrap() {
            assert_eq!(d["function"]["parameters"]["type"], "object");
            assert_ne!(kind(d["function"]["name"].as_str().unwrap()), "other");
        }
    }

    #[test]
    fn arguments_are_read_into_ops_with_the_bounds_and_titles() {
        let c = ToolsConfig::default();
        let call = parse("read", r#"{"path":"src/main.rs","limit":99999}"#, &c).unwrap();
        assert_eq!(call.title, "Read src/main.rs");
        assert_eq!(
            call.action,
            Action::Op(ToolOp::Read {
                path: "src/main.rs".into(),
                first_line: 1,
                max_lines: c.read_max_lines,
                max_bytes: c.read_max_bytes,
            })
        );
        let call = parse(
            "run",
            r#"{"command":"cargo test\necho x","description":"tests"}"#,
            &c,
        )
        .unwrap();
        assert_eq!(call.title, "Run cargo test…");
        assert_eq!(call.purpose.as_deref(), Some("tests"));
        assert_eq!(call.class(), Class::Running);
        let call = parse("list", "", &c).unwrap();
        assert_eq!(
            call.action,
            Action::Op(ToolOp::List {
                path: ".".into(),
                max_entries: c.list_max_entries
            })
        );
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        let c = ToolsConfig::default();
        let e = parse("read", "{\"path\": ", &c).unwrap_err();
        assert!(e.contains("arguments of `read`"), "{e}");
        let e = parse("edit", r#"{"path":"a","old_string":"x"}"#, &c).unwrap_err();
        assert!(e.contains("missing field `new_string`"), "{e}");
        let e = parse("nope", "{}", &c).unwrap_err();
        assert!(e.contains("no tool named `nope`"), "{e}");
        let e = parse("plan_write", r#"{"plan":{"phases":[{"tasks":[{}]}]}}"#, &c).unwrap_err();
        assert!(e.contains("task 1: `title`"), "{e}");
        let small = ToolsConfig {
            max_file_bytes: 3,
            ..ToolsConfig::default()
        };
        let e = parse("write", r#"{"path":"a","content":"four"}"#, &small).unwrap_err();
        assert!(e.contains("engine.tools.max_file_bytes (3)"), "{e}");
        let e = parse(
            "plan_update",
            r#"{"tasks":[{"title":"a","status":"x"}]}"#,
            &c,
        )
        .unwrap_err();
        assert!(e.contains("status `x`"), "{e}");
    }

    #[test]
    fn a_plan_update_changes_statuses_by_title_or_nothing() {
        let mut plan = json!({"phases":[{"tasks":[{"title":"a"},{"title":"b"}]}]});
        let set = |title: &str, status: &str| TaskStatus {
            title: title.into(),
            status: status.into(),
        };
        update_plan(&mut plan, &[set("b", "completed")]).unwrap();
        assert_eq!(plan["phases"][0]["tasks"][1]["status"], "completed");
        let before = plan.clone();
        let e = update_plan(&mut plan, &[set("a", "completed"), set("zz", "pending")]).unwrap_err();
        assert!(e.contains("`zz`"), "{e}");
        assert_eq!(plan, before);
    }

    #[test]
    fn zero_bounds_are_refused_by_name() {
        let c = ToolsConfig {
            run_timeout_ms: 0,
            ..ToolsConfig::default()
        };
        assert_eq!(
            c.validate().unwrap_err().0,
            "engine.tools.run_timeout_ms must be at least 1 (got 0)"
        );
        assert_eq!(ToolsConfig::default().validate(), Ok(()));
    }
}
