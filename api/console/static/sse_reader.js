// Follows an SSE stream whatever its event names are. EventSource only delivers events it
// has a listener for by name, and a run of a kind added later sends types this console has
// never heard of; so this reads the stream with fetch (the session cookie goes along) and
// reconnects itself with Last-Event-ID after a drop, exactly as EventSource would.

export function followStream(path, onEvents, { onEnd } = {}) {
  const controller = new AbortController();
  let lastId = null;
  let retryMs = 1000;
  let closed = false;

  function dispatch(frame, batch) {
    let type = "message";
    const data = [];
    for (const line of frame.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") type = value;
      else if (field === "data") data.push(value);
      else if (field === "id") lastId = value;
      else if (field === "retry" && /^\d+$/.test(value)) retryMs = Number(value);
    }
    if (data.length) batch.push({ type, data: JSON.parse(data.join("\n")) });
  }

  async function connect() {
    const headers = { Accept: "text/event-stream" };
    if (lastId !== null) headers["Last-Event-ID"] = lastId;
    const response = await fetch(path, { headers, credentials: "same-origin",
                                         signal: controller.signal, cache: "no-store" });
    if (!response.ok) throw Object.assign(new Error(`stream answered ${response.status}`),
                                          { status: response.status });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += value.replace(/\r\n?/g, "\n");
      const frames = buffer.split("\n\n");
      buffer = frames.pop();
      const batch = [];
      for (const frame of frames) dispatch(frame, batch);
      const end = batch.findIndex((e) => e.type === "end");
      const events = (end === -1 ? batch : batch.slice(0, end)).filter((e) => e.type !== "overflow");
      if (events.length) onEvents(events.map((e) => e.data));
      if (end !== -1) return true;
    }
  }

  (async () => {
    while (!closed) {
      try {
        if (await connect()) {
          closed = true;
          if (onEnd) onEnd();
          return;
        }
      } catch (error) {
        if (closed || error.name === "AbortError") return;
        if (error.status >= 400 && error.status < 500) return;  // not found, signed out
      }
      await new Promise((resolve) => setTimeout(resolve, retryMs));
    }
  })();

  return () => {
    closed = true;
    controller.abort();
  };
}
