import { LARGE_LIST, sortInTurns } from "@gov/service-kit";
import type { InstanceRecord, RegistryChange, RegistryStore } from "./registry-store.js";
import { shouldPublishRenew } from "./registry-store.js";

const live = (r: InstanceRecord, now: number) => r.ttlAt === undefined || r.ttlAt > now;
const byId = (a: InstanceRecord, b: InstanceRecord) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0);

/** Where `instanceId` is in `sorted` (by id), or where it would be inserted. */
function indexOfId(sorted: readonly InstanceRecord[], instanceId: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid].instanceId < instanceId) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * A service's instances by id, with its sorted list of live instances kept between reads (discovery reads it on every
 * `/lb` and list call: copying, filtering and sorting it each time was the largest line of the embedded `/lb`, ~3 µs).
 * A write updates the list in place — a renewal, a metadata change or a registration is one binary search (and a
 * registration of a new id one insertion, a deregistration one removal): dropping the list on every write re-sorted the
 * whole service on the next read, and a 100,000-instance service whose instances renew re-sorted it for nearly every
 * `/lb` (45–130 ms each, the event loop held). Instances dropped as expired (`expire`, often many at once) and the
 * earliest ttl passing leave the list at the next read, in one filtering pass that keeps the order. Only a clock set
 * back before the list was made builds it again from the map.
 */
class Service extends Map<string, InstanceRecord> {
  #listed: InstanceRecord[] | undefined;
  #from = 0;
  #until = 0;
  /** The latest time by which instances were dropped as expired since the list was filtered (they may still be in it). */
  #expiredBy = -Infinity;
  /** Counts the writes (set, delete, expire, clear): a list sorted in turns is kept only if none came meanwhile. */
  #writes = 0;
  /**
   * No instance expires before this time (a lower bound: a renewal moves a ttl later without raising it). Every write
   * drops the expired instances first; without this bound each one scanned the whole service, and registering a
   * 6,000-instance service cost ~300 µs per instance.
   */
  earliestTtl = Infinity;
  /** When the service was created (see RegistryStore.listServiceBirths). */
  constructor(readonly born: number) {
    super();
  }

