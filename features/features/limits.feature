Feature: The device's limits hold for every request, as they are at that moment
  Spec, "_lembas/hello": "The device's limits apply to every request as they are at that
  moment." Spec, "session/new": a session the client names later "is opened from the store under
  the same rules" (remote work on, `cwd` inside `remote.roots`, trusted when
  `remote.require_trust`; otherwise -32602 with the reason), and a mode is "lowered to
  `remote.max_mode`". An editor on stdio is not remote work: these are the link's rules.

  Scenario: A session made while remote work was on is refused once it is off, and nothing runs
    Given a client with a session on the device
    When the client prompts "say hi" as turn "t1"
    And the device restarts from its store with remote work off
    And the client prompts "say again" as turn "t2"
    Then turn "t2" is refused with the error -32602, saying "remote work is off on this device (remote.enabled is false)"
    And the engine has not started turn "t2"

  Scenario: A session in a root since removed is refused, naming the roots
    Given a client with a session on the device
    When the device restarts from its store with the roots "/srv/other"
    And the client prompts "say again" as turn "t2"
    Then turn "t2" is refused with the error -32602, saying "is outside the device's roots (/srv/other)"
    And the engine has not started turn "t2"

  Scenario: A session in a project no longer trusted is refused where trust is required
    Given a client with a session on the device
    When the device restarts from its store trusting no project
    And the client asks the session's history
    Then the call is answered with the error -32602, saying "is not in a trusted project (remote.require_trust is on"

  Scenario: A session whose directory now leads out of the roots is refused after symlinks
    Given a client with a session on the device
    When the session's directory becomes a symlink to "/etc/elsewhere"
    And the client sets the session's title to "renamed"
    Then the call is answered with the error -32602, saying "`/etc/elsewhere` is outside the device's roots"
    And the link carried no "title" event

  Scenario: Status still says that a refused session exists, and nothing more
    Given a client with a session on the device
    When the client sets the session's title to "kept"
    And the device restarts from its store with remote work off
    And the client asks the session's status
    Then the call is answered with a result where "exists" is true
    And the call is answered with a result where "title" is null

  Scenario: A lowered max_mode lowers the next turn of a session already open
    Given a device whose remote work is on over "/home/dev/work" with the max_mode "auto"
    And a client with a session on the device
    When the client sets the session's mode to "auto"
    And the device's max_mode becomes "manual" while it runs
    And the client prompts "say hi" as turn "t1"
    Then the engine started turn "t1" in the mode "manual"
    And the link carried the update {"sessionUpdate": "current_mode_update", "currentModeId": "manual"}
