import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import JSZip from "jszip";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");

/** The first ```bash block of the README's "A walk through the config API" section, as a user would copy it. */
function walkThrough(): string {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## A walk through the config API"));
  const block = /```bash\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error("README.md: no ```bash block in the section \"A walk through the config API\"");
  return block[1];
}

/** Its commands, one per line, without the explaining comment (`   # …`) and with that comment kept for checks. */
function commandsOf(block: string): { command: string; comment: string }[] {
  return block
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.trimStart().startsWith("#"))
    .map((line) => {
      const at = line.search(/\s{2,}#\s/);
      return at < 0 ? { command: line.trim(), comment: "" } : { command: line.slice(0, at).trim(), comment: line.slice(at).replace(/^\s*#\s*/, "") };
    });
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** What each step must print (its stdout, trimmed), by the command as the README writes it. */
const CHECKS: Record<string, (out: string, dir: string) => void | Promise<void>> = {
  [`TOKEN=$(curl -s -X POST -d '{"password":"change-me"}' http://localhost:8080/v1/authenticate/root/login | jq -r .accessToken)`]: (out) => expect(out).toBe(""),
  'H="Authorization: Bearer $TOKEN"': (out) => expect(out).toBe(""),
  "B=http://localhost:8080/v1/namespaces/%7Bdev%7D": (out) => expect(out).toBe(""),
  "curl -H \"$H\" -X PUT --data-binary $'port: 8080\\n' $B/configs/app.yaml": (out) => expect(out).toBe("true"),
  "curl -H \"$H\" -X PUT --data-binary $'port: 8081\\n' $B/configs/app.yaml": (out) => expect(["true", "false"]).toContain(out), // the second and third PUT: see below
  "curl -H \"$H\" $B/configs": (out) => expect(JSON.parse(out)).toEqual(["app.yaml"]),
  "curl -H \"$H\" $B/configs/app.yaml": (out) =>
    expect(JSON.parse(out)).toEqual({ configId: "app.yaml", data: "port: 8081\n", hash: sha256("port: 8081\n"), version: 2, createTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/) }),
  "curl -H \"$H\" $B/configs/app.yaml/versions": (out) => expect(JSON.parse(out)).toEqual([{ configId: "app.yaml", version: 1, op: "set", opTime: expect.any(String) }]),
  "curl -H \"$H\" $B/configs/app.yaml/versions/1": (out) => expect(JSON.parse(out)).toMatchObject({ configId: "app.yaml", version: 1, data: "port: 8080\n", op: "set", opTime: expect.any(String) }),
  "curl -H \"$H\" -X PUT $B/configs/app.yaml/to/1": (out) => expect(out).toBe("true"),
  "curl -H \"$H\" -X PUT --data-binary 'x' $B/configs/dir%2Fdb.json": (out) => expect(out).toBe("true"),
  "curl -H \"$H\" -o configs.zip $B/configs/export": async (out, dir) => {
    expect(out).toBe("");
    const zip = await JSZip.loadAsync(readFileSync(join(dir, "configs.zip")));
    expect(Object.keys(zip.files).sort()).toEqual(["app.yaml", "dir/db.json"]);
    expect(await zip.file("app.yaml")!.async("string")).toBe("port: 8080\n");
  },
  "curl -H \"$H\" -X DELETE $B/configs/app.yaml": (out) => expect(out).toBe("true"),
  'curl -H "$H" -F importZip=@configs.zip "$B/configs?policy=overwrite"': (out) => {
    const answer = JSON.parse(out);
    expect(answer).toMatchObject({ total: 2, succeeded: 1 });
    expect(answer.results).toEqual(
      expect.arrayContaining([expect.objectContaining({ configId: "app.yaml", outcome: "created" }), expect.objectContaining({ configId: "dir/db.json", outcome: "unchanged" })]),
    );
  },
  "curl -H \"$H\" -N $B/configs/app.yaml/watch": (out) => {
    const events = [...out.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]) as { op: string; config?: { data: string } });
    expect(events[0]).toMatchObject({ op: "current", configId: "app.yaml", config: { data: "port: 8080\n" } });
    expect(events[1]).toMatchObject({ op: "set", config: { data: "changed while watching\n" } }); // the change the test makes
  },
};

