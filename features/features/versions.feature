Feature: Protocol 3 alone: 1.x and 2.0 peers refuse each other with 4400
  Spec, "Versions and discovery": a 2.0 server closes a link whose hello says 1 or 2 with 4400
  and the reason "update LLeMbas CLI to 2.0"; a 2.0 CLI that a 1.x server closes with 4400
  stops, says the server needs updating, and does not redial.

  Scenario Outline: A device whose hello says protocol <protocol> is refused with 4400
    Given a client whose link has just come up
    When the device's hello says protocol <protocol>
    Then the client closes the link with 4400 and the reason "update LLeMbas CLI to 2.0"
    And the client sends no "initialize"
    And the client is not ready

    Examples:
      | protocol |
      | 1        |
      | 2        |

  Scenario: A device whose hello says protocol 3 is initialized, not refused
    Given a client whose link has just come up
    When the device's hello says protocol 3
    Then the client sends an "initialize" request saying protocol 3
    And the client does not close the link

  Scenario: The device does not redial a server that refused it with 4400
    Given a device and a client past the handshake
    When the server closes the link with 4400
    And 10 minutes pass
    Then the device does not dial again
    And the device stops linking, saying "needs updating"

  Scenario: A cut link is redialled, and the new link is handshaken again
    Given a device and a client past the handshake
    When the link is cut
    And 10 minutes pass
    Then the device dials again
    And the device has not stopped linking
    And the client is ready
