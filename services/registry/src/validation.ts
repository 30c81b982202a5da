import { Code, ConnectError } from "@connectrpc/connect";
import { composedFormOf, invisibleCharacterIn, withInvisibleWrittenOut } from "@gov/service-kit";
import { MAX_TTL_MS, MIN_TTL_MS } from "./settings.js";

/**
 * The registry's input rules, one place for every protocol (REST, Connect, gRPC-Web and gRPC all reach the handlers).
 * Each message says what was wrong and how to fix it, and quotes at most a short excerpt of what was sent.
 */

const invalid = (message: string) => new ConnectError(message, Code.InvalidArgument);
const excerpt = (s: string, max = 64) => JSON.stringify(s.length > max ? `${s.slice(0, max)}…` : s);
// C0/C1 controls, and unpaired surrogates (no UTF-8 form, so they could not be stored and read back).
const BAD_CHARS = /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const MAX_SERVICE_ID = 256;
const MAX_HOST = 255;
const MAX_METADATA_KEY = 256;
const MAX_METADATA_VALUE = 4096;
const MAX_METADATA_ENTRIES = 256;
/** `GET …/services/stats` and `GET …/services/watch` are routes: a service of either name could not be told apart in REST paths. */
const RESERVED_SERVICE_IDS = new Set(["stats", "watch"]);
/** Names the prototype of a JavaScript object: a protobuf-es map (the topology's consumers) cannot hold it as a key. */
const PROTO_KEY = "__proto__";
const ID_FORMAT = "{serviceId}@{schema}#{host}#{port}, e.g. order@http#10.0.0.1#8080 (in a URL send # as %23: order@http%2310.0.0.1%238080)";

