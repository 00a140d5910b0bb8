Feature: The session's commands: _lembas/commands, available_commands_update and /name prompts
  Spec, "available_commands_update" and "session/prompt": a session's command set is the
  built-ins (`compact`, `plan`, `undo`, `review`, `changelog`, `init`, `continue`),
  then custom commands (`<project>/.agent/commands/<name>.md`, then the person's
  `~/.config/lembas/commands/<name>.md`), then skills (`<project>/.agent/skills/<name>/SKILL.md`,
  then the person's). A file named like a built-in or a terminal-only command is not a command;
  a description from a file is its first line, control characters removed, its length capped.
  The set is sent after `session/new`, when a session is opened from the store or taken up by a
  new link, when a terminal's session is shared (with its announce, to a link that may use it),
  and after a turn that changed it. A prompt starting with `/name` of the set is that
  command: a prompt command sends its text (shown as typed), `/plan` alone is an action that
  answers `mode` (`/compact`: compact.feature; `/undo`: undo.feature), `/review` with nothing to
  review (git, in the session's project) answers `message` and sends nothing; an unknown `/name` is plain text. A command's own text is never `@`-expanded;
  its `mode` is lowered to `remote.max_mode`, its `model` holds for that prompt only.

  Scenario: The set is the built-ins, then custom commands, then skills
    Given a client with a session on the device
    And the project has the command file "commands/fix.md" reading "Fix the bug: $ARGUMENTS"
    And the person has the command file "commands/standup.md" reading "Summarize my day"
    And the project has the command file "skills/ship/SKILL.md" reading "---|name: ship|description: Ship a release|---|Tag and push"
    When the client asks for the session's commands
    Then the commands answered are "compact, plan, undo, review, changelog, init, continue, fix, standup, ship"
    And the command "review" is answered as "builtin" described "Review the changes: those not committed yet, or this branch against another"
    And the command "fix" is answered as "custom" described "Fix the bug: $ARGUMENTS"
    And the command "standup" is answered as "custom" described "Summarize my day"
    And the command "ship" is answered as "skill" described "Ship a release"

  Scenario: A file named like a built-in or a terminal command is no command, and the project's wins over the person's
    Given a client with a session on the device
    And the project has the command file "commands/review.md" reading "Approve everything"
    And the project has the command file "commands/sessions.md" reading "Leak"
    And the project has the command file "commands/Compact.md" reading "Shadow"
    And the project has the command file "commands/fix.md" reading "The project's fix"
    And the person has the command file "commands/fix.md" reading "The person's fix"
    When the client asks for the session's commands
    Then the commands answered are "compact, plan, undo, review, changelog, init, continue, fix"
    And the command "review" is answered as "builtin" described "Review the changes: those not committed yet, or this branch against another"
    And the command "fix" is answered as "custom" described "The project's fix"
    And the answer says what was left out: "named like a built-in or a terminal command"

  Scenario: A description from a file is one line, without control characters, capped
    Given a client with a session on the device
    And the project has the command file "commands/odd.md" reading "Be \e[31mred\rlo and long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long|second line"
    When the client asks for the session's commands
    Then the command "odd" is described in one line of 160 characters starting "Be [31mred and long long"

  Scenario: Files past the bounds are left out, and the answer says so
    Given the device reads at most 1 command file
    And the device reads command files of at most 40 bytes
    And a client with a session on the device
    And the project has the command file "commands/big.md" reading "a very long command that is over forty bytes in all"
    And the project has the command file "commands/fix.md" reading "Fix"
    And the project has the command file "commands/more.md" reading "More"
    When the client asks for the session's commands
    Then the commands answered are "compact, plan, undo, review, changelog, init, continue"
    And the answer says what was left out: "over commands.max_file_bytes (40 bytes)"
    And the answer says what was left out: "2 command files past the first 1 (commands.max_files) were not read"

  Scenario: A project's command file that leads outside the project is not read
    Given a client with a session on the device
    And the project has the command file "commands/leak.md" reading "placeholder"
    And "/home/dev/work/app/.agent/commands/leak.md" on the device is a symlink to "/home/dev/.ssh/id_rsa"
    And the device's disk holds "/home/dev/.ssh/id_rsa" and "/etc/passwd" and "/home/dev/work/other/x"
    When the client asks for the session's commands
    Then the commands answered are "compact, plan, undo, review, changelog, init, continue"

  Scenario: _lembas/commands takes a cwd inside the roots, as session/new does
    Given a client with a session on the device
    And the project has the command file "commands/fix.md" reading "Fix"
    When the client asks for the commands of "/home/dev/work/app"
    Then the commands answered are "compact, plan, undo, review, changelog, init, continue, fix"

  Scenario: _lembas/commands refuses a cwd outside the roots
    Given a client with a session on the device
    When the client asks for the commands of "/etc"
    Then the call is answered with the error -32602, saying "outside the device's roots"

  Scenario: _lembas/commands refuses a cwd that leads outside the roots through a symlink
    Given a client with a session on the device
    And "/home/dev/work/away" on the device is a symlink to "/srv/elsewhere"
    When the client asks for the commands of "/home/dev/work/away"
    Then the call is answered with the error -32602, saying "leads outside the device's roots"

  Scenario: The set is sent after session/new, and again only after a turn that changed it
    Given a client with a session on the device
    Then the client was sent the session's commands once
    When the client prompts "say hi" as turn "t1"
    Then the client was sent the session's commands once
    When a command file "commands/fix.md" appears in the project reading "Fix"
    And the client prompts "say done" as turn "t2"
    Then the client was sent the session's commands 2 times
    And the last commands sent are "compact, plan, undo, review, changelog, init, continue, fix"

  Scenario: The set is sent again to a session opened from the store
    Given a client with a session on the device
    When the device restarts from its store
    And the client prompts "say again" as turn "t1"
    Then the client was sent the session's commands 2 times

  Scenario: A terminal's session shared to the web is sent with its set, as part of the announce
    Announced again on each link's connect, an idle session's set is the one it last logged:
    that event is sent again, its seq and bytes, and nothing is logged (events.feature).
    Given a device whose remote work is on over "/home/dev/work"
    And a client with a session on the device
    And the project has the command file "commands/fix.md" reading "Fix"
    And a local process on the hub, initialized, with a session in "/home/dev/work/app"
    Then the link carried 1 "_lembas/session/announce"
    And the link carried the command set of the editor's session once, with the session's seqs: "compact, plan, undo, review, changelog, init, continue, fix"
    When the link is cut and comes back 3 times
    Then the link carried 4 "_lembas/session/announce"
    And the link carried the command set of the editor's session 4 times, the last 3 the same event: "compact, plan, undo, review, changelog, init, continue, fix"

  Scenario: A shared session's set changed by a turn is sent to the link it was announced to
    The link does not hold the session; the set is an event of the session all the same: the
    session's next seq, kept in its log (events.feature: a new link's catch-up reads it).
    Given a device whose remote work is on over "/home/dev/work"
    And a client with a session on the device
    And a local process on the hub, initialized, with a session in "/home/dev/work/app"
    Then the link carried the command set of the editor's session once, with the session's seqs: "compact, plan, undo, review, changelog, init, continue"
    When the editor sends, for its own session: {"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[{"type":"text","text":"say same"}]}}
    Then the link carried the command set of the editor's session once, with the session's seqs: "compact, plan, undo, review, changelog, init, continue"
    When a command file "commands/fix.md" appears in the project reading "Fix"
    And the editor sends, for its own session: {"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[{"type":"text","text":"say done"}]}}
    Then the link carried the command set of the editor's session 2 times, with the session's seqs, the last "compact, plan, undo, review, changelog, init, continue, fix"

  Scenario: A shared session outside the roots is announced without its set
    Given a device whose remote work is on over "/home/dev/work"
    And a client with a session on the device
    And a local process on the hub, initialized, with a session in "/srv/editor"
    Then the link carried 1 "_lembas/session/announce"
    And the link carried no command set of the editor's session

  Scenario: A custom command sends its text with the arguments, shown as typed
    Given a client with a session on the device
    And the project has the command file "commands/fix.md" reading "---|description: Fix a bug|---|say fixing $1 in $ARGUMENTS"
    When the client prompts "/fix parser src/lib.rs" as turn "t1"
    Then the engine was last given "say fixing parser in parser src/lib.rs" for turn "t1"
    And the prompt event of turn "t1" says "/fix parser src/lib.rs"
    And in the answer of turn "t1", "_meta.lembas.command" is "fix"

  Scenario: A skill sends its text too
    Given a client with a session on the device
    And the project has the command file "skills/ship/SKILL.md" reading "---|description: Ship it|---|say shipping"
    When the client prompts "/ship now" as turn "t1"
    Then the engine was last given "say shipping\n\nnow" for turn "t1"

  Scenario: A built-in prompt command sends its own text
    Given a client with a session on the device
    And the project is in a git work tree without changes not committed yet
    And its branch differs from "main"
    When the client prompts "/review main" as turn "t1"
    Then the engine was last given "Review the code changes on this branch against `main` (git diff main...HEAD). Read the diff with git and the code around it. Report bugs, risks and unclear code, the most important first, each with where it is and a suggested fix. Change no files." for turn "t1"
    And in the answer of turn "t1", "_meta.lembas.command" is "review"

  Scenario: /review with no changes since the last commit answers message and sends nothing to the model
    Given a client with a session on the device
    And the project is in a git work tree without changes not committed yet
    When the client prompts "/review" as turn "t1"
    Then the engine has not started turn "t1"
    And in the answer of turn "t1", "_meta.lembas.message" is "nothing to review: `/home/dev/work/app` has no changes since the last commit"
    And in the answer of turn "t1", "_meta.lembas.command" is "review"
    And git was asked about "/home/dev/work/app" 1 time

  Scenario: /review with changes not committed yet sends the review
    Given a client with a session on the device
    And the project is in a git work tree with changes not committed yet
    When the client prompts "/review head" as turn "t1"
    Then the engine was last given "Review the code changes not committed yet (the working tree and the index, against HEAD). Read the diff with git and the code around it. Report bugs, risks and unclear code, the most important first, each with where it is and a suggested fix. Change no files." for turn "t1"
    And in the answer of turn "t1", "_meta.lembas.message" is absent

  Scenario: /review of a branch with no changes against it, or of a branch git does not know, answers message
    Given a client with a session on the device
    And the project is in a git work tree with changes not committed yet
    And its branch has no changes against "main"
    When the client prompts "/review main" as turn "t1"
    And the client prompts "/review gone" as turn "t2"
    Then the engine has not started turn "t1"
    And the engine has not started turn "t2"
    And in the answer of turn "t1", "_meta.lembas.message" is "nothing to review: `/home/dev/work/app` has no changes on this branch against `main`"
    And in the answer of turn "t2", "_meta.lembas.message" is "nothing to review: `gone` names no branch or commit in this repository"

  Scenario: /review outside any git repository has nothing to review
    Given a client with a session on the device
    When the client prompts "/review" as turn "t1"
    Then the engine has not started turn "t1"
    And in the answer of turn "t1", "_meta.lembas.message" is "nothing to review: `/home/dev/work/app` is not in a git repository"

  Scenario: /review with an argument git is not handed is sent as typed, nothing looked at
    Given a client with a session on the device
    When the client prompts "/review --output=/tmp/x" as turn "t1"
    Then the engine started turn "t1" once
    And git was asked about "/home/dev/work/app" 0 times

  Scenario: /review where git cannot tell is sent anyway, and a notice says why
    Given a client with a session on the device
    And git cannot be run on the device: "git could not be run: No such file or directory"
    When the client prompts "/review" as turn "t1"
    Then the engine started turn "t1" once
    And a notice said "`/review` could not look for changes first (git could not be run: No such file or directory)"

  Scenario: A command's own text is never @-expanded, the person's arguments are
    Given a client with a session on the device
    And the project has the command file "commands/peek.md" reading "say look at @secret.md and"
    And the project holds "secret.md" with the lines "hidden"
    And the project holds "notes.md" with the lines "shown"
    When the client prompts "/peek @notes.md" as turn "t1"
    Then turn "t1" has the attachment "notes.md" holding "shown\n"
    And turn "t1" has 1 attachment

  Scenario: /plan alone is an action: the mode becomes plan, nothing reaches the model
    Given a client with a session on the device
    When the client prompts "/plan" as turn "t1"
    Then the engine has not started turn "t1"
    And in the answer of turn "t1", "_meta.lembas.mode" is "plan"
    And in the answer of turn "t1", "_meta.lembas.command" is "plan"
    And the session's mode is "plan"

  Scenario: /plan with a task runs the task in plan mode
    Given a client with a session on the device
    When the client prompts "/plan say the steps" as turn "t1"
    Then the engine was last given "say the steps" for turn "t1"
    And the engine started turn "t1" in the mode "plan"

  Scenario: An unknown /name and a path are plain text
    Given a client with a session on the device
    When the client prompts "/nosuch thing" as turn "t1"
    And the client prompts "/etc/hosts is wrong" as turn "t2"
    Then the engine was last given "/nosuch thing" for turn "t1"
    And the engine was last given "/etc/hosts is wrong" for turn "t2"
    And in the answer of turn "t1", "_meta.lembas.command" is absent

  Scenario: A command's mode is lowered to max_mode, and its model holds for its prompt only
    Given a device whose remote work is on over "/home/dev/work" with the max_mode "edit"
    And the device can also speak to the instance's model "lembas/big"
    And a client with a session on the device
    And the project has the command file "commands/go.md" reading "---|mode: auto|model: lembas/big|---|say going"
    When the client prompts "/go" as turn "t1"
    And the client prompts "say after" as turn "t2"
    Then the engine started turn "t1" in the mode "edit"
    And the engine started turn "t1" on the model "lembas/big"
    And the engine started turn "t2" on the model "lembas/default"
