// Types of healthcheck.mjs for deploy/test (the image runs the .mjs with node alone).
export declare const SERVICE_PORTS: Record<"config" | "registry" | "stats" | "worker" | "security", number>;
export declare function managementPort(env: Record<string, string | undefined>, kind: string): number;