  override set(id: string, r: InstanceRecord): this {
    this.#writes++;
    if (r.ttlAt !== undefined && r.ttlAt < this.earliestTtl) this.earliestTtl = r.ttlAt;
    const listed = this.#listed;
    if (listed !== undefined) {
      const at = indexOfId(listed, id);
      if (listed[at]?.instanceId === id) listed[at] = r;
      else listed.splice(at, 0, r);
      // the list is reused until its earliest ttl: a record that expires sooner (a shorter ttl) brings that time forward
      if (r.ttlAt !== undefined && r.ttlAt < this.#until) this.#until = r.ttlAt;
    }
    return super.set(id, r);
  }
  override delete(id: string): boolean {
    this.#writes++;
    const listed = this.#listed;
    if (listed !== undefined) {
      const at = indexOfId(listed, id);
      if (listed[at]?.instanceId === id) listed.splice(at, 1);
    }
    return super.delete(id);
  }
  /**
   * Drops an instance that expired by `now`. A sweep drops many at once, and a removal from the list each would move
   * the rest of it each time: the next read filters them all out in one pass instead.
   */
  expire(id: string, now: number): void {
    this.#writes++;
    super.delete(id);
    if (now > this.#expiredBy) this.#expiredBy = now;
  }
  override clear(): void {
    this.#writes++;
    this.#listed = undefined;
    super.clear();
  }

  /** The live instances at `now`, sorted by id; a copy, which the caller may change. */
  liveAt(now: number): InstanceRecord[] {
    if (this.#listed === undefined || now < this.#from) {
      this.#listed = [...this.values()].filter((r) => live(r, now)).sort(byId);
    } else if (now >= this.#until || this.#expiredBy > -Infinity) {
      // still sorted: only what has expired leaves it. A record that could have been dropped as expired (its ttl passed
      // by then) stays only if the map still holds it: a clock set back can read it as live again.
      const expiredBy = this.#expiredBy;
      this.#listed = this.#listed.filter((r) => live(r, now) && (r.ttlAt === undefined || r.ttlAt > expiredBy || this.get(r.instanceId) === r));
    } else return this.#listed.slice();
    return this.#install(this.#listed, now);
  }

  /** `listed` as the list as of `now`: the time it holds until (its earliest ttl) worked out; a copy of it. */
  #install(listed: InstanceRecord[], now: number): InstanceRecord[] {
    this.#listed = listed;
    this.#from = now;
    this.#expiredBy = -Infinity;
    this.#until = Infinity;
    for (const r of listed) if (r.ttlAt !== undefined && r.ttlAt < this.#until) this.#until = r.ttlAt;
    return listed.slice();
  }

  /**
   * `liveAt(now)`; when the list must be built for a large service (its first read, or after a clock set back), sorted
   * a few milliseconds at a time (40,000 instances: 20–40 ms in one piece). A write during the sort is not in what was
   * sorted, so the list is then sorted again; a service written to all along is sorted in one piece at the third try.
   */
  listAt(now: number): InstanceRecord[] | Promise<InstanceRecord[]> {
    if ((this.#listed !== undefined && now >= this.#from) || this.size < LARGE_LIST) return this.liveAt(now);
    return (async () => {
      for (let attempt = 0; attempt < 2; attempt++) {
        const writes = this.#writes;
        const sorted = await sortInTurns([...this.values()].filter((r) => live(r, now)), byId);
        if (this.#listed !== undefined && now >= this.#from) break; // another read built it meanwhile
        if (this.#writes === writes) return this.#install(sorted, now);
      }
      return this.liveAt(now);
    })();
  }
}

/** The embedded store: same behaviour as Redis, held in this process only (for trying the product and tests). */
export function createMemoryRegistryStore(): RegistryStore {
  const namespaces = new Map<string, Map<string, Service>>();
  /** Namespace → service id → live instances at the last sweep. */
  const swept = new Map<string, Map<string, number>>();
  const listeners = new Set<(change: RegistryChange) => void>();

  const emit = (change: RegistryChange) => {
    for (const l of listeners) queueMicrotask(() => l(change));
  };
  const servicesOf = (ns: string, create: boolean) => {
    let services = namespaces.get(ns);
    if (!services && create) namespaces.set(ns, (services = new Map()));
    return services;
  };
  const serviceOf = (ns: string, serviceId: string) => namespaces.get(ns)?.get(serviceId);

  /** Lazy cleanup, as the Redis scripts do before every write to a service. */
  const dropExpired = (ns: string, serviceId: string, service: Service, now: number): number => {
    if (now < service.earliestTtl) return 0;
    let n = 0;
    let earliest = Infinity;
    for (const [id, r] of service) {
      if (live(r, now)) {
        if (r.ttlAt !== undefined && r.ttlAt < earliest) earliest = r.ttlAt;
        continue;
      }
      service.expire(id, now);
      emit({ namespace: ns, serviceId, op: "expired", instanceId: id });
      n++;
    }
    service.earliestTtl = earliest;
    return n;
  };
  const liveInstance = (ns: string, serviceId: string, instanceId: string, now: number) => {
    const service = serviceOf(ns, serviceId);
    if (service) dropExpired(ns, serviceId, service, now);
    return service?.get(instanceId);
  };

  return {
    kind: "embedded",
    async listServices(ns) {
      return [...(namespaces.get(ns)?.keys() ?? [])].sort();
    },
    async listServiceBirths(ns) {
      return new Map([...(namespaces.get(ns) ?? [])].map(([serviceId, service]) => [serviceId, service.born]));
    },
    async putService(ns, serviceId, now = Date.now()) {
      const services = servicesOf(ns, true)!;
      if (services.has(serviceId)) return false;
      services.set(serviceId, new Service(now));
      emit({ namespace: ns, serviceId, op: "service_add" });
      return true;
    },
    async deleteService(ns, serviceId, now) {
      const service = serviceOf(ns, serviceId);
      if (!service) return "not_found";
      dropExpired(ns, serviceId, service, now);
      if (service.size > 0) return "has_instances";
      namespaces.get(ns)!.delete(serviceId);
      swept.get(ns)?.delete(serviceId);
      emit({ namespace: ns, serviceId, op: "service_remove" });
      return "removed";
    },
    async listInstances(ns, serviceId, now) {
      return serviceOf(ns, serviceId)?.listAt(now) ?? [];
    },
    async getInstance(ns, serviceId, instanceId, now) {
      const r = serviceOf(ns, serviceId)?.get(instanceId);
      return r && live(r, now) ? r : undefined;
    },
    async register(ns, instance, now) {
      const services = servicesOf(ns, true)!;
      let service = services.get(instance.serviceId);
      if (!service) {
        services.set(instance.serviceId, (service = new Service(now)));
        emit({ namespace: ns, serviceId: instance.serviceId, op: "service_add" });
      } else dropExpired(ns, instance.serviceId, service, now);
      service.set(instance.instanceId, Object.freeze({ ...instance, metadata: Object.freeze({ ...instance.metadata }) }));
      emit({ namespace: ns, serviceId: instance.serviceId, op: "register", instanceId: instance.instanceId });
    },
    async deregister(ns, serviceId, instanceId, now) {
      if (!liveInstance(ns, serviceId, instanceId, now)) return false;
      serviceOf(ns, serviceId)!.delete(instanceId);
      emit({ namespace: ns, serviceId, op: "deregister", instanceId });
      return true;
    },
    async renew(ns, serviceId, instanceId, now) {
      const r = liveInstance(ns, serviceId, instanceId, now);
      if (!r) return undefined;
      if (r.ttlAt === undefined) return {};
      const ttlAt = now + r.ttlMs;
      serviceOf(ns, serviceId)!.set(instanceId, Object.freeze({ ...r, ttlAt }));
      if (shouldPublishRenew(r.ttlAt, now, r.ttlMs)) emit({ namespace: ns, serviceId, op: "renew", instanceId });
      return { ttlAt };
    },
    async setMetadata(ns, serviceId, instanceId, metadata, now) {
      const r = liveInstance(ns, serviceId, instanceId, now);
      if (!r) return false;
      serviceOf(ns, serviceId)!.set(instanceId, Object.freeze({ ...r, metadata: Object.freeze({ ...metadata }) }));
      emit({ namespace: ns, serviceId, op: "metadata", instanceId });
      return true;
    },
    async stats(ns, now) {
      return [...(namespaces.get(ns) ?? [])]
        .map(([serviceId, service]) => ({ serviceId, instanceCount: [...service.values()].filter((r) => live(r, now)).length }))
        .sort((a, b) => (a.serviceId < b.serviceId ? -1 : a.serviceId > b.serviceId ? 1 : 0));
    },
    async sweep(ns, now, mayWrite) {
      if (mayWrite?.() === false) return 0;
      let n = 0;
      const counts = new Map<string, number>();
      for (const [serviceId, service] of namespaces.get(ns) ?? []) {
        n += dropExpired(ns, serviceId, service, now);
        counts.set(serviceId, service.size);
      }
      swept.set(ns, counts);
      return n;
    },
    async sweptStats(ns) {
      const counts = swept.get(ns);
      return [...(namespaces.get(ns)?.keys() ?? [])].sort().map((serviceId) => ({ serviceId, instanceCount: counts?.get(serviceId) ?? 0 }));
    },
    async countServices(ns) {
      return namespaces.get(ns)?.size ?? 0;
    },
    async deleteNamespace(ns, options) {
      const services = namespaces.get(ns);
      if (options?.onlyIfEmpty && services?.size) return undefined;
      namespaces.delete(ns);
      swept.delete(ns);
      let instances = 0;
      for (const [serviceId, service] of services ?? []) {
        for (const instanceId of service.keys()) emit({ namespace: ns, serviceId, op: "deregister", instanceId });
        instances += service.size;
        emit({ namespace: ns, serviceId, op: "service_remove" });
      }
      return { services: services?.size ?? 0, instances };
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      listeners.clear();
    },
  };
}
