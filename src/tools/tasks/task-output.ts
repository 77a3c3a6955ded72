import { Type } from 'typebox';
import { defineTool } from '../../core/define-tool.js';
import { errorResult, textResult } from '../../core/result.js';
import type { ToolDef } from '../../core/types.js';
import { MAX_OUTPUT_CHARS } from '../output-cap.js';
import type { BackgroundTask, BackgroundTasks } from './background-tasks.js';

export const DEFAULT_WAIT_MS = 30_000;
export const MAX_WAIT_MS = 600_000;

const inputSchema = Type.Object(
  {
    task_id: Type.String({ description: 'The task ID to get output from' }),
    block: Type.Optional(Type.Boolean({ default: true, description: 'Whether to wait for completion' })),
    timeout: Type.Optional(Type.Number({ default: DEFAULT_WAIT_MS, minimum: 0, maximum: MAX_WAIT_MS, description: 'Max wait time in ms' })),
  },
  { additionalProperties: false },
);

/** The answer for an id that is unknown, forgotten, or another caller's: the same words for all three. */
export function noTask(id: string): string {
  return `No task found with ID: ${id}`;
}

/**
 * TaskOutput, with Claude Code's name, input and result: a background task's status and output,
 * waiting (by default) up to `timeout` ms for it to finish.
 */
export function createTaskOutputTool(tasks: BackgroundTasks): ToolDef {
  return defineTool({
    name: 'TaskOutput',
    description: [
      'Retrieves output from a running or completed background task (a Bash command run with run_in_background).',
      '- Takes a task_id parameter identifying the task',
      '- Returns the task output along with status information',
      '- Use block=true (default) to wait for task completion, up to timeout ms (default 30000, max 600000)',
      '- Use block=false for non-blocking check of current status',
      "- The task's whole output is also in the file named when it started; read it with the Read tool",
    ].join('\n'),
    inputSchema,
    annotations: { title: 'Task output', readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    // Above the longest wait, so the pipeline's deadline never cuts one short.
    timeoutMs: MAX_WAIT_MS + 10_000,
    async execute({ task_id: id, block = true, timeout = DEFAULT_WAIT_MS }, context) {
      const task = tasks.get(context.caller, id);
      if (task === undefined) return errorResult(noTask(id));
      let retrieval: 'success' | 'timeout' | 'not_ready' = 'success';
      if (task.status === 'running') {
        if (!block) retrieval = 'not_ready';
        else if (!(await endedWithin(task, timeout, context.signal))) retrieval = 'timeout';
      }
      return textResult(render(task, retrieval));
    },
  });
}

/** Waits for the task to end, at most `ms` and never past the call's own signal; resolves to whether it ended. */
async function endedWithin(task: BackgroundTask, ms: number, signal: AbortSignal): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const gaveUp = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    onAbort = () => resolve(false);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([task.ended.then(() => true as const), gaveUp]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

function render(task: BackgroundTask, retrieval: string): string {
  const parts = [
    `<retrieval_status>${retrieval}</retrieval_status>`,
    `<task_id>${task.id}</task_id>`,
    '<task_type>local_bash</task_type>',
    `<status>${task.status}</status>`,
  ];
  if (task.status !== 'running' && task.exitCode !== null) parts.push(`<exit_code>${task.exitCode}</exit_code>`);
  const notes = [task.outputStopped, task.endNote === undefined ? undefined : `[Task ${task.endNote}]`].filter((n) => n !== undefined);
  if (task.output.totalBytes > 0) {
    const { text } = task.output.render(MAX_OUTPUT_CHARS);
    parts.push(`<output>\n${text.endsWith('\n') ? text : `${text}\n`}</output>`);
  }
  if (notes.length > 0) parts.push(notes.join('\n'));
  parts.push(`<output_file>${task.outputPath}</output_file>`);
  return parts.join('\n\n');
}
