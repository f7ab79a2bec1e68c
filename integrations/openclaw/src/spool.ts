// Commits waiting for skald. A turn's commit is written here before it is sent and removed once
// skald answered `committed` or `duplicate`; while skald is unreachable it stays, and the next
// call of the same session sends it first. Replaying is safe because skald keys every commit
// by the host's advancement key: a commit it already stored comes back `duplicate`.

import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** One commit as it goes to `POST /v1/sessions/{session}/commit-turn`. */
export interface SpooledCommit {
  session: string;
  body: { advancementKey: string } & Record<string, unknown>;
}

export class CommitSpool {
  private sequence = 0;

  constructor(private readonly dir: string | undefined) {}

  /** Writes the commit durably; the name orders commits by when they were taken. */
  async put(commit: SpooledCommit): Promise<string | undefined> {
    if (!this.dir) return undefined;
    await mkdir(this.dir, { recursive: true });
    const digest = createHash("sha256").update(commit.session).update("\0").update(commit.body.advancementKey).digest("hex");
    const name = `${String(Date.now()).padStart(15, "0")}-${String(this.sequence++).padStart(6, "0")}-${digest.slice(0, 24)}.json`;
    const path = join(this.dir, name);
    // Written under a temporary name and renamed: a crash never leaves half a commit.
    await writeFile(`${path}.tmp`, JSON.stringify(commit));
    await rename(`${path}.tmp`, path);
    return name;
  }

  /** Forgets a commit skald took. */
  async remove(name: string | undefined): Promise<void> {
    if (!this.dir || !name) return;
    await rm(join(this.dir, name), { force: true });
  }

  /** Moves a commit skald refused (a 4xx) aside, kept for a person to look at. */
  async reject(name: string | undefined, reason: string): Promise<void> {
    if (!this.dir || !name) return;
    const rejected = join(this.dir, "rejected");
    await mkdir(rejected, { recursive: true });
    await writeFile(join(rejected, `${name}.reason.txt`), reason);
    await rename(join(this.dir, name), join(rejected, name));
  }

  /** The waiting commits of `session` (all sessions when absent), oldest first. */
  async pending(session?: string): Promise<Array<{ name: string; commit: SpooledCommit }>> {
    if (!this.dir) return [];
    let names: string[];
    try {
      names = (await readdir(this.dir)).filter((name) => name.endsWith(".json")).sort();
    } catch {
      return [];
    }
    const out: Array<{ name: string; commit: SpooledCommit }> = [];
    for (const name of names) {
      try {
        const commit = JSON.parse(await readFile(join(this.dir, name), "utf8")) as SpooledCommit;
        if (session === undefined || commit.session === session) out.push({ name, commit });
      } catch {
        // Removed by a concurrent flush since the listing.
      }
    }
    return out;
  }
}
