import { createRegistry, toBinary, type DescFile, type DescService, type Registry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { ServerReflection as ServerReflectionV1 } from "@gov/api/gen/grpc/reflection/v1/reflection_pb";
import { ServerReflection as ServerReflectionV1alpha } from "@gov/api/gen/grpc/reflection/v1alpha/reflection_pb";

/**
 * gRPC server reflection (grpc.reflection.v1 and the older v1alpha, which `grpcurl` and older clients still ask for):
 * lets `buf curl`, grpcurl, Postman … list the services and fetch their descriptors without the proto files.
 * The two versions have the same messages; one answerer serves both.
 */
export function reflectionRoutes(services: readonly DescService[]): (router: ConnectRouter) => void {
  const all = [...services, ServerReflectionV1, ServerReflectionV1alpha];
  const answer = createAnswerer(all);
  return (router) => {
    router.service(ServerReflectionV1, { serverReflectionInfo: (requests) => reflect(requests, answer) });
    router.service(ServerReflectionV1alpha, { serverReflectionInfo: (requests) => reflect(requests, answer) });
  };
}

/** The request as both versions declare it (the v1 and v1alpha types differ only in their type names). */
interface ReflectionRequest {
  host: string;
  messageRequest:
    | { case: "fileByFilename" | "fileContainingSymbol" | "allExtensionNumbersOfType" | "listServices"; value: string }
    | { case: "fileContainingExtension"; value: { containingType: string; extensionNumber: number } }
    | { case: undefined; value?: undefined };
}

type MessageResponse =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/** Answers one request; `sent` holds the files already sent on this stream, which are not sent again (as grpc-go). */
type Answerer = (req: ReflectionRequest, sent: Set<string>) => MessageResponse;

async function* reflect<R extends ReflectionRequest>(requests: AsyncIterable<R>, answer: Answerer) {
  const sent = new Set<string>();
  for await (const req of requests) {
    yield { validHost: req.host, originalRequest: req, messageResponse: answer(req, sent) };
  }
}

const NOT_FOUND = 5; // grpc.Code NOT_FOUND, as the reflection protocol reports errors
const INVALID_ARGUMENT = 3;

function createAnswerer(services: readonly DescService[]): Answerer {
  const files = new Map<string, DescFile>();
  const addFile = (file: DescFile) => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, file);
    file.dependencies.forEach(addFile);
  };
  services.forEach((s) => addFile(s.file));
  const registry = createRegistry(...files.values());
  const serviceNames = [...new Set(services.map((s) => s.typeName))].sort();

  const filesWithDeps = (file: DescFile, sent: Set<string>): MessageResponse => {
    const out: Uint8Array[] = [];
    const visit = (f: DescFile) => {
      if (sent.has(f.proto.name)) return;
      sent.add(f.proto.name);
      out.push(toBinary(FileDescriptorProtoSchema, f.proto));
      f.dependencies.forEach(visit);
    };
    sent.delete(file.proto.name); // the file asked for is always sent, first
    visit(file);
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: out } };
  };
  const notFound = (what: string): MessageResponse => ({ case: "errorResponse", value: { errorCode: NOT_FOUND, errorMessage: `${what} is not served here` } });

  return (req, sent) => {
    const r = req.messageRequest;
    switch (r.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: serviceNames.map((name) => ({ name })) } };
      case "fileByFilename": {
        const file = files.get(r.value);
        return file ? filesWithDeps(file, sent) : notFound(`file "${r.value}"`);
      }
      case "fileContainingSymbol": {
        const file = fileOfSymbol(registry, r.value);
        return file ? filesWithDeps(file, sent) : notFound(`symbol "${r.value}"`);
      }
      case "fileContainingExtension": {
        const extendee = registry.getMessage(r.value.containingType);
        const ext = extendee && registry.getExtensionFor(extendee, r.value.extensionNumber);
        return ext ? filesWithDeps(ext.file, sent) : notFound(`extension ${r.value.extensionNumber} of "${r.value.containingType}"`);
      }
      case "allExtensionNumbersOfType": {
        if (!registry.getMessage(r.value)) return notFound(`message type "${r.value}"`);
        const numbers = [...registry].flatMap((d) => (d.kind === "extension" && d.extendee.typeName === r.value ? [d.number] : []));
        return { case: "allExtensionNumbersResponse", value: { baseTypeName: r.value, extensionNumber: numbers } };
      }
      default:
        return { case: "errorResponse", value: { errorCode: INVALID_ARGUMENT, errorMessage: "empty reflection request: set one of its message_request fields" } };
    }
  };
}

/** The file that declares a fully-qualified symbol: a type or service, or a method, field or enum value of one. */
function fileOfSymbol(registry: Registry, symbol: string): DescFile | undefined {
  const name = symbol.startsWith(".") ? symbol.slice(1) : symbol;
  const direct = registry.get(name);
  if (direct) return direct.file;
  const dot = name.lastIndexOf(".");
  if (dot < 0) return undefined;
  const parent = registry.get(name.slice(0, dot));
  const member = name.slice(dot + 1);
  switch (parent?.kind) {
    case "service":
      return parent.methods.some((m) => m.name === member) ? parent.file : undefined;
    case "message":
      return parent.fields.some((f) => f.name === member) || parent.oneofs.some((o) => o.name === member) ? parent.file : undefined;
    default:
      return undefined;
  }
}
