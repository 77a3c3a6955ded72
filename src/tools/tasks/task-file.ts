import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir, unlink, type FileHandle } from 'node:fs/promises';
import { heldPath, OPEN_DIRECTORY, type Workspace } from '../../os/fs/workspace.js';

/** Where tasks' output files go, relative to the workspace root. */
export const TASKS_DIRECTORY = '.toolport/tasks';

const CREATE_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** A task's output file, open for appending until the task ends. */
export interface TaskFile {
  /** The path the model reads it by, relative to the workspace root. */
  readonly relativePath: string;
  write(chunk: Buffer): void;
  /** Flushes and closes the file. */
  close(): Promise<void>;
  /** Closes and removes the file (the task is forgotten, or never started). */
  discard(): Promise<void>;
}

/**
 * Makes the output file of task `id` in the workspace. Each directory is opened without following
 * a symlink and the file is made and removed through the held directory, so a command that
 * replaces `.toolport` with a link cannot make the server write or remove outside the workspace.
 */
export async function createTaskFile(workspace: Workspace, id: string): Promise<TaskFile> {
  const name = `${id}.output`;
  const handle = await withTasksDirectory(workspace, true, (dir) => open(heldPath(dir, name), CREATE_FILE, 0o600));
  // Closes the handle when it ends.
  const stream = handle.createWriteStream();
  const closed = new Promise<void>((resolve) => stream.once('close', resolve));
  stream.on('error', () => {});
  let ended = false;
  const close = async (): Promise<void> => {
    if (!ended) {
      ended = true;
      stream.end();
    }
    await closed;
  };
  return {
    relativePath: `${TASKS_DIRECTORY}/${name}`,
    write: (chunk) => {
      if (!ended) stream.write(chunk);
    },
    close,
    discard: async () => {
      await close();
      await withTasksDirectory(workspace, false, (dir) => unlink(heldPath(dir, name))).catch(() => {});
    },
  };
}

// The names `createTaskFile` gives (ids from `BackgroundTasks.newId`): nothing else there is the server's to remove.
const OUTPUT_FILE = /^b[\w-]{12}\.output$/;

// Workspaces swept by this process, by root: once each is enough, a running server removes its own files.
const swept = new Set<string>();

/**
 * Removes, once per workspace in a process, the output files in its tasks' directory last
 * written more than `staleAfterMs` ago: those of a server that crashed or was killed, which
 * removed nothing. A file of a live task, on this server or on a replica sharing the workspace,
 * is never that old when `staleAfterMs` is a task's lifetime plus its retention: the task ends
 * within its lifetime and its file goes when it is forgotten. Only regular files by the server's
 * own names are removed (the directory is the commands' to write in), through the held directory.
 * Resolves to how many were removed; never rejects.
 */
export async function sweepStaleTaskFiles(workspace: Workspace, staleAfterMs: number, now = Date.now()): Promise<number> {
  if (swept.has(workspace.root)) return 0;
  swept.add(workspace.root);
  return withTasksDirectory(workspace, false, async (dir) => {
    let removed = 0;
    for (const name of await readdir(heldPath(dir))) {
      if (!OUTPUT_FILE.test(name)) continue;
      const stats = await lstat(heldPath(dir, name)).catch(() => undefined);
      if (stats === undefined || !stats.isFile() || stats.mtimeMs > now - staleAfterMs) continue;
      await unlink(heldPath(dir, name)).then(
        () => removed++,
        () => {},
      );
    }
    return removed;
  }).catch(() => 0);
}

/** Runs `use` on the tasks' directory, opened one component at a time without following links (made first when `create`). */
async function withTasksDirectory<T>(workspace: Workspace, create: boolean, use: (dir: FileHandle) => Promise<T>): Promise<T> {
  let dir: FileHandle = workspace.rootDir;
  const opened: FileHandle[] = [];
  try {
    for (const part of TASKS_DIRECTORY.split('/')) {
      if (create) {
        await mkdir(heldPath(dir, part), { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
      }
      dir = await open(heldPath(dir, part), OPEN_DIRECTORY);
      opened.push(dir);
    }
    return await use(dir);
  } finally {
    await Promise.all(opened.map((h) => h.close()));
  }
}
