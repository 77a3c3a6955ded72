import { Echo } from './echo.js';
import type { ToolDef } from '../core/types.js';

export { Echo };

export interface BuiltinToolOptions {
  /** The only directory the file tools may touch. */
  workspace: string;
  /** Run Bash inside an OS sandbox. */
  bashSandbox?: boolean;
}

/** The tools toolport serves out of the box, in the order they are listed. */
export async function builtinTools(_options: BuiltinToolOptions): Promise<ToolDef[]> {
  return [Echo];
}
