export { parseDuration, parseDurationBetween, parseBytes, parseBoolean, parseInteger, parseEnum } from "./parse.js";
export { envName, loadSettings, LOG_LEVELS, logLevelFromEnv, rawSetting, readSettingsSources, SettingsError, type SettingDef, type SettingsSources, type SettingValues } from "./load.js";
