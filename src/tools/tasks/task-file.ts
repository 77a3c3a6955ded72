import { constants, type WriteStream } from 'node:fs';
import { mkdir, open, unlink, type FileHandle } from 'node:fs/promises';
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
 * a symlink and the file is made through the held directory, so a command that replaces
 * `.toolport` with a link cannot make the server write outside the workspace.
 */
export async function createTaskFile(workspace: Workspace, id: string): Promise<TaskFile> {
  let dir: FileHandle = workspace.rootDir;
  const opened: FileHandle[] = [];
  try {
    for (const part of TASKS_DIRECTORY.split('/')) {
      await mkdir(heldPath(dir, part), { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
      dir = await open(heldPath(dir, part), OPEN_DIRECTORY);
      opened.push(dir);
    }
    const name = `${id}.output`;
    const handle = await open(heldPath(dir, name), CREATE_FILE, 0o600);
    const path = heldPath(dir, name);
    const stream: WriteStream = handle.createWriteStream();
    // The directory stays open until the file is removed, so removing it goes through the same directory.
    const held = opened.pop()!;
    const closed = new Promise<void>((resolve) => stream.once('close', resolve));
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
        await unlink(path).catch(() => {});
        await held.close().catch(() => {});
      },
    };
  } finally {
    await Promise.all(opened.map((h) => h.close()));
  }
}
