import { hash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  type Config,
  ConfigHistorySchema,
  ConfigSchema,
  ConfigService,
  ConfigVersionSchema,
  type GetConfigResponse,
  type WatchConfigResponse,
  GetConfigResponseSchema,
  WatchConfigResponseSchema,
} from "@gov/api";
import { checkNamespace, checkNewNamespace, excerpt, limitExceeded, mapInTurns, paceFanOut, perRecord, readThroughOutage, withInvisibleWrittenOut, type NamespaceRule } from "@gov/service-kit";
import type { ConfigChange, ConfigRecord, ConfigStore } from "./store/config-store.js";
import type { ConfigLimits } from "./settings.js";
import { basicConfigIdProblem, writableConfigIdProblem } from "./config-id.js";
import { importEntries } from "./import-configs.js";
import { readAhead, readImportArchive, writeExportArchive } from "./zip-archive.js";
import { watchChanges } from "./watch-changes.js";

/** What the config service needs of the namespace index (`@gov/namespaces`): a cached, idempotent add. */
export interface NamespaceIndexer {
  add(namespace: string): Promise<void>;
}

export interface ConfigServiceDeps {
  store: ConfigStore;
  /** Every namespace that receives a config is indexed (before the write: data never sits in an unindexed namespace). */
  namespaces?: NamespaceIndexer;
  namespaceRule: NamespaceRule;
  limits: ConfigLimits;
  now?: () => number;
}

// One-shot hash: no Hash object per write (createHash().update().digest() showed up in the PUT profile).
const sha256 = (data: string) => hash("sha256", data, "hex");

/** Rules for naming an existing config (reads, rollback, delete): every stored id passes them. */
function checkConfigId(configId: string): void {
  const problem = basicConfigIdProblem(configId);
  if (problem) throw new ConnectError(problem, Code.InvalidArgument);
}

/** Rules for writing a config: also those that make export → import give back every id unchanged (config-id.ts). */
function checkWritableConfigId(configId: string): void {
  const problem = writableConfigIdProblem(configId);
  if (problem) throw new ConnectError(problem.message, Code.InvalidArgument);
}

function checkVersion(version: number, field: string): void {
  if (!Number.isInteger(version) || version < 1) {
    throw new ConnectError(`${field} must be a whole number from 1 to 2147483647 (versions start at 1), not ${version}`, Code.InvalidArgument);
  }
}

// Store records are immutable and cached by the stores: the message made from one, and a GET's answer around it, are
// made once (a message of the output type is passed on by the transport as it is): a hot read builds nothing here.
const toConfig = perRecord(
  (r: ConfigRecord): Config => create(ConfigSchema, { configId: r.configId, data: r.data, hash: r.hash, version: r.version, createTime: timestampFromMs(r.createTime) }),
);
const getResponseOf = perRecord((r: ConfigRecord): GetConfigResponse => create(GetConfigResponseSchema, { config: toConfig(r) }));
/**
 * A watch's message about a record, one per record and op for all its watchers: answers are serialized once per
 * message (the gateway's JSON texts go by identity), so a large config's change costs one serialization on SSE, not
 * one per watcher.
 */
const watchMessagesOf = perRecord((_r: ConfigRecord) => new Map<string, WatchConfigResponse>());
function watchMessageOf(r: ConfigRecord, op: string): WatchConfigResponse {
  const made = watchMessagesOf(r);
  let m = made.get(op);
  if (m === undefined) made.set(op, (m = create(WatchConfigResponseSchema, { op, configId: r.configId, config: toConfig(r) })));
  return m;
}

// Names written out where a character would not show: "app\u200b.yaml" must not read as naming the existing "app.yaml".
const notFound = (ns: string, id: string) => new ConnectError(`config "${withInvisibleWrittenOut(id)}" does not exist in namespace "${withInvisibleWrittenOut(ns)}"`, Code.NotFound);

