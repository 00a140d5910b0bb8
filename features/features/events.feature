Feature: A session's event log, for a client that missed events (beyond the spec)
  Our extension (capability `events`, issue 16), not the spec's: every event the device sends
  about a session carries `_meta.lembas.seq`, one more than the last, the command set
  (`available_commands_update`) too, even the one a link not holding the session is sent with
  its announce (commands.feature). The device keeps the session's recent events,
  bounded by `sessions.event_log_events` and `event_log_bytes`, and
  `_lembas/session/events { sessionId, since, limit? }` answers those after `since`, oldest
  first, with `next` and `truncated` (the log no longer reaches back to `since`).

  Scenario: Every event of a turn carries the next seq
    Given a client with a session on the device
    When the client prompts "say hello\ntool build\nthink done" as turn "t1"
    And 1 second passes
    Then every event of the session on the link carries a seq one more than the last

  Scenario: A client cut off mid-turn fetches exactly what it missed, in order
    Given a client with a session on the device
    When the client prompts "say before\nsleep 1000\nchunks 3 12\nsay after" as turn "t1"
    And the client notes the last seq it heard
    And the instance becomes unreachable
    And the link is cut
    And 5 seconds pass
    And the instance becomes reachable again
    And 2 minutes pass
    And the client asks the session's events since the noted seq
    Then the call is answered with a result where "truncated" is false
    And the events answered follow the noted seq one by one
    And what the link carried and the events answered say "before0000000000xx0000000001xx0000000002xxafter"

  Scenario: A log outrun says so, and keeps the newest
    Given the device keeps at most 4 events of a session
    And a client with a session on the device
    When the client prompts "say before\nsleep 1000\nchunks 10 12" as turn "t1"
    And the client notes the last seq it heard
    And the instance becomes unreachable
    And the link is cut
    And 5 seconds pass
    And the instance becomes reachable again
    And 2 minutes pass
    And the client asks the session's events since the noted seq
    Then the call is answered with a result where "truncated" is true
    And 4 events are answered

  Scenario: A page over the device's bound is refused naming it
    Given a client with a session on the device
    When the client asks the session's events since 0, at most 100000
    Then the call is answered with the error -32602, saying "sessions.max_events_page"

  Scenario: An unknown session is refused
    Given a client with a session on the device
    When the client asks the events of session "ses_nope" since 0
    Then the call is answered with the error -32602, saying "no session `ses_nope`"

  Scenario: The command set a turn changed is the session's next event, and kept in its log
    Given a client with a session on the device
    When the client notes the last seq it heard
    And a command file "commands/fix.md" appears in the project reading "Fix"
    And the client prompts "say done" as turn "t1"
    Then the last command set on the link carries the seq after the session's event before it
    When the client asks the session's events since the noted seq
    Then the events answered follow the noted seq one by one
    And the last event answered is the command set "compact, plan, undo, review, changelog, init, continue, fix"

  Scenario: A new link's catch-up on a session only announced to it reads its sets, and does not take it up
    The link's client follows the editor's session from the seq of the set that came with its
    announce. Cut off while the editor runs a turn, it catches up on it: the page holds what the
    link was sent of it, its command sets, and none of the turn; and the link does not come to
    hold the session (a turn after that streams to the editor alone).
    Given a device whose remote work is on over "/home/dev/work"
    And a client with a session on the device
    And a local process on the hub, initialized, with a session in "/home/dev/work/app"
    When the link is cut
    And the editor sends, for its own session: {"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[{"type":"text","text":"say hidden"}]}}
    And 2 minutes pass
    Then the client asked the events of the editor's session, and was answered nothing of it but command sets
    And the client was handed each command set of the editor's session once, and no chunk or gap of it
    When the editor sends, for its own session: {"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[{"type":"text","text":"say shown"}]}}
    Then the link carried no chunk of the editor's session

  Scenario: A client that missed events of a session set aside gets them from its log alone
    The device keeps one session in memory, and the client's session, idle, was set aside for
    another. Asked for its events after a seq noted before its last turn, the device reads the
    session's log alone from the store and pages it as in memory: the session is not read back,
    stays set aside, and evicts nothing.
    Given the device keeps at most 1 session in memory
    And a client with a session on the device
    When the client prompts "say first" as turn "t1"
    And the client notes the last seq it heard
    And the client prompts "say kept" as turn "t2"
    And the client opens 1 more session
    And the client asks the session's events since the noted seq
    Then the events answered follow the noted seq one by one
    And the device read the session's event log alone, and did not read the session back
    And the device has 2 sessions, 1 of them in memory
