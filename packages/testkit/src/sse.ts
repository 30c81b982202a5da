/**
 * Opens a REST watch (Server-Sent Events) and hands each event's `data:` JSON, its `event:` name ("message" when it
 * has none; "error" for a failure after the stream began) and its `id:` (undefined when it has none) to `onMessage`
 * until `signal` aborts or the stream ends.
 * Resolves once the response arrived, with `done`, which settles when the stream has ended.
 */
export async function readSse(
  url: string,
  signal: AbortSignal,
  onMessage: (data: unknown, event: string, id: string | undefined) => void,
  headers: Record<string, string> = {},
): Promise<{ status: number; contentType: string | null; done: Promise<void> }> {
  const res = await fetch(url, { signal, headers });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const done = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let i = buffer.indexOf("\n\n"); i >= 0; i = buffer.indexOf("\n\n")) {
        const frame = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (data) onMessage(JSON.parse(data), /^event: (.*)$/m.exec(frame)?.[1] ?? "message", /^id: ?(.*)$/m.exec(frame)?.[1]);
      }
    }
  })().catch(() => undefined);
  return { status: res.status, contentType: res.headers.get("content-type"), done };
}
