// `npm run start:config`: the config service as its own process: Connect and gRPC-Web on gov.config-service.port
// (HTTP/1.1), gRPC on gov.config-service.grpc-port (h2c).
import { createLogger, errorInterceptor, serveConnect } from "@gov/service-kit";
import { createConfigBackend, loadConfigSettings } from "./create-config-backend.js";

const logger = createLogger("gov.config-service");
try {
  const backend = await createConfigBackend(loadConfigSettings());
  const server = await serveConnect({
    routes: backend.routes,
    interceptors: [errorInterceptor(logger)],
    port: backend.settings.port,
    grpcPort: backend.settings.grpcPort,
    host: backend.settings.host,
    logger,
    readMaxBytes: backend.settings.maxZipBytes + 1024,
  });
  logger.info(
    { url: server.url, grpcUrl: server.grpcUrl, store: backend.store.kind },
    `config service listening on ${server.url} (Connect, gRPC-Web) and ${server.grpcUrl} (gRPC); store: ${backend.store.kind}`,
  );
  const stop = async () => {
    await server.close();
    await backend.close();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
} catch (err) {
  logger.fatal({ err }, (err as Error).message);
  process.exit(1);
}
