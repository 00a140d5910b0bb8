// The native side of the end-to-end tests: `lembas test-instance` (the core's client behind a
// real WebSocket listener on loopback, driven over JSON lines) and `lembas link` (a native
// device), started from the `lembas` binary the workspace builds. A missing binary fails the
// test that needs it: build it first (`cargo build -p lembas`), or name it in LEMBAS_BIN.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, mkdirSync, writeFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const here = dirname(fileURLToPath(import.meta.url));
// Where cargo put it: CARGO_TARGET_DIR when set (relative to where the tests run, the root).
const targetDir = process.env.CARGO_TARGET_DIR
  ? resolve(process.env.CARGO_TARGET_DIR)
  : join(here, "../../target");
export const LEMBAS = process.env.LEMBAS_BIN ?? join(targetDir, "debug/lembas");

function binary() {
  if (!existsSync(LEMBAS)) {
    throw new Error(`no lembas binary at ${LEMBAS}: run \`cargo build -p lembas\` or set LEMBAS_BIN`);
  }
  return LEMBAS;
}

/** A running `lembas test-instance`: `send(command)`, `next(pred)` over what it prints. */
export class NativeInstance {
  static async start({ token, relay = false }) {
    const child = spawn(binary(), ["test-instance", ...(relay ? ["--relay"] : [])], {
      // The token goes in the environment, never in an argument or a URL.
      env: { PATH: process.env.PATH, LEMBAS_TOKEN: token },
      stdio: ["pipe", "pipe", "inherit"],
    });
    const inst = new NativeInstance(child);
    const first = await inst.next((l) => l.port !== undefined, 10000);
    inst.port = first.port;
    inst.url = first.url;
    return inst;
  }

  constructor(child) {
    this.child = child;
    this.seen = [];
    this.waiters = [];
    this.exited = new Promise((r) => child.on("exit", r));
    createInterface({ input: child.stdout }).on("line", (line) => {
      const v = JSON.parse(line);
      const w = this.waiters.findIndex((w) => w.pred(v));
      if (w >= 0) this.waiters.splice(w, 1)[0].resolve(v);
      else this.seen.push(v);
    });
  }

  /** The first line `pred` accepts, among those not yet taken, or the next to come. */
  next(pred, timeoutMs = 15000) {
    const i = this.seen.findIndex(pred);
    if (i >= 0) return Promise.resolve(this.seen.splice(i, 1)[0]);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no such line from test-instance in ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({ pred, resolve: (v) => (clearTimeout(t), resolve(v)) });
    });
  }

  /** The next client event of this kind (and `pred`). */
  event(kind, pred = () => true, timeoutMs) {
    return this.next((l) => l.event === "client" && l.client.kind === kind && pred(l.client), timeoutMs).then(
      (l) => l.client,
    );
  }

  send(command) {
    this.child.stdin.write(JSON.stringify(command) + "\n");
  }

  async stop() {
    this.child.stdin.end();
    const t = setTimeout(() => this.child.kill("SIGKILL"), 3000);
    await this.exited;
    clearTimeout(t);
  }
}

/** A home for a native device: config.yaml (remote on, `work/` a trusted root) and a login. */
export class NativeHome {
  constructor(token) {
    this.dir = mkdtempSync(join(tmpdir(), "lembas-home-"));
    this.work = join(this.dir, "work");
    mkdirSync(this.work, { recursive: true });
    this.work = realpathSync(this.work);
    mkdirSync(join(this.dir, "config/lembas"), { recursive: true });
    writeFileSync(
      join(this.dir, "config/lembas/config.yaml"),
      `remote:\n  enabled: true\n  roots: [${this.work}]\ntrusted: [${this.work}]\nengine: scripted\n`,
    );
    this.tokenFile = join(this.dir, "token.txt");
    writeFileSync(this.tokenFile, token + "\n", { mode: 0o600 });
    this.env = {
      PATH: process.env.PATH,
      HOME: this.dir,
      XDG_CONFIG_HOME: join(this.dir, "config"),
      XDG_STATE_HOME: join(this.dir, "state"),
    };
  }

  login(url) {
    const r = spawnSync(binary(), ["login", url, "--token-file", this.tokenFile], { env: this.env });
    if (r.status !== 0) throw new Error(`lembas login failed: ${r.stderr}`);
  }

  /** Start `lembas link` (logging at trace, so a test can check the token is in none of it);
   * `stop()` ends it (SIGTERM) and waits. */
  link() {
    const child = spawn(binary(), ["link", "-vv"], { env: this.env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise((r) => child.on("exit", r));
    return {
      child,
      stderr: () => stderr,
      stop: async () => {
        child.kill("SIGTERM");
        await exited;
      },
    };
  }

  remove() {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