describe("the README's curl walk-through, run as written against a started server", () => {
  let server: ChildProcess;
  let url = "";
  let serverOut = "";
  let dir = "";

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "gov-walkthrough-"));
    const env = { ...process.env, PORT: "0", GOV_GRPC_PORT: "0", MANAGEMENT_SERVER_PORT: "0", HOST: "127.0.0.1", REDIS_URL: "", GOV_CONFIG: "", GOV_SUPER_PASSWORD: "change-me" };
    server = spawn(process.execPath, ["--import", "tsx", join(root, "apps/main.ts")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    server.stdout!.on("data", (d) => (serverOut += d));
    server.stderr!.on("data", (d) => (serverOut += d));
    url = await vi.waitFor(
      () => {
        if (server.exitCode !== null) throw new Error(`the server exited (${server.exitCode}):\n${serverOut}`);
        const listening = /listening on (http:\/\/\S+)/.exec(serverOut);
        if (!listening) throw new Error(`the server has not said where it listens yet:\n${serverOut}`);
        return listening[1];
      },
      { timeout: 30_000, interval: 100 },
    );
  }, 40_000);

  afterAll(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((r) => server.once("exit", r));
      server.kill("SIGTERM");
      await exited;
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("every step prints what the README says", async () => {
    const steps = commandsOf(walkThrough());
    for (const { command } of steps) expect(Object.keys(CHECKS), `README step without a check in this test: ${command}`).toContain(command);
    expect(steps.map((s) => s.command)).toContain('curl -H "$H" -o configs.zip $B/configs/export'); // the file the import line names

    // One bash, the steps in order, each framed by markers; the README's address replaced by the started server's.
    // Every curl gets a time limit (the watch never ends by itself) and -sS (no progress meter, errors still shown).
    const script = [
      'curl() { command curl -sS --max-time 6 "$@"; }',
      ...steps.flatMap(({ command }, i) => [`printf '\\n@@step ${i}\\n'`, command.replaceAll("http://localhost:8080", url), `printf '\\n@@rc ${i} %d\\n' $?`]),
    ].join("\n");
    const bash = spawn("bash", ["-c", script], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    bash.stdout.on("data", (d) => (out += d));
    bash.stderr.on("data", (d) => (err += d));
    const exited = new Promise<number | null>((r) => bash.once("exit", r));

    // The watch (last step) prints the current state; a change made meanwhile must arrive as the next event.
    const watchStep = steps.findIndex((s) => s.command.includes("/watch"));
    await expect.poll(() => out.slice(out.indexOf(`@@step ${watchStep}\n`)), { timeout: 15_000, interval: 50 }).toMatch(/"op":"current"/);
    const login = await fetch(`${url}/v1/authenticate/root/login`, { method: "POST", body: JSON.stringify({ password: "change-me" }) });
    const { accessToken } = (await login.json()) as { accessToken: string };
    const put = await fetch(`${url}/v1/namespaces/%7Bdev%7D/configs/app.yaml`, { method: "PUT", body: "changed while watching\n", headers: { authorization: `Bearer ${accessToken}` } });
    expect(await put.json()).toBe(true);
    await exited;

    const outputs = new Map<number, { out: string; rc: number }>();
    for (const m of out.matchAll(/@@step (\d+)\n([\s\S]*?)\n@@rc \1 (\d+)\n/g)) outputs.set(Number(m[1]), { out: m[2].trim(), rc: Number(m[3]) });
    const putResults: string[] = [];
    for (const [i, { command, comment }] of steps.entries()) {
      const result = outputs.get(i);
      expect(result, `step ${i} did not run: ${command}\n${err}`).toBeDefined();
      // curl's 28 is the time limit, which only ends the watch
      expect(result!.rc, `${command}\n${err}`).toBe(command.includes("/watch") ? 28 : 0);
      await CHECKS[command](result!.out, dir);
      // what the comment promises (→ true / → false / a leading true) is what the step printed
      const promised = /(?:→|^)\s*(true|false)\b/.exec(comment)?.[1];
      if (promised) expect(result!.out, `${command}  # ${comment}`).toBe(promised);
      if (command.includes("--data-binary $'port: 8081")) putResults.push(result!.out);
    }
    expect(putResults).toEqual(["true", "false"]); // update, then the same content again: nothing written
  }, 60_000);
});
