import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  type Config,
  ConfigHistorySchema,
  ConfigSchema,
  ConfigService,
  ConfigVersionSchema,
  ImportResultSchema,
  WatchConfigResponseSchema,
} from "@gov/api";
import { checkNamespace, type NamespaceRule } from "@gov/service-kit";
import type { ConfigChange, ConfigRecord, ConfigStore } from "./store/config-store.js";
import type { ConfigLimits } from "./settings.js";
import { readImportArchive, writeExportArchive } from "./zip-archive.js";
import { watchChanges } from "./watch-changes.js";

export interface ConfigServiceDeps {
  store: ConfigStore;
  namespaceRule: NamespaceRule;
  limits: ConfigLimits;
  now?: () => number;
}

const sha256 = (data: string) => createHash("sha256").update(data).digest("hex");

const DOT_SEGMENT = /(?:^|\/)\.\.?(?:\/|$)/;

function checkConfigId(configId: string): void {
  if (!configId) throw new ConnectError("config id is required, e.g. app.yaml", Code.InvalidArgument);
  if (configId.length > 512 || /[\u0000-\u001f\u007f]/.test(configId)) {
    throw new ConnectError("config id must be at most 512 characters without control characters", Code.InvalidArgument);
  }
  if (configId === "export") {
    // GET .../configs/export is the ZIP export, so a config of that name could be written but never read over REST.
    throw new ConnectError('"export" is reserved (GET .../configs/export downloads the archive): choose another config id', Code.InvalidArgument);
  }
  if (configId.startsWith("/") || DOT_SEGMENT.test(configId)) {
    // Ids become ZIP entry names on export; refusing these keeps every export safe to unpack.
    throw new ConnectError(`config id "${configId}" must not start with "/" or contain "." or ".." segments`, Code.InvalidArgument);
  }
}

function checkVersion(version: number, field: string): void {
  if (!Number.isInteger(version) || version < 1) {
    throw new ConnectError(`${field} must be a whole number of at least 1 (versions start at 1)`, Code.InvalidArgument);
  }
}

/** The message of the ConnectError `check` throws, or undefined when it passes. */
function problemOf(check: () => void): string | undefined {
  try {
    check();
    return undefined;
  } catch (err) {
    return err instanceof ConnectError ? err.rawMessage : String(err);
  }
}

// Store records are immutable and cached by the stores, so the message made from one can be reused too:
// a hot config read then allocates nothing here.
const configMessages = new WeakMap<ConfigRecord, Config>();
function toConfig(r: ConfigRecord): Config {
  let msg = configMessages.get(r);
  if (!msg) {
    msg = create(ConfigSchema, { configId: r.configId, data: r.data, hash: r.hash, version: r.version, createTime: timestampFromMs(r.createTime) });
    configMessages.set(r, msg);
  }
  return msg;
}

const notFound = (ns: string, id: string) => new ConnectError(`config "${id}" does not exist in namespace "${ns}"`, Code.NotFound);

