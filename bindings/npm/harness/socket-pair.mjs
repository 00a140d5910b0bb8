// Two connected WebSocket-like ends in memory (EventTarget, readyState, send, close), opening in
// a microtask, for the drivers' tests in node and in the browser page. `frames`, if given,
// records what reaches the second end.
export function pair(frames) {
  const ends = [new EventTarget(), new EventTarget()];
  const fire = (t, type, extra) => queueMicrotask(() => t.dispatchEvent(Object.assign(new Event(type), extra)));
  ends.forEach((x, i) => {
    const y = ends[1 - i];
    x.readyState = 0;
    x.send = (data) => {
      if (x.readyState !== 1) return;
      if (i === 0) frames?.push(data);
      fire(y, "message", { data });
    };
    x.close = (code = 1000) => {
      for (const z of ends) if (z.readyState !== 3) (z.readyState = 3), fire(z, "close", { code });
    };
  });
  queueMicrotask(() => ends.forEach((x) => ((x.readyState = 1), x.dispatchEvent(new Event("open")))));
  return ends;
}
