Feature: ACP's session surface for an editor
  An editor (on `serve --stdio`, or relayed to the service's hub) sees every session of the
  device: it lists them (ACP v1 `session/list`), loads one with its history replayed
  (`session/load`, `loadSession: true`), resumes one without (`session/resume`), closes it
  (`session/close`) and deletes it (`session/delete`), which the web hears.

  Background:
    Given a device whose remote work is on over "/home/dev/work"
    And a client with a session on the device
    And a local process on the hub, initialized, with a session in "/srv/editor"

  Scenario: The editor is offered the session methods
    When a local process connects to the hub
    And the editor sends: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
    Then in the answer, "result.agentCapabilities.loadSession" is true
    And in the answer, "result.agentCapabilities.sessionCapabilities" is {"list":{},"resume":{},"close":{},"delete":{}}

  Scenario: The list holds the web's sessions and the editor's, and filters by directory
    When the editor sends: {"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}
    Then the editor's list holds 2 sessions
    When the editor sends: {"jsonrpc":"2.0","id":6,"method":"session/list","params":{"cwd":"/home/dev/work/app"}}
    Then the editor's list holds 1 session, the first the link's session
    When the editor sends: {"jsonrpc":"2.0","id":7,"method":"session/list","params":{"cwd":"/srv/editor/"}}
    Then the editor's list holds 1 session, the first its own session
    When the editor sends: {"jsonrpc":"2.0","id":10,"method":"session/list","params":{"cwd":"/nowhere"}}
    Then the editor's list holds 0 sessions
    When the editor sends: {"jsonrpc":"2.0","id":8,"method":"session/list","params":{"cwd":"relative/dir"}}
    Then the device answers with error -32602 and id 8
    When the editor sends: {"jsonrpc":"2.0","id":9,"method":"session/list","params":{"cursor":"not a cursor"}}
    Then the device answers with error -32602 and id 9

  Scenario: Loading the web's session replays its history before the answer, and it streams on
    When the client prompts "say hello" as turn "t1"
    Then turn "t1" is answered with the stop reason "end_turn"
    When the editor sends, for the link's session: {"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"$SESSION","cwd":"/home/dev/work/app","mcpServers":[]}}
    Then before the answer to id 3 the editor was sent the updates "user_message_chunk, agent_message_chunk"
    When the client prompts "say again" as turn "t2"
    Then turn "t2" is answered with the stop reason "end_turn"
    And the editor was sent a chunk "again" of the link's session

  Scenario: Loading replays no turn a rewind reverted
    When the client prompts "say hello" as turn "t1"
    And the client prompts "say again" as turn "t2"
    And the client rewinds the session to turn "t2"
    And the editor sends, for the link's session: {"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"$SESSION","cwd":"/home/dev/work/app","mcpServers":[]}}
    Then before the answer to id 3 the editor was sent the updates "user_message_chunk, agent_message_chunk"

  Scenario: Resuming replays nothing
    When the client prompts "say hello" as turn "t1"
    And the editor sends, for the link's session: {"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"$SESSION","cwd":"/home/dev/work/app"}}
    Then before the answer to id 4 the editor was sent the updates ""

  Scenario: A title set on the web reaches an editor holding the session as session_info_update
    When the editor sends, for the link's session: {"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"$SESSION","cwd":"/home/dev/work/app"}}
    And the client sets the session's title to "Fix the build"
    Then the editor's last frame is a "session_info_update" update of the link's session

  Scenario: Deleting from the editor reaches the web
    When the editor sends, for the link's session: {"jsonrpc":"2.0","id":4,"method":"session/delete","params":{"sessionId":"$SESSION"}}
    Then the device answers with a result for id 4
    And the client's UI was told the session was deleted on the device
    When the editor sends, for the link's session: {"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"$SESSION","cwd":"/home/dev/work/app"}}
    Then the device answers with error -32602 and id 5

  Scenario: Closing lets the session go from the editor, not from the device
    When the editor sends, for its own session: {"jsonrpc":"2.0","id":4,"method":"session/close","params":{"sessionId":"$SESSION"}}
    Then the device answers with a result for id 4
    When the editor sends: {"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}
    Then the editor's list holds 2 sessions

  Scenario: Over the link the editor's session methods are refused
    When the client sends on the link a request for "session/list" with id 9
    Then the device answers with error -32602 and id 9

  Scenario: A card answered on the web first is withdrawn in the editor with $/cancel_request
    When the editor sends, for the link's session: {"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"$SESSION","cwd":"/home/dev/work/app"}}
    And the client prompts "permit deploy" as turn "t1"
    Then the editor was asked "session/request_permission" once
    When the web answers the card with the option "once"
    Then exactly one decision reached the engine: "allow once"
    And the editor was sent "$/cancel_request" for the request it was asked

  Scenario: A card answered in the editor first is settled on the web
    When the editor sends, for the link's session: {"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"$SESSION","cwd":"/home/dev/work/app"}}
    And the client prompts "permit deploy" as turn "t1"
    And the editor answers the card with the option "reject_once"
    Then exactly one decision reached the engine: "deny"
    And the link carried "_lembas/permission/settled" for the card, naming the session
    And the editor was sent no "$/cancel_request"

  Scenario: A session an editor holds is announced to the web, held "terminal", and left when it closes
    Then the link carried 1 "_lembas/session/announce"
    When the editor sends, for the link's session: {"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"$SESSION","cwd":"/home/dev/work/app"}}
    Then the link carried 2 "_lembas/session/announce"
    When the client asks the session's status
    Then the call is answered with a result where "held" is "terminal"
    When the editor sends, for the link's session: {"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"$SESSION"}}
    Then the link carried 1 "_lembas/session/left"
    When the client asks the session's status
    Then the call is answered with a result where "held" is "here"
