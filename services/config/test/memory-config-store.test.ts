import { createMemoryConfigStore } from "../src/store/memory-config-store.js";
import { describeConfigStoreContract } from "./config-store.contract.js";

const shared = createMemoryConfigStore({ maxVersions: 5 });
// Two "opens" of the embedded store are the same in-process data set; closing is a no-op for the shared one.
describeConfigStoreContract("embedded", async () => ({ ...shared, close: async () => {} }));
