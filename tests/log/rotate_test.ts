/**
 * Tests of lib/log/rotate.ts (Multus `logOptions`): size rotation with numbered backups,
 * the backup count and age limits, following a file another writer rotated, several
 * processes logging and rotating at once (no line lost, split or doubled), the compress
 * notice, and validation of the `logOptions` value. Real files in a temp directory.
 */

import assert from "node:assert/strict";
import {
  createLogger,
  LOG_OPTIONS_DEFAULTS,
  logOptionsIssues,
  type LogRotation,
  logRotation,
  rotateLogFile,
  RotatingLogFile,
} from "../../lib/log/mod.ts";

const enc = new TextEncoder();
const DAY = 24 * 60 * 60 * 1000;

function rotation(over: Partial<LogRotation> = {}): LogRotation {
  return { maxBytes: 100, maxBackups: 0, maxAgeMs: 0, compress: false, ...over };
}

function line(i: number): Uint8Array {
  return enc.encode(`line ${String(i).padStart(4, "0")} ${"x".repeat(20)}\n`); // 31 bytes
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Lines of the file and its backups, oldest first. */
function allLines(path: string): string[] {
  const files: string[] = [];
  for (let n = 1; exists(`${path}.${n}`); n++) files.unshift(`${path}.${n}`);
  files.push(path);
  return files.flatMap((f) => Deno.readTextFileSync(f).split("\n").filter(Boolean));
}

async function withDir(fn: (dir: string) => Promise<void> | void): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "manifold-rotate-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("RotatingLogFile: rotates before a write would pass maxBytes; every line kept in order", () =>
  withDir((dir) => {
    const path = `${dir}/m.log`;
    const file = new RotatingLogFile(path, rotation({ maxBytes: 100 }));
    try {
      for (let i = 0; i < 10; i++) file.write(line(i)); // 3 lines (93 bytes) fit in a file
    } finally {
      file.close();
    }
    for (const f of [path, `${path}.1`, `${path}.2`, `${path}.3`]) {
      assert.ok(Deno.statSync(f).size <= 100, f);
    }
    assert.equal(exists(`${path}.4`), false);
    assert.equal(Deno.statSync(path).mode! & 0o777, 0o600);
    assert.deepEqual(
      allLines(path),
      Array.from({ length: 10 }, (_, i) => `line ${String(i).padStart(4, "0")} ${"x".repeat(20)}`),
    );
  }));

Deno.test("RotatingLogFile: maxBackups keeps the newest N backups only", () =>
  withDir((dir) => {
    const path = `${dir}/m.log`;
    const file = new RotatingLogFile(path, rotation({ maxBytes: 40, maxBackups: 2 })); // 1 line a file
    try {
      for (let i = 0; i < 6; i++) file.write(line(i));
    } finally {
      file.close();
    }
    assert.equal(exists(`${path}.3`), false);
    assert.match(Deno.readTextFileSync(path), /^line 0005 /);
    assert.match(Deno.readTextFileSync(`${path}.1`), /^line 0004 /);
    assert.match(Deno.readTextFileSync(`${path}.2`), /^line 0003 /);
  }));

Deno.test("RotatingLogFile: a line longer than maxBytes gets a file of its own", () =>
  withDir((dir) => {
    const path = `${dir}/m.log`;
    const file = new RotatingLogFile(path, rotation({ maxBytes: 10 }));
    try {
      file.write(line(0));
      file.write(line(1));
    } finally {
      file.close();
    }
    assert.match(Deno.readTextFileSync(`${path}.1`), /^line 0000 [x]+\n$/);
    assert.match(Deno.readTextFileSync(path), /^line 0001 [x]+\n$/);
  }));

Deno.test("RotatingLogFile: when rotation is impossible the file keeps growing, nothing is lost", () =>
  withDir((dir) => {
    const path = `${dir}/m.log`;
    Deno.mkdirSync(`${path}.lock`); // the lock file cannot be opened
    const file = new RotatingLogFile(path, rotation({ maxBytes: 40 }));
    try {
      for (let i = 0; i < 3; i++) file.write(line(i));
    } finally {
      file.close();
    }
    assert.equal(exists(`${path}.1`), false);
    assert.equal(Deno.readTextFileSync(path).split("\n").filter(Boolean).length, 3);
  }));

