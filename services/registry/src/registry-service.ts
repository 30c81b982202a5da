import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  type ChooseInstanceResponse,
  ChooseInstanceResponseSchema,
  type Instance,
  InstanceSchema,
  type KeepaliveRequest,
  KeepaliveResponseSchema,
  type RegisterInstanceRequest,
  RegistryService,
  ServiceStatSchema,
  WatchInstancesResponseSchema,
  WatchServicesResponseSchema,
} from "@gov/api/gen/gov/registry/v1/registry_pb";
import { checkNamespace, checkNewNamespace, mapInTurns, perRecord, withInvisibleWrittenOut as shown, type NamespaceRule } from "@gov/service-kit";
import { chooseWeighted } from "./choose-instance.js";
import { keepInstanceAlive, KeptInstanceGone } from "./keepalive.js";
import type { InstanceRecord, RegistryStore } from "./store/registry-store.js";
import type { TopologyRecorder } from "./topology.js";
import {
  checkHost,
  checkInstanceId,
  checkMetadata,
  checkPort,
  checkSchema,
  checkServiceId,
  checkTtl,
  checkWeight,
  checkWritableServiceId,
  instanceIdOf,
} from "./validation.js";
import { watchInstances } from "./watch-instances.js";
import { watchServices } from "./watch-services.js";

export interface RegistryServiceDeps {
  store: RegistryStore;
  /** Every namespace that receives a service is indexed (`@gov/namespaces`; before the write, cached per process). */
  namespaces?: { add(namespace: string): Promise<void> };
  namespaceRule: NamespaceRule;
  /** gov.registry.instance-ttl, in ms: how long an ephemeral instance lives without renewal by default. */
  instanceTtlMs: number;
  now?: () => number;
  /** [0, 1); Math.random by default (tests may fix it). */
  random?: () => number;
  /** Records who discovers whom (X-Gov-Consumer) for the topology; none = nothing recorded. */
  topology?: TopologyRecorder;
}

// Store records are immutable: the message made from one, and `/lb`'s answer around it, are made once (a message of
// the output type is passed on by the transport as it is).
export const toInstance = perRecord(
  (r: InstanceRecord): Instance =>
    create(InstanceSchema, {
      instanceId: r.instanceId,
      serviceId: r.serviceId,
      schema: r.schema,
      host: r.host,
      port: r.port,
      weight: r.weight,
      isEphemeral: r.isEphemeral,
      ttlAt: r.ttlAt === undefined ? undefined : timestampFromMs(r.ttlAt),
      metadata: { ...r.metadata },
      isExpired: false,
    }),
);
/** Errors reading a keepalive's later messages that refuse the message (not the client going away): they end the stream. */
const REFUSALS = new Set([Code.InvalidArgument, Code.PermissionDenied, Code.Unauthenticated, Code.ResourceExhausted]);

const chosenResponseOf = perRecord((r: InstanceRecord): ChooseInstanceResponse => create(ChooseInstanceResponseSchema, { instance: toInstance(r) }));

// Names written out where a character would not show: a 404 naming "order\u200b" must not read as naming "order".
const instanceNotFound = (ns: string, serviceId: string, instanceId: string) =>
  new ConnectError(
    `instance "${shown(instanceId)}" of service "${shown(serviceId)}" is not registered in namespace "${shown(ns)}" (or it expired): register it again with PUT …/services/${shown(serviceId)}/instances`,
    Code.NotFound,
  );

