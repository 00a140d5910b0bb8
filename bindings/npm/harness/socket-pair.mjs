// Two connected WebSocket-like ends in memory (EventTarget, readyState, send, close), for the
// drivers' tests in node and in a page, and the harness's memory instance. `frames`, if given,
// records what reaches the second end.

/** The two ends, and `open()` to open both (in a microtask), as an instance accepting a link. */
export function unopenedPair(frames) {
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
    x.close = (code = 1000, reason = "") => {
      for (const z of ends) if (z.readyState !== 3) (z.readyState = 3), fire(z, "close", { code, reason });
    };
  });
  const open = () =>
    queueMicrotask(() =>
      ends.forEach((x) => x.readyState === 0 && ((x.readyState = 1), x.dispatchEvent(new Event("open")))),
    );
  return { ends, open };
}

/** Two ends that open in a microtask. */
export function pair(frames) {
  const { ends, open } = unopenedPair(frames);
  open();
  return ends;
}
