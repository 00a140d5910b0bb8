Feature: The composer's @ picker: _lembas/files/search
  Spec, "_lembas/files/search": `{ sessionId? | cwd?, query, limit? }` → `{ root, files: [{ path,
  kind }] }`, `root` the directory the session's `@path` mentions are read from (its working
  directory), `path` relative to it and `/`-separated; gitignored files left out, fuzzy,
  nudged by frecency; an empty query gives the recent files; `limit` 20 by default, at most
  50. Over a bound the device refuses rather than clamps; `cwd` follows session/new's rules.

  Background:
    Given a client with a session on the device
    And the project holds "src/main.rs" with the lines "fn main() {}"
    And the project holds "src/util.rs" with the lines "pub fn util() {}"
    And the project holds "README.md" with the lines "# app"
    And the project holds ".git/config" with the lines "[core]"

  Scenario: A session's files are searched fuzzily from its directory
    When the client searches the session's files for "mn"
    Then the call is answered with a result where "root" is "/home/dev/work/app"
    And the search found "src/main.rs"

  Scenario: A directory is found too, and said to be one
    When the client searches the files of "/home/dev/work/app" for "src" with limit 1
    Then the search found "src"
    And the call is answered with a result where "files.0.kind" is "dir"

  Scenario: Hidden and protected entries are never found
    Given the device protects ".git"
    When the client searches the session's files for "config"
    Then the search found ""

  Scenario: An empty query gives the files used lately
    When the client prompts "look at @src/util.rs" as turn "t1"
    And the client searches the session's files for ""
    Then the search found "src/util.rs"

  Scenario Outline: A limit out of bounds is refused, not clamped
    When the client searches the session's files for "" with limit <limit>
    Then the call is answered with the error -32602, saying "must be 1 to 50"

    Examples:
      | limit |
      | 0     |
      | 51    |

  Scenario: A cwd outside the roots is refused, and nothing is searched
    When the client searches the files of "/etc" for "passwd"
    Then the call is answered with the error -32602, saying "outside the device's roots"

  Scenario: A session or a cwd, exactly one
    When the client searches with no session and no cwd for "main"
    Then the call is answered with the error -32602, saying "exactly one of `sessionId` and `cwd`"
