// An instance in memory, for a harness with no server: a device's `dial()` makes a link, and
// the one `accept`ed handler (a web UI's ClientDriver, a Calls) takes the client's end of each.
// A link opens once it has been taken, as a WebSocket opens once the server accepts it, so no
// frame is lost before a client is there; a device that dials again replaces a link not taken.
import { unopenedPair } from "./socket-pair.mjs";

export function memoryInstance() {
  let take = null;
  let waiting = null;
  let current = null;
  return {
    /** The device's side: its `dial` option. */
    dial() {
      const {
        ends: [device, client],
        open,
      } = unopenedPair();
      waiting?.device.close(1001, "the device dialled again");
      waiting = null;
      current = device;
      if (take) {
        take(client);
        open();
      } else {
        waiting = { device, client, open };
      }
      return device;
    },
    /** The client's side: `take(socket)` gets each device link from now on (and one waiting). */
    accept(handler) {
      if (typeof handler !== "function") {
        throw new TypeError("accept(handler): handler takes each device link's socket, as (socket) => driver.attach(socket)");
      }
      take = handler;
      if (waiting) {
        const { client, open } = waiting;
        waiting = null;
        handler(client);
        open();
      }
    },
    /** Cut the current link, as a network would (code 1006 unless given). */
    drop(code = 1006, reason = "dropped") {
      current?.close(code, reason);
    },
  };
}