/** Rules for naming a service in any call. */
export function checkServiceId(serviceId: string): void {
  if (!serviceId) throw invalid("serviceId is required: name the service, e.g. order");
  if (serviceId.length > MAX_SERVICE_ID) throw invalid(`serviceId is ${serviceId.length} characters long: use at most ${MAX_SERVICE_ID}`);
  if (BAD_CHARS.test(serviceId)) throw invalid(`serviceId ${excerpt(serviceId)} contains a control character or an unpaired surrogate: use printable text`);
  if (/[@#]/.test(serviceId)) {
    throw invalid(`serviceId ${excerpt(serviceId)} contains "@" or "#", which separate the parts of an instance id (${ID_FORMAT}): choose a name without them`);
  }
}

/** Rules for creating a service (PUT service, register): also refuses the reserved names. */
export function checkWritableServiceId(serviceId: string): void {
  checkServiceId(serviceId);
  // " order" and "order" would be two services that look alike in every list: refused when created
  if (serviceId.trim() !== serviceId) throw invalid(`serviceId ${excerpt(serviceId)} starts or ends with a space: remove it`);
  // For the same reason: "order" followed by a zero-width space (or behind a bidirectional override) shows as "order",
  // and "café" is U+00E9 or "e" + the combining U+0301 — two services no list, topology or `/lb` caller can tell apart,
  // as for namespaces, users and roles. Services created before this rule are still read, renewed and deleted.
  const hidden = invisibleCharacterIn(serviceId);
  if (hidden) {
    throw invalid(`serviceId ${excerpt(withInvisibleWrittenOut(serviceId))} contains ${hidden}, a character that does not show (a zero-width, format or bidirectional character), which would let it pass for another service: remove it`);
  }
  const composed = composedFormOf(serviceId);
  if (composed !== undefined) {
    throw invalid(`serviceId ${excerpt(serviceId)} is not in composed Unicode form (NFC): it shows the same as ${excerpt(composed)}, which would be another service; send that`);
  }
  if (RESERVED_SERVICE_IDS.has(serviceId)) throw invalid(`serviceId "${serviceId}" is reserved (GET …/services/${serviceId} is a route of its own): choose another name`);
  if (serviceId === PROTO_KEY) throw invalid(`serviceId "${PROTO_KEY}" is reserved (it names a JavaScript object's prototype, so the topology could not list it): choose another name`);
}

export function checkSchema(schema: string): void {
  if (!schema) throw invalid('schema is required: say how to reach the instance, e.g. "schema": "http"');
  if (!/^[A-Za-z][A-Za-z0-9+.-]{0,31}$/.test(schema)) {
    throw invalid(`schema ${excerpt(schema)} is not a URI scheme: use letters, digits, "+", "-" or "." starting with a letter, at most 32 (http, https, grpc …)`);
  }
}

export function checkHost(host: string): void {
  if (!host) throw invalid('host is required: give the instance\'s host name or IP address, e.g. "host": "10.0.0.1"');
  if (host.length > MAX_HOST) throw invalid(`host is ${host.length} characters long: use at most ${MAX_HOST}`);
  if (/[\s#"]/.test(host) || BAD_CHARS.test(host)) {
    throw invalid(`host ${excerpt(host)} contains a space, "#", a quote or a control character: give a host name or IP address ("#" separates the parts of an instance id)`);
  }
}

export function checkPort(port: number): void {
  // proto3 int32 has no presence: a body without "port" decodes as 0, so 0 is most often a port left out.
  if (port === 0) throw invalid("port is missing (or 0): give the instance's port, 1 to 65535");
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw invalid(`port ${port} is out of range: give the instance's port, a whole number from 1 to 65535 ("port" is required)`);
  }
}

export function checkWeight(weight: number): void {
  if (!Number.isInteger(weight) || weight < 0) {
    throw invalid(`weight ${weight} is not allowed: use a whole number of 0 or more (default 1; 0 = never chosen by the load balancer)`);
  }
}

/** Metadata keys starting with `_` are reserved (for the system's own fields), as CoSky reserves them. */
export function checkMetadata(metadata: Record<string, string>): void {
  const entries = Object.entries(metadata);
  if (entries.length > MAX_METADATA_ENTRIES) throw invalid(`metadata has ${entries.length} entries: use at most ${MAX_METADATA_ENTRIES}`);
  for (const [key, value] of entries) {
    if (!key) throw invalid("metadata keys must not be empty: name each entry");
    if (key.startsWith("_")) throw invalid(`metadata key ${excerpt(key)} starts with "_", which is reserved: rename it (e.g. without the leading "_")`);
    if (key.length > MAX_METADATA_KEY || BAD_CHARS.test(key)) throw invalid(`metadata key ${excerpt(key)} is too long or holds a control character: use printable text of at most ${MAX_METADATA_KEY} characters`);
    if (typeof value !== "string") throw invalid(`metadata value of ${excerpt(key)} must be a string: quote it ("${key}": "…")`);
    if (value.length > MAX_METADATA_VALUE || BAD_CHARS.test(value)) {
      throw invalid(`metadata value of ${excerpt(key)} is too long or holds a control character: use printable text of at most ${MAX_METADATA_VALUE} characters`);
    }
  }
}

/** A per-request ttl in ms (seconds and nanos of a google.protobuf.Duration). */
export function checkTtl(seconds: bigint, nanos: number): number {
  // A google.protobuf.Duration's nanos are within ±999,999,999 and of the sign of its seconds: all its JSON form
  // (REST, Connect JSON) can say. Binary protobuf can carry any pair, which would otherwise be read as another duration.
  if (!(nanos > -1e9 && nanos < 1e9) || (seconds > 0n && nanos < 0) || (seconds < 0n && nanos > 0)) {
    throw invalid(`ttl is not a valid duration (seconds ${seconds}, nanos ${nanos}): nanos must be within ±999999999 and of the sign of seconds, e.g. seconds 1, nanos 500000000 for 1.5 s`);
  }
  const ms = Number(seconds) * 1000 + Math.trunc(nanos / 1e6);
  if (!(ms >= MIN_TTL_MS && ms <= MAX_TTL_MS)) throw invalid(`ttl ${Number(seconds) + nanos / 1e9}s is out of range: give a duration from "1s" to "86400s" (24 h), or leave it out for gov.registry.instance-ttl`);
  return ms;
}

export const instanceIdOf = (serviceId: string, schema: string, host: string, port: number) => `${serviceId}@${schema}#${host}#${port}`;

/** An instance id named in a path must be well formed and belong to the service in the same path. */
export function checkInstanceId(serviceId: string, instanceId: string): void {
  if (!instanceId) throw invalid(`instanceId is required: ${ID_FORMAT}`);
  if (instanceId.length > 1024 || BAD_CHARS.test(instanceId)) throw invalid(`instanceId ${excerpt(instanceId)} is not an instance id: ${ID_FORMAT}`);
  if (!instanceId.startsWith(`${serviceId}@`)) {
    throw invalid(`instanceId ${excerpt(instanceId)} does not belong to service ${excerpt(serviceId)}: instance ids are ${ID_FORMAT}`);
  }
  if (!/^[^#]+#[^#]+#\d{1,5}$/.test(instanceId.slice(serviceId.length + 1))) {
    throw invalid(`instanceId ${excerpt(instanceId)} is not an instance id: ${ID_FORMAT}`);
  }
}
