// `npm start`: the all-in-one process. Every service whose URL is not configured runs inside this process (on the
// embedded store unless REDIS_URL is set), and the gateway serves REST, Connect, gRPC and gRPC-Web on PORT.
import type { ConnectRouter } from "@connectrpc/connect";
import { ConfigService } from "@gov/api";
import { createConfigBackend, loadConfigSettings, type ConfigBackend } from "@gov/config-service";
import { createLogger, dualProtocolServer, errorInterceptor } from "@gov/service-kit";
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

  let config: ConfigBackend | undefined;
  let configTransport;
  let storeKind: string;
  const configSettings = loadConfigSettings(sources);
  if (settings.configServiceUrl) {
    configTransport = remoteTransport(settings.configServiceUrl);
    storeKind = `remote config service at ${settings.configServiceUrl}`;
  } else {
    config = await createConfigBackend(sources);
    closers.push(() => config!.close());
    local.push(config.routes);
    configTransport = inProcessTransport(config.routes, interceptors);
    storeKind = config.store.kind === "embedded" ? "embedded in-process store (data is lost at exit; set REDIS_URL for Redis)" : `${config.store.kind} at ${configSettings.redisUrl}`;
  }

  const app = await buildGateway({
    services: [{ service: ConfigService, transport: configTransport }],
    logger,
    limits: { maxJsonBody: Math.max(settings.maxJsonBody, configSettings.maxContentBytes), maxZipBytes: configSettings.maxZipBytes },
    connect: local.length ? { routes: (r) => local.forEach((mount) => mount(r)), interceptors } : undefined,
    serverFactory: (handler) => dualProtocolServer(handler),
  });
  await app.listen({ port: settings.port, host: settings.host });
  const shown = settings.host === "0.0.0.0" || settings.host === "::" ? "localhost" : settings.host;
  const url = `http://${shown}:${(app.server.address() as { port: number }).port}`;
  logger.info({ url, store: storeKind }, "gateway listening");
  console.log(`\nGovernance platform listening on ${url}  (REST /v1, Connect/gRPC, docs at ${url}/docs)`);
  console.log(`Store: ${storeKind}\n`);

  const stop = async () => {
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
