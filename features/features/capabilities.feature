Feature: The client calls only what the device listed
  Spec, "Versions and discovery": within protocol 3 every feature is named by a capability
  string in initialize's `_meta.lembas.capabilities`, and LLeMbas never calls a method the
  device did not list.

  Scenario: A call gated by a capability the device did not list is refused, and nothing is sent
    Given a client whose link has just come up
    When the device's hello says protocol 3
    And the device answers initialize listing the capabilities "directories, status"
    And the client calls "_lembas/steer" with {"sessionId": "s-1", "text": "also run the tests"}
    Then the call is refused: "_lembas/steer" needs the capability "steer", which was not listed
    And nothing was sent on the link

  Scenario: A call gated by a capability the device listed goes out
    Given a client whose link has just come up
    When the device's hello says protocol 3
    And the device answers initialize listing the capabilities "directories, steer"
    And the client calls "_lembas/steer" with {"sessionId": "s-1", "text": "also run the tests"}
    Then the call went out on the link as a "_lembas/steer" request with its id

  Scenario: Against the real device, an unlisted capability's method is not called
    Given a device and a client past the handshake
    And the device did not list the capability "jobs"
    When the client calls "_lembas/jobs" with {}
    Then the call is refused: "_lembas/jobs" needs the capability "jobs", which was not listed
    And nothing was sent on the link

  Scenario: A call needing no capability goes out once the link is ready
    Given a device and a client past the handshake
    When the client calls "session/new" with {"cwd": "/home/dev/work", "mcpServers": []}
    Then the call went out on the link as a "session/new" request with its id

  Scenario: Nothing is called before the link is ready
    Given a device whose remote work is on over "/home/dev/work"
    And the device has not linked yet
    When the client calls "_lembas/steer" with {"sessionId": "s-1", "text": "hi"}
    Then the call is refused: the link is not ready
    And nothing was sent on the link

  Scenario: Nothing is called while the handshake is under way
    Given a client whose link has just come up
    When the device's hello says protocol 3
    And the client calls "session/new" with {"cwd": "/home/dev/work", "mcpServers": []}
    Then the call is refused: the link is not ready
    And nothing was sent on the link

  Scenario: The client does not send what is not a client's request
    Given a device and a client past the handshake
    When the client calls "_lembas/hello" with {}
    Then the call is refused: "_lembas/hello" is not a request a client sends
    And nothing was sent on the link
