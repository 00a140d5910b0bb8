Feature: A link that goes silent without closing is noticed
  A network can drop a link's packets while the socket stays open (a NAT that forgot the
  connection, a laptop waking from sleep). The device decides the link's liveness with time
  as its input: a link on which nothing has arrived for link.ping_after_ms (15 s) is pinged,
  and one on which nothing at all arrives for link.dead_after_ms (45 s) is closed with 1001
  ("going away") and dialled again with the usual backoff; the client then reattaches.

  Scenario: A quiet healthy link is pinged and stays up
    Given a device and a client past the handshake
    When 10 minutes pass
    Then the device has pinged the link
    And the device has not closed the link
    And the client is ready

  Scenario: A link whose network drops everything is closed with 1001 and dialled again
    Given a device and a client past the handshake
    When the link's network drops everything without closing it
    And 44999 milliseconds pass
    Then the device has pinged the link
    And the device has not closed the link
    When 1 milliseconds pass
    Then the device closes the link with 1001, naming "link.dead_after_ms"
    When 1000 milliseconds pass
    Then the device dials again
    And the client is ready
