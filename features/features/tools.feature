Feature: The model acts on the machine within its mode, and asks through cards
  Issue 15, on the spec's modes (`plan < manual < edit < auto`) and `session/request_permission`:
  reading tools go ahead in every mode; `plan` refuses writes and commands to the model;
  `manual` asks before every write and every command; `edit` lets writes go ahead and asks
  before commands; `auto` lets everything within the confinement go ahead. The mode that rules
  is the session's, lowered to `remote.max_mode` at the turn's start; an approved plan's mode
  takes effect, lowered. A denial's feedback reaches the model. "Allow always" is remembered for
  that session and that command prefix only.

  Background:
    Given a device whose remote work is on over "/home/dev/work" with the max_mode "auto"
    And the device runs the model engine
    And a client with a session on the device

  Scenario Outline: Each mode decides each tool: <tool> in <mode> <verdict>
    When the client sets the session's mode to "<mode>"
    And the model will call "<tool>" with <args>
    And the client prompts "go" as turn "t1"
    Then the model's "<tool>" <verdict>

    Examples:
      | mode   | tool   | args                                                              | verdict                                              |
      | plan   | read   | {"path": "README.md"}                                             | went ahead without asking                            |
      | plan   | list   | {"path": "."}                                                     | went ahead without asking                            |
      | plan   | find   | {"pattern": "**/*.rs"}                                            | went ahead without asking                            |
      | plan   | search | {"pattern": "fn main"}                                            | went ahead without asking                            |
      | plan   | write  | {"path": "a.txt", "content": "x"}                                 | was refused, saying "plan"                           |
      | plan   | edit   | {"path": "a.txt", "old_string": "x", "new_string": "y"}           | was refused, saying "plan"                           |
      | plan   | run    | {"command": "cargo test"}                                         | was refused, saying "plan"                           |
      | manual | read   | {"path": "README.md"}                                             | went ahead without asking                            |
      | manual | write  | {"path": "a.txt", "content": "x"}                                 | waits for the client's approval                      |
      | manual | edit   | {"path": "a.txt", "old_string": "x", "new_string": "y"}           | waits for the client's approval                      |
      | manual | run    | {"command": "cargo test"}                                         | waits for the client's approval                      |
      | edit   | read   | {"path": "README.md"}                                             | went ahead without asking                            |
      | edit   | write  | {"path": "a.txt", "content": "x"}                                 | went ahead without asking                            |
      | edit   | edit   | {"path": "a.txt", "old_string": "x", "new_string": "y"}           | went ahead without asking                            |
      | edit   | run    | {"command": "cargo test"}                                         | waits for the client's approval                      |
      | auto   | read   | {"path": "README.md"}                                             | went ahead without asking                            |
      | auto   | write  | {"path": "a.txt", "content": "x"}                                 | went ahead without asking                            |
      | auto   | edit   | {"path": "a.txt", "old_string": "x", "new_string": "y"}           | went ahead without asking                            |
      | auto   | run    | {"command": "cargo test"}                                         | went ahead without asking                            |

  Scenario: A command approved once on the web runs, and the turn goes on
    When the client sets the session's mode to "edit"
    And the model will call "run" with {"command": "cargo test"}
    And the client prompts "go" as turn "t1"
    Then the model's "run" waits for the client's approval
    When the web answers the card with the option "once"
    Then the model's "run" went ahead once approved
    And turn "t1" is answered with the stop reason "end_turn"
    And the model was called 2 times

  Scenario: A denial's feedback reaches the model, and nothing runs
    When the client sets the session's mode to "manual"
    And the model will call "write" with {"path": "a.txt", "content": "x"}
    And the client prompts "go" as turn "t1"
    When the web denies the card, saying "not that file"
    Then the model's next request carries "not that file" as a tool result
    And turn "t1" is answered with the stop reason "end_turn"

  Scenario: Allow always is remembered for that command's prefix in that session only
    When the client sets the session's mode to "edit"
    And the model will call "run" with {"command": "cargo test --lib"}
    And the client prompts "go" as turn "t1"
    When the web answers the card with the option "session"
    Then the model's "run" went ahead once approved
    Given the model will call "run" with {"command": "cargo test --doc"}
    When the client prompts "again" as turn "t2"
    Then the client was asked for 1 "run" in all
    Given the model will call "run" with {"command": "cargo publish"}
    When the client prompts "and publish" as turn "t3"
    Then the client was asked for 2 "run" in all

  Scenario: A command's card answered on the web is settled at the terminal that shares it
    Given a terminal on the device whose initialize said "lembas": {"protocol": 3}
    And the terminal shares the session
    When the client sets the session's mode to "edit"
    And the model will call "run" with {"command": "cargo test"}
    And the client prompts "go" as turn "t1"
    Then the web and the terminal were both asked "session/request_permission" for one toolCallId, as patient
    When the web answers the card with the option "once"
    Then the terminal was sent "_lembas/permission/settled" for the card
    And the model's "run" went ahead once approved
    And turn "t1" is answered with the stop reason "end_turn"