Deno.test("rotateLogFile: maxAge removes backups last written too long ago", () =>
  withDir((dir) => {
    const path = `${dir}/m.log`;
    const now = Date.now();
    for (const [n, ageDays] of [[1, 1], [2, 3], [3, 10], [4, 20]]) {
      Deno.writeTextFileSync(`${path}.${n}`, `backup ${n}\n`);
      const t = new Date(now - ageDays * DAY);
      Deno.utimeSync(`${path}.${n}`, t, t);
    }
    Deno.writeTextFileSync(path, "current\n");
    const outcome = rotateLogFile(
      path,
      Deno.statSync(path).ino,
      rotation({ maxAgeMs: 5 * DAY }),
      now,
    );
    assert.equal(outcome.rotated, true);
    // .1 = current, .2 = 1 day, .3 = 3 days; 10 and 20 days (now .4, .5) are gone.
    assert.deepEqual(outcome.removed, [`${path}.4`, `${path}.5`]);
    assert.equal(Deno.readTextFileSync(`${path}.1`), "current\n");
    assert.equal(Deno.readTextFileSync(`${path}.3`), "backup 2\n");
    assert.equal(exists(`${path}.4`), false);
    assert.equal(exists(path), false, "the next write creates the file");
  }));

Deno.test("rotateLogFile: does nothing when another process rotated the file meanwhile", () =>
  withDir((dir) => {
    const path = `${dir}/m.log`;
    Deno.writeTextFileSync(path, "old\n");
    const ino = Deno.statSync(path).ino;
    Deno.renameSync(path, `${path}.1`); // the other process's rotation
    Deno.writeTextFileSync(path, "new\n");
    assert.deepEqual(rotateLogFile(path, ino, rotation()), { rotated: false, removed: [] });
    assert.equal(Deno.readTextFileSync(path), "new\n");
    assert.equal(exists(`${path}.2`), false);
  }));

Deno.test("RotatingLogFile: a writer follows the path after another writer rotated it", () =>
  withDir((dir) => {
    const path = `${dir}/m.log`;
    const a = new RotatingLogFile(path, rotation({ maxBytes: 70 }));
    const b = new RotatingLogFile(path, rotation({ maxBytes: 70 }));
    try {
      a.write(line(0));
      b.write(line(1));
      a.write(line(2)); // rotates: lines 0, 1 → .1
      b.write(line(3)); // b's descriptor is .1 now: b reopens the path
    } finally {
      a.close();
      b.close();
    }
    assert.equal(Deno.readTextFileSync(`${path}.1`).split("\n").filter(Boolean).length, 2);
    assert.match(Deno.readTextFileSync(path), /^line 0002 .*\nline 0003 /);
  }));

Deno.test("RotatingLogFile: four processes logging at once lose, split and double no line", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/m.log`;
    const module = new URL("../../lib/log/rotate.ts", import.meta.url).href;
    const script = `
      import { RotatingLogFile } from ${JSON.stringify(module)};
      const id = Deno.args[0];
      const f = new RotatingLogFile(${JSON.stringify(path)},
        { maxBytes: 2000, maxBackups: 0, maxAgeMs: 0, compress: false });
      const enc = new TextEncoder();
      for (let i = 0; i < 300; i++) f.write(enc.encode(\`w\${id} \${i} \${"y".repeat(i % 50)}\\n\`));
      f.close();`;
    const children = [0, 1, 2, 3].map((id) =>
      new Deno.Command(Deno.execPath(), {
        args: ["eval", "--quiet", script, String(id)],
        stdout: "null",
        stderr: "piped",
      }).output()
    );
    for (const out of await Promise.all(children)) {
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    }
    const lines = allLines(path);
    assert.equal(lines.length, 1200);
    assert.equal(new Set(lines).size, 1200);
    for (const l of lines) assert.match(l, /^w[0-3] \d+ y*$/);
    for (let id = 0; id < 4; id++) {
      const mine = lines.filter((l) => l.startsWith(`w${id} `)).map((l) => Number(l.split(" ")[1]));
      assert.deepEqual(mine, [...mine].sort((x, y) => x - y), `writer ${id} in order`);
    }
    assert.ok(exists(`${path}.10`), "rotated many times");
  });
});

