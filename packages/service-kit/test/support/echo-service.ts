import { create, createFileRegistry } from "@bufbuild/protobuf";
import type { GenService } from "@bufbuild/protobuf/codegenv2";
import { FileDescriptorProtoSchema, file_google_protobuf_wrappers, type StringValueSchema } from "@bufbuild/protobuf/wkt";

/**
 * A test-only service with one RPC of each kind (the product protos have no client or bidi streams). Its descriptor
 * is built in code from google.protobuf.StringValue, so it needs no .proto file and no code generation.
 */
const file = create(FileDescriptorProtoSchema, {
  name: "gov/test/v1/echo.proto",
  package: "gov.test.v1",
  syntax: "proto3",
  dependency: ["google/protobuf/wrappers.proto"],
  service: [
    {
      name: "EchoService",
      method: [
        { name: "Say", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue" },
        { name: "Count", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue", serverStreaming: true },
        { name: "Collect", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue", clientStreaming: true },
        { name: "Chat", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue", clientStreaming: true, serverStreaming: true },
      ],
    },
  ],
});

type Text = typeof StringValueSchema;

/** Typed like generated code, so tests get typed clients. */
export const EchoService = createFileRegistry(file, (name) =>
  name === "google/protobuf/wrappers.proto" ? file_google_protobuf_wrappers : undefined,
).getService("gov.test.v1.EchoService") as GenService<{
  say: { methodKind: "unary"; input: Text; output: Text };
  count: { methodKind: "server_streaming"; input: Text; output: Text };
  collect: { methodKind: "client_streaming"; input: Text; output: Text };
  chat: { methodKind: "bidi_streaming"; input: Text; output: Text };
}>;