export function createConfigService(deps: ConfigServiceDeps): ServiceImpl<typeof ConfigService> {
  const { store, limits } = deps;
  const now = deps.now ?? Date.now;
  const checkTarget = (ns: string, id?: string) => {
    checkNamespace(ns, deps.namespaceRule);
    if (id !== undefined) checkConfigId(id);
  };
  const checkContent = (data: string) => {
    const bytes = Buffer.byteLength(data, "utf8");
    if (bytes > limits.maxContentBytes) {
      throw new ConnectError(`config content is ${bytes} bytes, over the limit of ${limits.maxContentBytes} (gov.limits.config-content)`, Code.InvalidArgument);
    }
  };

  return {
    async listConfigs(req) {
      checkTarget(req.namespace);
      return { configIds: await store.list(req.namespace) };
    },

    async setConfig(req) {
      checkTarget(req.namespace, req.configId);
      checkContent(req.data);
      return store.set(req.namespace, req.configId, req.data, sha256(req.data), now());
    },

    async deleteConfig(req) {
      checkTarget(req.namespace, req.configId);
      if (!(await store.remove(req.namespace, req.configId, now()))) throw notFound(req.namespace, req.configId);
      return { removed: true };
    },

    async getConfig(req) {
      checkTarget(req.namespace, req.configId);
      const config = await store.get(req.namespace, req.configId);
      if (!config) throw notFound(req.namespace, req.configId);
      return { config: toConfig(config) };
    },

    async rollbackConfig(req) {
      checkTarget(req.namespace, req.configId);
      checkVersion(req.targetVersion, "target version");
      const result = await store.rollback(req.namespace, req.configId, req.targetVersion, now());
      if (!result) {
        throw new ConnectError(
          `config "${req.configId}" in namespace "${req.namespace}" has no version ${req.targetVersion}: list them with GET .../versions`,
          Code.NotFound,
        );
      }
      return result;
    },

    async listConfigVersions(req) {
      checkTarget(req.namespace, req.configId);
      const versions = await store.versions(req.namespace, req.configId);
      if (versions.length === 0 && !(await store.get(req.namespace, req.configId))) throw notFound(req.namespace, req.configId);
      return { versions: versions.map((v) => create(ConfigVersionSchema, { ...v, opTime: timestampFromMs(v.opTime) })) };
    },

    async getConfigVersion(req) {
      checkTarget(req.namespace, req.configId);
      checkVersion(req.version, "version");
      const h = await store.version(req.namespace, req.configId, req.version);
      if (!h) {
        const current = await store.get(req.namespace, req.configId);
        const hint = current?.version === req.version ? "it is the current version: GET the config itself" : "list them with GET .../versions";
        throw new ConnectError(`config "${req.configId}" in namespace "${req.namespace}" has no archived version ${req.version}: ${hint}`, Code.NotFound);
      }
      return { version: create(ConfigHistorySchema, { ...h, createTime: timestampFromMs(h.createTime), opTime: timestampFromMs(h.opTime) }) };
    },

    async importConfigs(req) {
      checkTarget(req.namespace);
      const policy = req.policy || "skip";
      if (policy !== "skip" && policy !== "overwrite") {
        throw new ConnectError(`policy "${req.policy}" is not known: use skip (default) or overwrite`, Code.InvalidArgument);
      }
      const entries = await readImportArchive(req.importZip, limits);
      const results = [];
      let succeeded = 0;
      for (const entry of entries) {
        if (!("data" in entry)) {
          results.push(create(ImportResultSchema, entry));
          continue;
        }
        const idProblem = problemOf(() => checkConfigId(entry.configId)); // the same id rules as SetConfig
        if (idProblem) {
          results.push(create(ImportResultSchema, { configId: entry.configId, outcome: "rejected", reason: idProblem }));
          continue;
        }
        const existing = await store.get(req.namespace, entry.configId);
        if (existing && policy === "skip") {
          results.push(create(ImportResultSchema, { configId: entry.configId, outcome: "skipped", reason: "exists (use policy=overwrite to replace it)" }));
          continue;
        }
        const { changed } = await store.set(req.namespace, entry.configId, entry.data, sha256(entry.data), now());
        const outcome = !existing ? "created" : changed ? "updated" : "unchanged";
        if (changed) succeeded++;
        results.push(create(ImportResultSchema, { configId: entry.configId, outcome }));
      }
      return { total: results.length, succeeded, results };
    },

    async *exportConfigs(req) {
      checkTarget(req.namespace);
      const ids = await store.list(req.namespace);
      const configs = (await Promise.all(ids.map((id) => store.get(req.namespace, id)))).filter((c) => c !== undefined);
      let first = true;
      for await (const chunk of writeExportArchive(configs)) {
        yield {
          body: { contentType: first ? "application/zip" : "", data: chunk },
          fileName: first ? `${req.namespace}_configs_${now()}.zip` : "",
        };
        first = false;
      }
    },

    async *watchConfig(req, ctx: HandlerContext) {
      checkTarget(req.namespace, req.configId);
      const message = (op: string, config?: ConfigRecord) =>
        create(WatchConfigResponseSchema, { op, configId: req.configId, config: config && toConfig(config) });
      // Subscribe before the first read so that no change between the two is lost.
      const changes = watchChanges(store, (c: ConfigChange) => c.namespace === req.namespace && c.configId === req.configId, ctx.signal);
      const first = await store.get(req.namespace, req.configId);
      // What the client has seen: events it already has (published before the first read, delivered after) are dropped.
      let seen = first?.version ?? 0;
      let present = first !== undefined;
      yield message("current", first);
      for await (const change of changes) {
        if (change === "resync") {
          const now = await store.get(req.namespace, req.configId);
          seen = Math.max(seen, now?.version ?? 0);
          present = now !== undefined;
          yield message("resync", now);
          continue;
        }
        if (change.op === "remove") {
          if (!present) continue;
          present = false;
          yield message("remove");
          continue;
        }
        if (change.version <= seen) continue;
        seen = change.version;
        present = true;
        // Later changes may already have landed: send the version this event announced, from the history if needed.
        const current = await store.get(req.namespace, req.configId);
        yield message(change.op, current?.version === change.version ? current : await store.version(req.namespace, req.configId, change.version));
      }
    },
  };
}
