Feature: The hub: local processes on the running service's socket
  `lembas link` serves a local socket (the hub) through which `serve --stdio` relays an editor
  and `lembas sessions` reaches the service. A hub connection is a connection of the device
  like the others: the same JSON-RPC, the same rules, plain ACP as on stdio, on the service's
  store.

  Scenario: A hub connection is answered as an editor is, with the service's store
    Given a device whose remote work is on over "/home/dev/work"
    And the device and the client have completed the handshake
    When a local process connects to the hub
    And the editor sends: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
    Then the device answers with a result for id 0
    And in the answer, "result._meta.lembas.limits" is null
    And in the answer, "result._meta.lembas.connection" is null
    And the editor's initialize lists "sessions"
    And the editor's initialize does not list "directories"
    And the device has written 1 line on stdio
    And no frame the device wrote on stdio has a method starting with "_lembas/"

  Scenario: A hub connection works where the person is, outside the roots, in any mode
    Given a device whose remote work is on over "/home/dev/work"
    When a local process connects to the hub
    And the editor sends: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
    And the editor sends: {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/srv/elsewhere","mcpServers":[],"_meta":{"mode":"auto"}}}
    Then the device answers with a result for id 1
    And in the answer, "result.modes.currentModeId" is "auto"

  Scenario: Garbage on the hub is answered with JSON-RPC errors, and the connection goes on
    Given a device whose remote work is on over "/home/dev/work"
    When a local process connects to the hub
    And the editor sends: not json at all
    Then the device answers with error -32700 and id null
    When the editor sends: {"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/tmp"}}
    Then the device answers with error -32600 and id 3
    When the editor sends: {"jsonrpc":"2.0","id":4,"method":"no/such","params":{}}
    Then the device answers with error -32600 and id 4
    When the editor sends: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
    Then the device answers with a result for id 0
    When the editor sends: {"jsonrpc":"2.0","id":5,"method":"no/such","params":{}}
    Then the device answers with error -32601 and id 5
