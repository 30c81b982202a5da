import { Agent, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { create, toBinary, type DescMessage, type DescMethod, type DescMethodUnary, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type ContextValues, type Interceptor, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { createDeadlineSignal, createLinkedAbortController, getAbortSignalReason } from "@connectrpc/connect/protocol";
import { codeFromHttpStatus, errorFromJsonBytes, trailerDemux } from "@connectrpc/connect/protocol-connect";
import { isReadOnly, outcomeUnknown } from "./call-outcome.js";
import { fromBinaryInTurns } from "../large-lists.js";
import { CALLER_DEADLINE_HEADER } from "./caller-deadline.js";

type UnaryCall = (
  method: DescMethodUnary,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  header: HeadersInit | undefined,
  input: unknown,
  contextValues?: ContextValues,
) => Promise<UnaryResponse>;

const NEVER = new AbortController().signal;

function toHeaders(node: IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const name in node) {
    const value = node[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) out.append(name, v);
    else out.append(name, value);
  }
  return out;
}

/** What Connect-ES's Node client makes of a socket error: the service could not be reached, or the call was cut. */
const unreachable = (err: Error) => new ConnectError(err.message, Code.Unavailable, undefined, undefined, err);

/**
 * Connect unary calls (binary, over pooled keep-alive HTTP/1.1 connections) with the caller's interceptors, without
 * Connect-ES's universal client: one write of the whole request with its length, one read of the whole answer.
 * Connect-ES's Node client costs the calling process ~1 ms of CPU per call here (measured through a gateway), most of
 * it in per-call signal links, web `Headers` conversions and async-iterable bodies; this is the gateway's hop to a
 * service process. The wire format is Connect's (content types, `connect-timeout-ms`, errors as JSON with their HTTP
 * status, `trailer-` headers), so the service's listener serves it like any Connect client.
 */
export function connectUnaryClient(baseUrl: string, interceptors: Interceptor[] = []): UnaryCall {
  const base = new URL(baseUrl);
  const prefix = base.pathname.replace(/\/$/, "");
  const agent = new Agent({ keepAlive: true });

  const send = (req: UnaryRequest): Promise<UnaryResponse> => {
    const method = req.method as DescMethodUnary;
    const body = toBinary(method.input, req.message as MessageShape<DescMessage>);
    const headers: Record<string, string> = {};
    req.header.forEach((value, name) => (headers[name] = value));
    headers["content-type"] = "application/proto";
    headers["content-length"] = String(body.byteLength);
    headers["connect-protocol-version"] = "1";
    // No accept-encoding: on the hop between our own processes compressing costs both sides more CPU than it saves,
    // and the answer is then never compressed (Connect servers compress only what the client accepts).
    const deadline = (req as UnaryRequest & { deadline?: number }).deadline;
    if (deadline !== undefined) {
      headers["connect-timeout-ms"] = String(Math.max(1, deadline - Date.now()));
      headers[CALLER_DEADLINE_HEADER] = String(deadline); // a service that reads the call late refuses it (caller-deadline.ts)
    }
    const signal = req.signal;
    return new Promise<UnaryResponse>((resolve, reject) => {
      const onAbort = () => {
        call.destroy();
        reject(ConnectError.from(getAbortSignalReason(signal), Code.Canceled));
      };
      const call = httpRequest({ host: base.hostname, port: base.port, path: `${prefix}/${method.parent.typeName}/${method.name}`, method: "POST", agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", (err) => {
          signal.removeEventListener("abort", onAbort);
          reject(unreachable(err));
        });
        res.on("end", () => {
          signal.removeEventListener("abort", onAbort);
          try {
            const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
            const [header, trailer] = trailerDemux(toHeaders(res.headers));
            const status = res.statusCode ?? 0;
            if (status === 200 && res.headers["content-type"] === "application/proto") {
              const answer = (message: unknown) => ({ stream: false, service: method.parent, method, header, trailer, message }) as UnaryResponse;
              const decoded = fromBinaryInTurns(method.output, bytes); // a long list: a few ms at a time
              if (decoded instanceof Promise) decoded.then((m) => resolve(answer(m)), (err: unknown) => reject(ConnectError.from(err, Code.Internal)));
              else resolve(answer(decoded));
              return;
            }
            const metadata = new Headers(header);
            trailer.forEach((value, name) => metadata.append(name, value));
            const fallback = new ConnectError(`HTTP ${status}`, codeFromHttpStatus(status), metadata);
            reject(res.headers["content-type"]?.startsWith("application/json") ? errorFromJsonBytes(bytes, metadata, fallback) : fallback);
          } catch (err) {
            reject(ConnectError.from(err, Code.Internal));
          }
        });
      });
      call.on("error", (err) => {
        signal.removeEventListener("abort", onAbort);
        reject(signal.aborted ? ConnectError.from(getAbortSignalReason(signal), Code.Canceled) : unreachable(err));
      });
      if (signal !== NEVER) signal.addEventListener("abort", onAbort, { once: true });
      call.end(body);
    });
  };
  const chained = interceptors.reduceRight((next, interceptor) => interceptor(next as never) as never, send as (req: UnaryRequest) => Promise<UnaryResponse>);

  return async (method, signal, timeoutMs, header, input, contextValues) => {
    // A deadline aborts the call here and is sent along, so the service gives up too.
    const deadline = timeoutMs === undefined ? undefined : createDeadlineSignal(timeoutMs);
    const linked = deadline ? createLinkedAbortController(signal, deadline.signal) : undefined;
    const req = {
      stream: false as const,
      service: method.parent,
      method,
      requestMethod: "POST",
      url: `${baseUrl}/${method.parent.typeName}/${method.name}`,
      header: new Headers(header),
      contextValues: contextValues ?? createContextValues(),
      signal: linked?.signal ?? signal ?? NEVER,
      message: create(method.input, input as never),
      deadline: timeoutMs === undefined ? undefined : Date.now() + timeoutMs,
    };
    try {
      if (req.signal.aborted) throw ConnectError.from(getAbortSignalReason(req.signal), Code.Canceled);
      return await chained(req as unknown as UnaryRequest);
    } catch (err) {
      const error = ConnectError.from(err);
      // Our own deadline ran out while the service was silent: say what that means for the call.
      if (deadline?.signal.aborted && !signal?.aborted && error.code === Code.DeadlineExceeded) throw silentService(method, baseUrl, timeoutMs!, error);
      throw error;
    } finally {
      deadline?.cleanup();
    }
  };
}

/** A call the service did not answer in time: a read may simply be retried; a write may or may not have been applied. */
function silentService(method: DescMethod, baseUrl: string, timeoutMs: number, cause: ConnectError): ConnectError {
  const what = isReadOnly(method) ? "retry when it answers again" : outcomeUnknown();
  return new ConnectError(`the service at ${baseUrl} did not answer within ${timeoutMs} ms: ${what}`, Code.DeadlineExceeded, undefined, undefined, cause);
}