export function createRegistryService(deps: RegistryServiceDeps): ServiceImpl<typeof RegistryService> {
  const { store } = deps;
  const now = deps.now ?? Date.now;
  const checkTarget = (ns: string, serviceId?: string, instanceId?: string) => {
    checkNamespace(ns, deps.namespaceRule);
    if (serviceId !== undefined) checkServiceId(serviceId);
    if (instanceId !== undefined) checkInstanceId(serviceId!, instanceId);
  };

  /** Validates and stores a registration; the ttl is 0 for a fixed instance. */
  const register = async (req: RegisterInstanceRequest): Promise<{ instanceId: string; ttlAt?: number; ttlMs: number }> => {
    checkNewNamespace(req.namespace, deps.namespaceRule);
    checkWritableServiceId(req.serviceId);
    checkSchema(req.schema);
    checkHost(req.host);
    checkPort(req.port);
    const weight = req.weight ?? 1;
    checkWeight(weight);
    checkMetadata(req.metadata);
    const isEphemeral = req.isEphemeral ?? true;
    if (req.ttl && !isEphemeral) throw new ConnectError("ttl is for ephemeral instances: a fixed instance (isEphemeral false) never expires, so leave ttl out", Code.InvalidArgument);
    const ttlMs = isEphemeral ? (req.ttl ? checkTtl(req.ttl.seconds, req.ttl.nanos) : deps.instanceTtlMs) : 0;
    const at = now();
    const instanceId = instanceIdOf(req.serviceId, req.schema, req.host, req.port);
    await deps.namespaces?.add(req.namespace);
    await store.register(
      req.namespace,
      {
        instanceId,
        serviceId: req.serviceId,
        schema: req.schema,
        host: req.host,
        port: req.port,
        weight,
        isEphemeral,
        ...(isEphemeral ? { ttlAt: at + ttlMs } : {}),
        ttlMs,
        metadata: { ...req.metadata },
      },
      at,
    );
    return { instanceId, ttlMs, ...(isEphemeral ? { ttlAt: at + ttlMs } : {}) };
  };

  return {
    async listServices(req) {
      checkTarget(req.namespace);
      return { serviceIds: await store.listServices(req.namespace) };
    },

    async putService(req) {
      checkNewNamespace(req.namespace, deps.namespaceRule);
      checkWritableServiceId(req.serviceId);
      await deps.namespaces?.add(req.namespace);
      return { created: await store.putService(req.namespace, req.serviceId, now()) };
    },

    async deleteService(req) {
      checkTarget(req.namespace, req.serviceId);
      const result = await store.deleteService(req.namespace, req.serviceId, now());
      if (result === "not_found") throw new ConnectError(`service "${shown(req.serviceId)}" does not exist in namespace "${shown(req.namespace)}"`, Code.NotFound);
      if (result === "has_instances") {
        throw new ConnectError(
          `service "${shown(req.serviceId)}" still has live instances: deregister them first (DELETE …/instances/{instanceId}) or let them expire, then delete the service`,
          Code.FailedPrecondition,
        );
      }
      return { removed: true };
    },

    async listInstances(req, ctx) {
      checkTarget(req.namespace, req.serviceId);
      const instances = await store.listInstances(req.namespace, req.serviceId, now());
      deps.topology?.discovered(ctx, req.namespace, req.serviceId, instances.length > 0);
      const made = mapInTurns(instances, toInstance); // a large service's messages a few ms at a time
      return { instances: made instanceof Promise ? await made : made };
    },

    async registerInstance(req) {
      const { instanceId } = await register(req);
      return { registered: true, instanceId };
    },

    async deregisterInstance(req) {
      checkTarget(req.namespace, req.serviceId, req.instanceId);
      if (!(await store.deregister(req.namespace, req.serviceId, req.instanceId, now()))) throw instanceNotFound(req.namespace, req.serviceId, req.instanceId);
      return { removed: true };
    },

    async renewInstance(req) {
      checkTarget(req.namespace, req.serviceId, req.instanceId);
      const renewed = await store.renew(req.namespace, req.serviceId, req.instanceId, now());
      if (!renewed) throw instanceNotFound(req.namespace, req.serviceId, req.instanceId);
      return { renewed: true, ttlAt: renewed.ttlAt === undefined ? undefined : timestampFromMs(renewed.ttlAt) };
    },

    async setInstanceMetadata(req) {
      checkTarget(req.namespace, req.serviceId, req.instanceId);
      checkMetadata(req.metadata);
      if (!(await store.setMetadata(req.namespace, req.serviceId, req.instanceId, { ...req.metadata }, now()))) {
        throw instanceNotFound(req.namespace, req.serviceId, req.instanceId);
      }
      return { changed: true };
    },

    async getServiceStats(req) {
      checkTarget(req.namespace);
      // The counts of the last sweep (the stats worker's, every 10 s): one read, however many services and instances.
      return { stats: (await store.sweptStats(req.namespace)).map((s) => create(ServiceStatSchema, s)) };
    },

    async chooseInstance(req, ctx) {
      checkTarget(req.namespace, req.serviceId);
      const instances = await store.listInstances(req.namespace, req.serviceId, now());
      deps.topology?.discovered(ctx, req.namespace, req.serviceId, instances.length > 0);
      const chosen = chooseWeighted(instances, deps.random);
      if (!chosen) {
        throw new ConnectError(
          `service "${req.serviceId}" has no live instance of weight above 0 in namespace "${req.namespace}": register one (PUT …/services/${req.serviceId}/instances)`,
          Code.NotFound,
        );
      }
      return chosenResponseOf(chosen);
    },

    async *watchInstances(req, ctx: HandlerContext) {
      checkTarget(req.namespace, req.serviceId);
      for await (const e of watchInstances(store, req.namespace, req.serviceId, ctx.signal, now)) {
        // a watching client (the SDK's discovery cache) keeps using the service: its edge stays seen while it watches
        deps.topology?.discovered(ctx, req.namespace, req.serviceId, "instances" in e ? e.instances.length > 0 : "instance" in e);
        const made = "instances" in e ? mapInTurns(e.instances, toInstance) : undefined;
        yield create(WatchInstancesResponseSchema, {
          op: e.op,
          serviceId: req.serviceId,
          hash: e.hash,
          ...(made ? { instances: made instanceof Promise ? await made : made } : {}),
          ...("instance" in e ? { instanceId: e.instance.instanceId, instance: toInstance(e.instance) } : {}),
          ...("instanceId" in e ? { instanceId: e.instanceId } : {}),
        });
      }
    },

    async *watchServices(req, ctx: HandlerContext) {
      checkTarget(req.namespace);
      for await (const e of watchServices(store, req.namespace, ctx.signal)) {
        yield create(WatchServicesResponseSchema, e); // an event has the message's fields
      }
    },

    async *keepalive(requests: AsyncIterable<KeepaliveRequest>, ctx: HandlerContext) {
      const messages = requests[Symbol.asyncIterator]();
      const first = await messages.next();
      const reg = first.done ? undefined : first.value.register;
      if (!reg) throw new ConnectError("the first keepalive message must carry `register` with the instance to keep alive (as for RegisterInstance)", Code.InvalidArgument);
      if (reg.isEphemeral === false) throw new ConnectError("a keepalive keeps an ephemeral instance alive: leave isEphemeral out (or true); register a fixed instance with RegisterInstance", Code.InvalidArgument);
      const { instanceId, ttlAt, ttlMs } = await register(reg);
      yield create(KeepaliveResponseSchema, { instanceId, ttlAt: timestampFromMs(ttlAt!) });
      const target = { namespace: reg.namespace, serviceId: reg.serviceId, instanceId, ttlMs };
      // Later messages are pings; one carrying `register` again ends the stream with a refusal rather than being ignored,
      // and so does one the caller's interceptors refuse (a `register` for a namespace the user may not write): a failed
      // read of the client's side is otherwise taken for the client going away (keepalive.ts), which ends it cleanly.
      let refused: ConnectError | undefined;
      const nextMessage = () =>
        messages.next().catch((err: unknown) => {
          if (err instanceof ConnectError && REFUSALS.has(err.code)) refused = err;
          throw err;
        });
      const pings = (async function* () {
        for (let m = await nextMessage(); !m.done; m = await nextMessage()) {
          if (m.value.register) {
            refused = new ConnectError("only the first keepalive message carries `register`: later messages are pings (empty); open a new stream to register another instance", Code.InvalidArgument);
            return;
          }
          yield m.value;
        }
      })();
      try {
        for await (const beat of keepInstanceAlive(store, target, pings, ctx.signal, now)) {
          yield create(KeepaliveResponseSchema, { instanceId, ttlAt: beat.ttlAt === undefined ? undefined : timestampFromMs(beat.ttlAt) });
        }
        if (refused) throw refused;
      } catch (err) {
        if (!(err instanceof KeptInstanceGone)) throw err; // refusals and store failures keep their own answer
        throw new ConnectError(
          `instance "${instanceId}" of service "${reg.serviceId}" was deregistered or expired while its keepalive was open: open a new keepalive to register it again`,
          Code.NotFound,
        );
      }
    },
  };
}
