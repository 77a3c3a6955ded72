import { Type } from 'typebox';
import { defineTool } from '../../core/define-tool.js';
import { errorResult, textResult } from '../../core/result.js';
import type { ToolDef } from '../../core/types.js';
import type { BackgroundTasks } from './background-tasks.js';
import { noTask } from './task-output.js';

const inputSchema = Type.Object(
  {
    task_id: Type.Optional(Type.String({ description: 'The ID of the background task to stop' })),
    // Claude Code still takes the deprecated KillShell tool's name for it.
    shell_id: Type.Optional(Type.String({ description: 'Deprecated: use task_id instead' })),
  },
  { additionalProperties: false },
);

/**
 * TaskStop, with Claude Code's name, input and result: stops a running background task and its
 * processes (SIGTERM, then SIGKILL after the grace), answering once they have ended.
 */
export function createTaskStopTool(tasks: BackgroundTasks): ToolDef {
  return defineTool({
    name: 'TaskStop',
    description: [
      '- Stops a running background task by its ID',
      '- Takes a task_id parameter identifying the task to stop',
      '- Returns a success or failure status',
      '- Use this tool when you need to terminate a long-running task',
    ].join('\n'),
    inputSchema,
    annotations: { title: 'Stop task', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    async execute({ task_id: taskId, shell_id: shellId }, context) {
      const id = taskId ?? shellId;
      if (id === undefined) return errorResult('Missing required parameter: task_id');
      const task = tasks.get(context.caller, id);
      if (task === undefined) return errorResult(noTask(id));
      if (task.status !== 'running') return errorResult(`Task ${id} is not running (status: ${task.status})`);
      await tasks.stop(context.caller, id);
      return textResult(JSON.stringify({ message: `Successfully stopped task: ${id} (${task.command})`, task_id: id, task_type: 'local_bash' }));
    },
  });
}
