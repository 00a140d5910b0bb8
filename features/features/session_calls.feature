Feature: A session's own calls and events, in the spec's exact shapes
  Spec, "_lembas/session/title": params `{ sessionId, title }` (at most 200 characters), result
  `{ title }`; the `title` event is `{ id, title }`. "session/set_mode": `{ sessionId, modeId }`,
  lowered to `remote.max_mode`, result `{}`. "_lembas/session/history": `{ sessionId, title,
  root, turns }`, `root` the session's working directory (what `@path` mentions resolve
  against), a user turn `{ role: "user", text, turnId?, attachments? }`, an assistant turn
  `{ role: "assistant", text, reasoning, tools: [{ id, name, args, output?, isError? }] }`.
  The `steered` event: `texts`, `ids?` (the `_lembas/steer` message ids taken in at this step).
  "session/prompt": `image` and `resource` blocks are written under the session's attachment
  directory, each upload under a name of its own (`<time>-<random>-<name>`); the `prompt` event
  and the history carry `attachments: [{ name, mimeType, size }]`, and the text without them.

  Background:
    Given a client with a session on the device

  Scenario: The title is set, answered, announced to the session's holders, and kept
    When the client sets the session's title to "Fix the build"
    Then the call is answered with exactly {"title": "Fix the build"}
    And the link carried the event {"type": "title", "id": "<session>", "title": "Fix the build"}
    When the client asks the session's status
    Then the call is answered with a result where "title" is "Fix the build"

  Scenario: A title over 200 characters is refused, with the limit and its length
    When the client sets the session's title to one of 201 characters
    Then the call is answered with the error -32602, saying "title is 201 characters, over the limit of 200 (max_title_chars)"
    And the link carried no "title" event

  Scenario: A mode above the device's max_mode is lowered to it, answered {}, and announced
    When the client sets the session's mode to "auto"
    Then the call is answered with exactly {}
    And the link carried the update {"sessionUpdate": "current_mode_update", "currentModeId": "edit"}
    And the link carried the event {"type": "mode", "mode": "edit"}

  Scenario: A mode within max_mode is taken as it is
    When the client sets the session's mode to "plan"
    Then the call is answered with exactly {}
    And the link carried the update {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
    And the link carried the event {"type": "mode", "mode": "plan"}

  Scenario: A mode that is not one of the four is refused, and nothing is announced
    When the client sets the session's mode to "yolo"
    Then the call is answered with the error -32602, saying "mode `yolo` is not one of plan, manual, edit, auto"
    And the link carried no "mode" event

  Scenario: The history's root is the session's working directory, and its turns have the spec's shapes
    When the client prompts "think weighing it\ntool grep main\nsay found it" as turn "t1"
    And the client sets the session's title to "Search"
    And the client asks the session's history
    Then the call is answered with exactly {"sessionId": "<session>", "title": "Search", "root": "/home/dev/work/app", "turns": [{"role": "user", "text": "think weighing it\ntool grep main\nsay found it", "turnId": "t1"}, {"role": "assistant", "text": "found it", "reasoning": "weighing it", "tools": [{"id": "call_1", "name": "grep main", "args": {"title": "grep main"}, "output": "grep main: done"}]}], "truncated": false, "dropped": 0}

  Scenario: The steered event names the message ids of the steered messages it took in
    When the client prompts "sleep 1000\nsay done" as turn "t1"
    And the client steers the session with the message "m1": "also run the tests"
    And the client steers the session with the message "m2": "and the linter"
    And 1 second passes
    Then turn "t1" is answered with the stop reason "end_turn"
    And the link carried the event {"type": "steered", "texts": ["also run the tests", "and the linter"], "ids": ["m1", "m2"]}

  Scenario: A steered message sent without a message id is taken in with no ids
    When the client prompts "sleep 1000\nsay done" as turn "t1"
    And the client steers the session with "also run the tests"
    And 1 second passes
    Then the link carried the event {"type": "steered", "texts": ["also run the tests"]}

  Scenario: Attachments are written under the session, two of one name stay two, and the prompt event and the history list them
    When the client prompts as turn "t1" with the blocks [{"type": "text", "text": "look"}, {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo=", "uri": "file:///home/me/shot.png"}, {"type": "resource", "resource": {"uri": "file:///home/me/notes.md", "mimeType": "text/markdown", "text": "hello"}}, {"type": "resource", "resource": {"uri": "file:///tmp/notes.md", "mimeType": "text/markdown", "text": "hello again"}}, {"type": "resource", "resource": {"uri": "file:///home/me/data.bin", "blob": "AAEC"}}]
    Then turn "t1" is answered with the stop reason "end_turn"
    And the device wrote these attachments of the session, each under a name of its own "<time>-<random>-<name>":
      | name     | bytes |
      | shot.png | 8     |
      | notes.md | 5     |
      | notes.md | 11    |
      | data.bin | 3     |
    And the link carried the event {"type": "prompt", "text": "look", "turnId": "t1", "attachments": [{"name": "shot.png", "mimeType": "image/png", "size": 8}, {"name": "notes.md", "mimeType": "text/markdown", "size": 5}, {"name": "notes.md", "mimeType": "text/markdown", "size": 11}, {"name": "data.bin", "mimeType": "application/octet-stream", "size": 3}]}
    When the client asks the session's history
    Then the call is answered with a result where "turns.0" is {"role": "user", "text": "look", "turnId": "t1", "attachments": [{"name": "shot.png", "mimeType": "image/png", "size": 8}, {"name": "notes.md", "mimeType": "text/markdown", "size": 5}, {"name": "notes.md", "mimeType": "text/markdown", "size": 11}, {"name": "data.bin", "mimeType": "application/octet-stream", "size": 3}]}
