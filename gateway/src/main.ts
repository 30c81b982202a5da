// `npm start`: the all-in-one process. Every service whose URL is not configured runs inside this process (on the
// embedded store unless REDIS_URL is set). The gateway serves REST on PORT, plus Connect and gRPC-Web for the services
// it runs; gRPC (h2c) gets its own port, gov.grpc.port.
import type { ConnectRouter, Transport } from "@connectrpc/connect";
import { ConfigService } from "@gov/api";
import { createConfigBackend, loadConfigSettings } from "@gov/config-service";
import { createH2cServer, createLogger, errorInterceptor } from "@gov/service-kit";
import { redactRedisUrl } from "@gov/redis";
import { loadSettings, readSettingsSources } from "@gov/settings";
import { buildGateway } from "./app.js";
import { gatewaySettings } from "./settings.js";
import { inProcessTransport, remoteTransport } from "./transports.js";

const logger = createLogger("gov.gateway");

async function main() {
  const sources = readSettingsSources();
  const settings = loadSettings(gatewaySettings, sources);
  const interceptors = [errorInterceptor(logger)];
  const local: ((router: ConnectRouter) => void)[] = [];
  const closers: (() => Promise<void>)[] = [];

  // The config service: remote when its URL is set, otherwise inside this process.
  const configSettings = loadConfigSettings(sources);
  let configTransport: Transport;
  let storeKind: string;
  if (settings.configServiceUrl) {
    configTransport = remoteTransport(settings.configServiceUrl);
    storeKind = `remote config service at ${settings.configServiceUrl}`;
  } else {
    const config = await createConfigBackend(configSettings);
    closers.push(() => config.close());
    local.push(config.routes);
    configTransport = inProcessTransport([{ service: ConfigService, impl: config.impl }], interceptors);
    storeKind = config.store.kind === "embedded" ? "embedded in-process store (data is lost at exit; set REDIS_URL for Redis)" : `${config.store.kind} at ${redactRedisUrl(configSettings.redisUrl ?? "")}`;
  }

  const app = await buildGateway({
    services: [{ service: ConfigService, transport: configTransport }],
    logger,
    limits: { maxJsonBody: Math.max(settings.maxJsonBody, configSettings.maxContentBytes), maxZipBytes: configSettings.maxZipBytes },
    connect: local.length ? { routes: (r) => local.forEach((mount) => mount(r)), interceptors } : undefined,
  });
  await app.listen({ port: settings.port, host: settings.host });
  const shown = settings.host === "0.0.0.0" || settings.host === "::" ? "localhost" : settings.host;
  const portOf = (a: { server: { address(): unknown } }) => (a.server.address() as { port: number }).port;
  const url = `http://${shown}:${portOf(app)}`;
  const grpc = local.length ? await createH2cServer({ routes: (r) => local.forEach((mount) => mount(r)), interceptors, logger }) : undefined;
  if (grpc) await grpc.listen({ port: settings.grpcPort, host: settings.host });
  const grpcUrl = grpc ? `http://${shown}:${portOf(grpc)}` : undefined;
  logger.info({ url, grpcUrl, store: storeKind }, "gateway listening");
  const rpc = local.length ? ", Connect and gRPC-Web" : "";
  console.log(`\nGovernance platform listening on ${url}  (REST /v1${rpc}; docs at ${url}/docs)`);
  if (grpcUrl) console.log(`gRPC (h2c) on ${grpcUrl}`);
  console.log(`Store: ${storeKind}\n`);

  const stop = async () => {
    await grpc?.close();
    await app.close();
    for (const close of closers) await close();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

main().catch((err: Error) => {
  logger.fatal({ err }, err.message);
  console.error(`startup failed: ${err.message}`);
  process.exit(1);
});
