export { parseDuration, parseDurationBetween, parseBytes, parseBytesBetween, parseBoolean, parseInteger, parseEnum, LONGEST_TIMER_MS } from "./parse.js";
export { envName, loadSettings, LOG_LEVELS, logLevelFromEnv, misspelledFileKeys, rawSetting, readSettingsSources, SettingsError, type SettingDef, type SettingsSources, type SettingValues } from "./load.js";
