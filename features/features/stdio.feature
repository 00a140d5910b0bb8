Feature: Plain ACP on stdio
  `lembas serve --stdio` speaks to an editor: plain ACP, none of the `_lembas` notifications
  (spec, introduction), no hello (it is sent on the link), and `limits` is null in
  `initialize` (spec: "initialize").

  Scenario: An editor's initialize is answered with no hello and null limits
    Given a device whose remote work is on over "/home/dev/work"
    And the device and the client have completed the handshake
    When an editor opens stdio
    And the editor sends: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
    Then the device answers with a result for id 0
    And in the answer, "result.agentInfo.name" is "LLeMbas CLI"
    And in the answer, "result._meta.lembas.protocol" is 3
    And in the answer, "result._meta.lembas.limits" is null
    And the device has written 1 line on stdio
    And no frame the device wrote on stdio has a method starting with "_lembas/"

  Scenario: No _lembas frame is written on stdio, whatever the editor sends
    Given a device whose remote work is on over "/home/dev/work"
    When an editor opens stdio
    And the editor sends: {"jsonrpc":"2.0","id":"a","method":"session/new","params":{"cwd":"/home/dev/work","mcpServers":[]}}
    And the editor sends: {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":{"protocol":3}}}}}
    And the editor sends: {"jsonrpc":"2.0","id":2,"method":"_lembas/steer","params":{"sessionId":"s","text":"hi"}}
    And the editor sends: {"jsonrpc":"2.0","method":"_lembas/nope","params":{}}
    And the editor sends: not json
    Then the device has written 4 lines on stdio
    And no frame the device wrote on stdio has a method starting with "_lembas/"

  Scenario: An editor is listed exactly what works on stdio: terminals open over the link alone
    Given the device allows terminals
    And the device and the client have completed the handshake
    Then the device listed the capabilities "terminal" and "shell"
    When an editor opens stdio
    And the editor sends: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
    Then the editor's initialize does not list "terminal"
    And the editor's initialize does not list "shell"
    And the editor's initialize lists "status"
    When the editor sends: {"jsonrpc":"2.0","id":1,"method":"_lembas/terminal/open","params":{}}
    Then the device answers with error -32602 and id 1

  Scenario: Where sessions live in memory only (serve --stdio), no connection lists "sessions"
    Given a device whose remote work is on over "/home/dev/work"
    And the device keeps its sessions in memory only
    And the device and the client have completed the handshake
    Then the client was not listed "sessions"
    When an editor opens stdio
    And the editor sends: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
    Then the editor's initialize does not list "sessions"
    And the editor's initialize lists "status"
