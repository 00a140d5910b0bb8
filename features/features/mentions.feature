Feature: @path mentions in a prompt
  Spec, "session/prompt": `@path` mentions in what the person typed are attached, files
  line-numbered, `@path#10-20` a range, `@dir/` a listing, images by vision; a space or a `#`
  in a name is escaped with a backslash. Only a path that is (symlinks followed) inside the
  session's project and inside `remote.roots`, and not protected, is attached; any other
  `@word` stays text and is not read. Every bound that cuts something, and every mention not
  attached, is said in a notice. In a terminal's shared session the same holds for a prompt
  from the web: the device's roots bound it as well as the terminal's project. (The spec's
  "only the project when the session was shared by name and no roots are set": this device has
  no sharing by name; it lets the web use a shared session only inside its roots, so with none
  set the web's prompt is refused and nothing is read, while the terminal's own prompts attach
  from its project.)

  Scenario: A mentioned file is attached, line-numbered, and the text stays as typed
    Given a client with a session on the device
    And the project holds "src/a.rs" with the lines "one, two, three, four"
    When the client prompts "look at @src/a.rs" as turn "t1"
    Then the engine was last given "look at @src/a.rs" for turn "t1"
    And turn "t1" has the attachment "src/a.rs" holding "one\ntwo\nthree\nfour\n"
    And no notice was said

  Scenario: A range attaches those lines, numbered from the first
    Given a client with a session on the device
    And the project holds "src/a.rs" with the lines "one, two, three, four"
    When the client prompts "@src/a.rs#2-3" as turn "t1"
    Then turn "t1" has the attachment "src/a.rs#2-3" holding "two\nthree\n" from line 2

  Scenario: A range past the end is cut there and said
    Given a client with a session on the device
    And the project holds "src/a.rs" with the lines "one, two, three, four"
    When the client prompts "@src/a.rs#3-9" as turn "t1"
    Then turn "t1" has the attachment "src/a.rs#3-9" holding "three\nfour\n" from line 3
    And a notice said "has 4 lines: lines 3-4 are attached"

  Scenario: An escaped space and an escaped hash are part of the name
    Given a client with a session on the device
    And the project holds "my notes.md" with the lines "notes"
    And the project holds "a#b.md" with the lines "hash"
    When the client prompts "@my\ notes.md and @a\#b.md" as turn "t1"
    Then turn "t1" has the attachment "my notes.md" holding "notes\n"
    And turn "t1" has the attachment "a#b.md" holding "hash\n"

  Scenario: A directory with a trailing slash is listed, directories marked
    Given a client with a session on the device
    And the project holds "docs/guide.md" with the lines "guide"
    And the project holds "docs/api/index.md" with the lines "api"
    When the client prompts "what is in @docs/?" as turn "t1"
    Then turn "t1" has the attachment "docs/" holding "api/\nguide.md"

  Scenario: An image is attached for vision
    Given a client with a session on the device
    And the project holds "shot.png" with the lines "png"
    When the client prompts "@shot.png" as turn "t1"
    Then turn "t1" has the image attachment "shot.png" of type "image/png"

  Scenario Outline: A path outside the project or the roots, or protected, stays text and is never read
    Given a client with a session on the device
    And the device protects ".git"
    And the device's disk holds "/home/dev/work/other/secret.txt" and "/etc/passwd" and "/home/dev/work/app/.git/config"
    And "/home/dev/work/app/out" is a symlink to "/etc"
    When the client prompts "see <mention>" as turn "t1"
    Then the engine was last given "see <mention>" for turn "t1"
    And turn "t1" has no attachment
    And nothing was read for a mention
    And a notice said "<mention> stayed text, not attached"

    Examples:
      | mention                 |
      | @../other/secret.txt    |
      | @/etc/passwd            |
      | @out/passwd             |
      | @.git/config            |
      | @missing.rs             |

  Scenario: An address is not a mention, nor a resource's text
    Given a client with a session on the device
    And the project holds "src/a.rs" with the lines "one"
    When the client prompts "write to dev@src/a.rs" as turn "t1"
    Then turn "t1" has no attachment
    And nothing was read for a mention

  Scenario: A file past mentions.max_file_bytes is cut, and said
    Given the device reads at most 6 bytes of a mentioned file
    And a client with a session on the device
    And the project holds "src/a.rs" with the lines "one, two, three, four"
    When the client prompts "@src/a.rs" as turn "t1"
    Then turn "t1" has the attachment "src/a.rs" holding "one\ntw"
    And a notice said "cut to its first 6 of 19 bytes (mentions.max_file_bytes is 6)"

  Scenario: An image past mentions.max_file_bytes is not attached, and said
    Given the device reads at most 2 bytes of a mentioned file
    And a client with a session on the device
    And the project holds "shot.png" with the lines "png"
    When the client prompts "@shot.png" as turn "t1"
    Then turn "t1" has no attachment
    And a notice said "@shot.png stayed text, not attached: the image is 4 bytes, over mentions.max_file_bytes (2)"

  Scenario: A listing past mentions.max_listing_entries is cut, and said
    Given the device lists at most 1 entry of a mentioned directory
    And a client with a session on the device
    And the project holds "docs/a.md" with the lines "a"
    And the project holds "docs/b.md" with the lines "b"
    When the client prompts "@docs/" as turn "t1"
    Then turn "t1" has the attachment "docs/" holding "a.md\n(1 more entries not shown: mentions.max_listing_entries is 1)"
    And a notice said "@docs/ lists the first 1 of its 2 entries (mentions.max_listing_entries is 1)"

  Scenario: Mentions past mentions.max_per_prompt stay text, and said
    Given the device attaches at most 1 mention a prompt
    And a client with a session on the device
    And the project holds "a.md" with the lines "a"
    And the project holds "b.md" with the lines "b"
    When the client prompts "@a.md @b.md" as turn "t1"
    Then turn "t1" has the attachment "a.md" holding "a\n"
    And turn "t1" has 1 attachment
    And a notice said "1 mention past the first 1 stayed text, not attached (mentions.max_per_prompt is 1): @b.md"

  Scenario Outline: In a terminal's shared session, a prompt from the web attaches only inside the project and the roots
    Given a client with a session on the device
    And a terminal on the device whose initialize said "lembas": {"protocol": 3}
    And the terminal opens a session of its own in "/home/dev/work/app"
    And the project holds "notes.md" with the lines "shown"
    And the device's disk holds "/home/dev/work/other/secret.txt" and "/etc/passwd" and "/home/dev/.ssh/id_rsa"
    And "/home/dev/work/app/out" is a symlink to "/etc"
    When the client prompts "see @notes.md <mention>" in the terminal's session as turn "t1"
    Then turn "t1" has the attachment "notes.md" holding "shown\n"
    And turn "t1" has 1 attachment
    And nothing outside "/home/dev/work/app" was read for a mention
    And a notice said "<mention> stayed text, not attached"

    Examples:
      | mention                 |
      | @../other/secret.txt    |
      | @/etc/passwd            |
      | @out/passwd             |
      | @../../.ssh/id_rsa      |

  Scenario: In an editor's shared session with no roots set, the web's prompt reads nothing, and the editor's own attaches from its project
    Given a device whose remote work is on over ""
    And the device and the client have completed the handshake
    And an editor on stdio that said nothing of lembas, with a session in "/srv/editor"
    And the device's disk holds "/srv/editor/notes.md" and "/srv/other.md" and "/etc/passwd"
    When the client prompts "see @notes.md" in the editor's session as turn "t1"
    Then turn "t1" is refused with the error -32602, saying "cannot be used over the link now"
    And nothing was read for a mention
    When the editor prompts "see @notes.md @../other.md" as turn "t2"
    Then turn "t2" has the attachment "notes.md" holding "secret\n"
    And turn "t2" has 1 attachment
    And nothing outside "/srv/editor" was read for a mention
