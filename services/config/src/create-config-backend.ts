import { loadSettings, readSettingsSources, type SettingsSources } from "@gov/settings";
import { configSettings } from "./settings.js";

export type ConfigSettings = ReturnType<typeof loadConfigSettings>;

/** Every config-service setting (own and endpoint), e.g. for tools; processes get theirs through the module. */
export function loadConfigSettings(sources: SettingsSources = readSettingsSources()) {
  return loadSettings(configSettings, sources);
}
