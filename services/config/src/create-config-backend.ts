import { loadSettings, readSettingsSources, type SettingsSources } from "@gov/settings";
import type { ConnectRouter } from "@connectrpc/connect";
import { openConfigStore } from "./open-store.js";
import { createConfigService } from "./config-service.js";
import { configRoutes } from "./routes.js";
import { configSettings } from "./settings.js";
import type { ConfigStore } from "./store/config-store.js";

export interface ConfigBackend {
  routes: (router: ConnectRouter) => void;
  /** The implementation itself, for the all-in-one process's direct in-process transport. */
  impl: ReturnType<typeof createConfigService>;
  store: ConfigStore;
  settings: ConfigSettings;
  close(): Promise<void>;
}

export type ConfigSettings = ReturnType<typeof loadConfigSettings>;

export function loadConfigSettings(sources: SettingsSources = readSettingsSources()) {
  return loadSettings(configSettings, sources);
}

/** Settings → store → routes: everything the config service needs, ready to mount on any transport. */
export async function createConfigBackend(settings: ConfigSettings): Promise<ConfigBackend> {
  const store = await openConfigStore(settings);
  const impl = createConfigService({ store, namespaceRule: { requireHashTag: settings.requireHashTag }, limits: settings });
  return { routes: configRoutes(impl), impl, store, settings, close: () => store.close() };
}