export function createConfigService(deps: ConfigServiceDeps): ServiceImpl<typeof ConfigService> {
  const { store, limits } = deps;
  const now = deps.now ?? Date.now;
  const indexed = (ns: string) => deps.namespaces?.add(ns);
  const checkTarget = (ns: string, id?: string) => {
    checkNamespace(ns, deps.namespaceRule);
    if (id !== undefined) checkConfigId(id);
  };
  const checkContent = (data: string) => {
    const bytes = Buffer.byteLength(data, "utf8");
    if (bytes > limits.maxContentBytes) {
      throw limitExceeded("config content", bytes, limits.maxContentBytes, "gov.limits.config-content"); // 413 on REST, resource_exhausted everywhere
    }
  };

  return {
    async listConfigs(req) {
      checkTarget(req.namespace);
      return { configIds: await store.list(req.namespace) };
    },

    async setConfig(req) {
      checkNewNamespace(req.namespace, deps.namespaceRule);
      checkWritableConfigId(req.configId);
      checkContent(req.data);
      await indexed(req.namespace);
      // awaited, not returned: an async function that returns a promise takes two more microtask turns to adopt it
      return await store.set(req.namespace, req.configId, req.data, sha256(req.data), now());
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
      return getResponseOf(config);
    },

    async rollbackConfig(req) {
      checkTarget(req.namespace, req.configId);
      checkVersion(req.targetVersion, "target version");
      // A rollback writes only where a config was before, so the namespace is indexed already — unless its data
      // predates the index: indexing after a successful rollback covers that without indexing failed attempts.
      const result = await store.rollback(req.namespace, req.configId, req.targetVersion, now());
      if (result) await indexed(req.namespace);
      if (!result) {
        throw new ConnectError(
          `config "${req.configId}" in namespace "${req.namespace}" has no version ${req.targetVersion}: list them with GET .../versions (the history keeps the newest gov.config.history.max-versions)`,
          Code.NotFound,
        );
      }
      return result;
    },

    async listConfigVersions(req) {
      checkTarget(req.namespace, req.configId);
      const versions = await store.versions(req.namespace, req.configId);
      if (versions.length === 0 && !(await store.get(req.namespace, req.configId))) throw notFound(req.namespace, req.configId);
      // A few milliseconds at a time: at the largest retention (100,000 versions) the messages took 55–110 ms to make.
      return { versions: await mapInTurns(versions, (v) => create(ConfigVersionSchema, { ...v, opTime: timestampFromMs(v.opTime) })) };
    },

    async getConfigVersion(req) {
      checkTarget(req.namespace, req.configId);
      checkVersion(req.version, "version");
      const h = await store.version(req.namespace, req.configId, req.version);
      if (!h) {
        const current = await store.get(req.namespace, req.configId);
        const hint = current?.version === req.version ? "it is the current version: GET the config itself" : "list them with GET .../versions (the history keeps the newest gov.config.history.max-versions)";
        throw new ConnectError(`config "${req.configId}" in namespace "${req.namespace}" has no archived version ${req.version}: ${hint}`, Code.NotFound);
      }
      return { version: create(ConfigHistorySchema, { ...h, createTime: timestampFromMs(h.createTime), opTime: timestampFromMs(h.opTime) }) };
    },

    async importConfigs(req, ctx: HandlerContext) {
      checkNewNamespace(req.namespace, deps.namespaceRule);
      const policy = req.policy || "skip";
      if (policy !== "skip" && policy !== "overwrite") {
        throw new ConnectError(`policy "${excerpt(req.policy)}" is not known: use skip (default) or overwrite`, Code.InvalidArgument);
      }
      // Every limit and every entry is checked before the first write (zip-archive.ts); then one write per entry.
      const entries = await readImportArchive(req.importZip, limits, ctx.signal);
      const { results, succeeded } = await importEntries(store, req.namespace, entries, policy, { now, hash: sha256, signal: ctx.signal, indexed: async () => indexed(req.namespace) });
      return { total: results.length, succeeded, results };
    },

    async *exportConfigs(req) {
      checkTarget(req.namespace);
      const ids = await store.list(req.namespace);
      // Read while the archive is written, a few ahead: neither memory nor the store's load grows with the namespace.
      const read = readAhead(ids.length, (i) => store.get(req.namespace, ids[i]));
      const entries = ids.map((configId, i) => ({
        configId,
        read: async () => {
          const config = await read(i);
          if (config) return config.data;
          // The archive already names it: a config removed while its archive is written cannot be left out any more.
          throw new ConnectError(`config "${configId}" was deleted while the archive was being written: export again`, Code.Aborted);
        },
      }));
      let first = true;
      for await (const chunk of writeExportArchive(entries)) {
        yield {
          body: { contentType: first ? "application/zip" : "", data: chunk },
          fileName: first ? `${req.namespace}_configs_${now()}.zip` : "",
        };
        first = false;
      }
    },

    async *watchConfig(req, ctx: HandlerContext) {
      checkTarget(req.namespace, req.configId);
      // A large config's change reaches its many watchers over several turns of the event loop, not all in one.
      const message = async (op: string, config?: ConfigRecord) => {
        if (config === undefined) return create(WatchConfigResponseSchema, { op, configId: req.configId });
        await paceFanOut(config.data.length);
        return watchMessageOf(config, op);
      };
      // Subscribe before the first read so that no change between the two is lost.
      const changes = watchChanges(store, (c: ConfigChange) => c.namespace === req.namespace && c.configId === req.configId, ctx.signal);
      try {
        const first = await store.get(req.namespace, req.configId);
        // The version the client has (or last saw removed): an event at or below it was published before the read
        // that produced what the client has, and is dropped as already seen.
        let seen = first?.version ?? 0;
        let present = first !== undefined;
        yield await message("current", first);
        // From here on a store outage (a failover) delays the next message instead of ending the watch.
        const read = <T>(r: () => Promise<T>) => readThroughOutage(r, ctx.signal);
        for await (const change of changes) {
          if (change === "resync") {
            const now = await read(() => store.get(req.namespace, req.configId));
            // Set, not raised: a store that lost its data (Redis restarted without persistence) counts versions from 1
            // again, and those new versions must not pass for already seen. The resync's re-read is the new baseline.
            seen = now?.version ?? 0;
            present = now !== undefined;
            yield await message("resync", now);
            continue;
          }
          if (change.op === "remove") {
            // A removal of a version older than the one shown was followed by a re-creation the client already has.
            if (!present || change.version < seen) continue;
            present = false;
            seen = change.version;
            yield await message("remove");
            continue;
          }
          // Published before the read that produced what the client has: already seen — unless the config is gone (its
          // removal shown, and every event from here on published after it): then a version at or below `seen` is the
          // config made again after its history went too (its namespace deleted), counting from 1 again, and is sent.
          if (change.version <= seen && present) continue;
          // Later changes may already have landed: send the version this event announced, from the history if needed,
          // or the current state if that version is gone from the history too. With more changes queued it is not the
          // current one: read the history first (one round trip, not two, for a watcher behind a burst of writes).
          const fromHistory = () => read(() => store.version(req.namespace, req.configId, change.version));
          const fromCurrent = () => read(() => store.get(req.namespace, req.configId));
          let record: ConfigRecord | undefined;
          if (changes.pending > 0) record = (await fromHistory()) ?? (await fromCurrent());
          else {
            const current = await fromCurrent();
            record = current?.version === change.version ? current : ((await fromHistory()) ?? current);
          }
          if (record === undefined) continue; // removed since: its remove event follows
          seen = record.version;
          present = true;
          yield await message(change.op, record);
        }
      } finally {
        changes.close(); // also when the watch ends before its change loop (a failed read, a HEAD, a cancel)
      }
    },
  };
}
