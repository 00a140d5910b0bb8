Feature: Every malformed frame gets its JSON-RPC error
  JSON-RPC 2.0 as ACP uses it: one message a frame. A frame that cannot be read is answered
  with id null; one whose id could be read gets that id back, exactly as it was sent.

  Background:
    Given a device whose remote work is on over "/home/dev/work"

  Scenario Outline: <what> is answered <code>
    Given the device and the client have completed the handshake
    When the client sends on the link: <frame>
    Then the device answers with error <code> and id <id>
    And the error message says "<says>"
    And the device is still linked and answers requests

    Examples:
      | what                          | frame                                                               | code   | id   | says                        |
      | invalid JSON                  | {"jsonrpc":"2.0","id":1,"method":"session/new"                      | -32700 | null | invalid JSON                |
      | a bare string                 | "hello"                                                             | -32600 | null | JSON object                 |
      | a batch array                 | [{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}]       | -32600 | null | batch                       |
      | a message with no jsonrpc     | {"id":7,"method":"session/new","params":{}}                         | -32600 | 7    | `jsonrpc` must be           |
      | a message with jsonrpc 1.0    | {"jsonrpc":"1.0","id":8,"method":"session/new","params":{}}         | -32600 | 8    | `jsonrpc` must be           |
      | a method that is not a string | {"jsonrpc":"2.0","id":9,"method":42,"params":{}}                    | -32600 | 9    | `method` must be a string   |
      | an unknown method             | {"jsonrpc":"2.0","id":10,"method":"session/nope","params":{}}       | -32601 | 10   | session/nope                |
      | a second initialize           | {"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":1}} | -32600 | 11 | already answered |

  Scenario: A frame that is not UTF-8 is a parse error
    Given the device and the client have completed the handshake
    When the client sends on the link a frame that is not valid UTF-8
    Then the device answers with error -32700 and id null
    And the error message says "UTF-8"

  Scenario: A frame over the configured maximum names the limit and its size, answering its id
    Given the device allows frames of at most 1024 bytes
    And the device and the client have completed the handshake
    When the client sends on the link a frame of 2000 bytes with id 12
    Then the device answers with error -32600 and id 12
    And the error message says "1024"
    And the error message says "2000"
    And in the answer, "error.data" is {"limit": 1024, "size": 2000}
    And the device is still linked and answers requests

  Scenario: A frame just inside the maximum is read
    Given the device allows frames of at most 1024 bytes
    And the device and the client have completed the handshake
    When the client sends on the link a frame of 1024 bytes with id 12
    Then the device answers with error -32601 and id 12

  Scenario: Nesting over the depth limit names the limit
    Given the device and the client have completed the handshake
    When the client sends on the link a request nested 70 levels deep
    Then the device answers with error -32600 and id null
    And the error message says "limit of 64"
    And the error message says "max_depth"

  Scenario: An unknown notification gets no answer at all
    Given the device and the client have completed the handshake
    When the client sends on the link: {"jsonrpc":"2.0","method":"_lembas/nope","params":{}}
    Then the device does not answer
    And the device is still linked and answers requests

  Scenario: A request before initialize is refused: initialize comes first
    When an editor opens stdio
    And the editor sends: {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/home/dev/work","mcpServers":[]}}
    Then the device answers with error -32600 and id 1
    And the error message says "initialize"

  Scenario: Params that do not fit are -32602, naming the field
    When an editor opens stdio
    And the editor sends: {"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"one"}}
    Then the device answers with error -32602 and id 2
    And the error message says "protocolVersion"

  Scenario Outline: A request id is echoed exactly: <id>
    Given the device and the client have completed the handshake
    When the client sends on the link a request for "session/nope" with id <id>
    Then the device answers with error -32601 and id <id>
    And the answer's id is exactly <id>

    Examples:
      | id                                     |
      | "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a2b" |
      | 0                                      |
      | 9007199254740993                       |
      | -1                                     |
      | "0"                                    |
