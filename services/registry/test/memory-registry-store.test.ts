import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import { describeRegistryStoreContract } from "./registry-store.contract.js";

const shared = createMemoryRegistryStore();
// Two "opens" of the embedded store are the same in-process data set; closing is a no-op for the shared one.
describeRegistryStoreContract("embedded", async () => ({ ...shared, close: async () => {} }));
