Feature: The device's max_mode rules the model's tools, and lowers an approved plan's mode
  Issue 15: "The session's mode as lowered by `remote.max_mode` at the turn's start is the one
  that rules. An approved plan's mode takes effect, lowered." Spec, `_lembas/plan`: the session
  continues in the approved mode, lowered to `remote.max_mode`.

  Background:
    Given a device whose remote work is on over "/home/dev/work" with the max_mode "edit"
    And the device runs the model engine
    And a client with a session on the device

  Scenario: A session set to auto still asks before a command
    When the client sets the session's mode to "auto"
    And the model will call "run" with {"command": "cargo test"}
    And the client prompts "go" as turn "t1"
    Then the model's "run" waits for the client's approval

  Scenario: A plan approved in auto goes on in edit: a write goes ahead, a command asks
    When the client sets the session's mode to "plan"
    And the model will call "plan_submit" with {"text": "1. write a.txt\n2. run the tests"}
    And the model will call "write" with {"path": "a.txt", "content": "x"}
    And the model will call "run" with {"command": "cargo test"}
    And the client prompts "plan it" as turn "t1"
    Then the link carried 1 "_lembas/plan"
    When the web approves the plan in the mode "auto"
    Then the model's "write" went ahead without asking
    And the model's "run" waits for the client's approval
