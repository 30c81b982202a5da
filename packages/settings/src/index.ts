export { parseDuration, parseDurationBetween, parseBytes, parseBoolean, parseInteger, parseEnum } from "./parse.js";
export { envName, loadSettings, readSettingsSources, SettingsError, type SettingDef, type SettingsSources, type SettingValues } from "./load.js";
