import { loadSettings, readSettingsSources, type SettingsSources } from "@gov/settings";
import type { ConnectRouter } from "@connectrpc/connect";
import { openConfigStore } from "./open-store.js";
import { ConfigService } from "@gov/api";
import { createConfigService } from "./config-service.js";
import { configSettings } from "./settings.js";
import type { ConfigStore } from "./store/config-store.js";

export interface ConfigBackend {
  routes: (router: ConnectRouter) => void;
  /** The implementation itself, for the all-in-one process's direct in-process transport. */
  impl: ReturnType<typeof createConfigService>;
  store: ConfigStore;
  settings: ReturnType<typeof loadConfigSettings>;
  close(): Promise<void>;
}

export function loadConfigSettings(sources: SettingsSources = readSettingsSources()) {
  return loadSettings(configSettings, sources);
}

/** Settings → store → routes: everything the config service needs, ready to mount on any transport. */
export async function createConfigBackend(sources?: SettingsSources): Promise<ConfigBackend> {
  const settings = loadConfigSettings(sources);
  const store = await openConfigStore(settings);
  const impl = createConfigService({ store, namespaceRule: { requireHashTag: settings.requireHashTag }, limits: settings });
  const routes = (router: ConnectRouter) => {
    router.service(ConfigService, impl);
  };
  return { routes, impl, store, settings, close: () => store.close() };
}