Deno.test("createLogger with logOptions: rotates the file, warns that compress is not done", () =>
  withDir((dir) => {
    const path = `${dir}/m.log`;
    Deno.writeTextFileSync(path, "z".repeat(1024 * 1024 - 10) + "\n");
    const log = createLogger({
      level: "debug",
      file: path,
      toStderr: false,
      logOptions: { maxSize: 1, maxBackups: 1 },
    }).with({ plugin: "manifold" });
    log.info("after");
    log.with({ pod: "a" }).info("again");
    const [notice, after, again] = Deno.readTextFileSync(path).trim().split("\n").map((l) =>
      JSON.parse(l)
    );
    assert.equal(notice.level, "warning");
    assert.match(notice.msg, /compress is not implemented/);
    assert.equal(after.msg, "after");
    assert.equal(again.pod, "a");
    assert.equal(Deno.statSync(`${path}.1`).size, 1024 * 1024 - 9);

    // compress: false rotates without the notice.
    const quiet = createLogger({
      level: "debug",
      file: path,
      toStderr: false,
      logOptions: { maxSize: 1, compress: false },
    });
    Deno.writeTextFileSync(path, "z".repeat(1024 * 1024 - 10) + "\n");
    quiet.info("plain");
    assert.deepEqual(
      Deno.readTextFileSync(path).trim().split("\n").map((l) => JSON.parse(l).msg),
      ["plain"],
    );
  }));

Deno.test("logRotation: Multus defaults for missing keys (100 MB, 5 days, 5 backups, compress)", () => {
  assert.deepEqual(LOG_OPTIONS_DEFAULTS, {
    maxSize: 100,
    maxAge: 5,
    maxBackups: 5,
    compress: true,
  });
  assert.deepEqual(logRotation({}), {
    maxBytes: 100 * 1024 * 1024,
    maxBackups: 5,
    maxAgeMs: 5 * DAY,
    compress: true,
  });
  assert.deepEqual(logRotation({ maxSize: 1, maxAge: 0, maxBackups: 0, compress: false }), {
    maxBytes: 1024 * 1024,
    maxBackups: 0,
    maxAgeMs: 0,
    compress: false,
  });
});

Deno.test("logOptionsIssues: integers in range, a boolean compress, no other key", () => {
  assert.deepEqual(logOptionsIssues({}), []);
  assert.deepEqual(logOptionsIssues({ maxSize: 10, maxAge: 0, maxBackups: 0, compress: true }), []);
  const bad: [unknown, RegExp][] = [
    [{ maxSize: 0 }, /integer from 1 to 1048576 \(megabytes\)\n {2}→ at logOptions\.maxSize/],
    [{ maxSize: 1.5 }, /at logOptions\.maxSize/],
    [{ maxSize: "10" }, /at logOptions\.maxSize/],
    [{ maxAge: -1 }, /at logOptions\.maxAge/],
    [{ maxBackups: 1e9 }, /at logOptions\.maxBackups/],
    [{ compress: "yes" }, /Expected a boolean\n {2}→ at logOptions\.compress/],
    [{ maxsize: 10 }, /Unknown key "maxsize"/],
    ["100M", /Expected an object/],
    [null, /Expected an object/],
    [[1], /Expected an object/],
  ];
  for (const [value, re] of bad) {
    const issues = logOptionsIssues(value);
    assert.equal(issues.length, 1, JSON.stringify(value));
    assert.match(issues[0], re);
  }
});
