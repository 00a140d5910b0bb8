// An instance in memory, for a harness with no server: a device's `dial()` makes a link, and
// the one `accept`ed handler (a web UI's ClientDriver, a Calls) takes the client's end of each.
// A link opens once it has been taken, as a WebSocket opens once the server accepts it, so no
// frame is lost before a client is there; a device that dials again replaces a link not taken.
// A new handler cuts the link the one before it holds, so the device dials again to it (else it
// would wait for a link the device has no reason to make).
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
    /** The client's side: `take(socket)` gets each device link from now on (and one waiting);
     * the link an earlier handler took is cut. */
    accept(handler) {
      if (typeof handler !== "function") {
        throw new TypeError("accept(handler): handler takes each device link's socket, as (socket) => driver.attach(socket)");
      }
      const before = take;
      take = handler;
      if (waiting) {
        const { client, open } = waiting;
        waiting = null;
        handler(client);
        open();
      } else if (before && current && current.readyState <= 1) {
        current.close(1000, "another client took the device's links");
      }
    },
    /** Cut the current link, as a network would (code 1006 unless given). */
    drop(code = 1006, reason = "dropped") {
      current?.close(code, reason);
    },
  };
}
