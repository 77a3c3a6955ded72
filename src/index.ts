// The public API for embedding toolport in a service of your own.
export type {
  AudioBlock,
  ContentAnnotations,
  ContentBlock,
  ErrorResult,
  ImageBlock,
  ResourceBlock,
  ResourceLinkBlock,
  ObjectSchema,
  Progress,
  ProgressUpdate,
  TextBlock,
  ToolAnnotations,
  ToolContext,
  ToolDef,
  ToolInput,
  ToolResult,
} from './core/types.js';
export { defineTool, type TypedToolResult, type TypedToolSpec, type TypedToolSpecWithOutput } from './core/define-tool.js';
export { ToolRegistry } from './core/registry.js';
export { ToolExecutor, type CallObserver, type CallOptions, type ExecutorOptions, type CallOutcome } from './core/executor.js';
export {
  ANYONE,
  Gateway,
  type Caller,
  type CallIdentity,
  type CallRequest,
  type CallResult,
  type GatewayObserver,
  type GatewayOptions,
} from './core/gateway.js';
export { Keyring, type KeyIdentity, type KeySpec } from './auth/keyring.js';
export type { Principal, ToolScope } from './core/principal.js';
export {
  ToolportError,
  ToolRegistrationError,
  ErrorCatalog,
  ErrorCodes,
  JSON_RPC,
  errorBody,
  jsonRpcError,
  jsonRpcCodeOf,
  type ErrorBody,
  type ErrorCode,
  type ToolportErrorOptions,
} from './core/errors.js';
export {
  AudioBlockSchema,
  ContentAnnotationsSchema,
  ContentBlockSchema,
  ErrorBodySchema,
  ImageBlockSchema,
  ResourceBlockSchema,
  ResourceLinkBlockSchema,
  StructuredContentSchema,
  TextBlockSchema,
  ToolResultSchema,
} from './core/schemas.js';
export {
  API_FORMATS,
  STRICT_FORMATS,
  strictSchema,
  type APIFormat,
  type AnthropicTool,
  type ListOptions,
  type OpenAITool,
  type OpenAIResponsesTool,
  type MCPTool,
} from './core/formats.js';
export { textResult, errorResult, readableContent } from './core/result.js';
export {
  toAnthropicToolResult,
  toAnthropicToolResultMessage,
  toMCPCallToolResult,
  toOpenAIFunctionCallOutput,
  toOpenAIFunctionCallOutputs,
  toOpenAIToolMessages,
  type AnsweredCall,
  type AnthropicToolResultBlock,
  type AnthropicToolResultMessage,
  type MCPCallToolResult,
  type OpenAIChatMessage,
  type OpenAIFunctionCallOutput,
  type OpenAIImageMessage,
  type OpenAIToolMessage,
} from './providers/results.js';
export { fromMCPCallResult } from './providers/mcp-content.js';
export { DIALECTS, readTurn, TurnShapeError, type Dialect, type Turn, type TurnCall } from './providers/turns.js';
export { MAX_CALLS_PER_TURN, MAX_TURN_ANSWER_BYTES, MAX_TURN_CONCURRENCY, runTurn, turnSizeRefusal, type TurnContext } from './providers/turn-runner.js';
export { buildApp, type AppHttpOptions, type AppOptions, type AppRuntime, type Toolport } from './http/app.js';
export { httpRuntime, openRuntime, type Runtime, type RuntimeKind, type RuntimeOptions } from './main/runtime.js';
export {
  BackgroundTasks,
  builtinTools,
  createBashTool,
  createEditTool,
  createGlobTool,
  createGrepTool,
  createLsTool,
  createReadTool,
  createTaskOutputTool,
  createTaskStopTool,
  createWriteTool,
  Echo,
  Workspace,
  type BuiltinToolOptions,
} from './tools/index.js';
export { DEFAULT_TASK_BOUNDS, type BackgroundWork, type TaskBounds } from './core/background.js';
export { DEFAULT_CALL_TASK_BOUNDS, type CallTaskBounds, type CallTaskStore, type TaskRequest, type TaskSnapshot, type TaskStatus } from './core/call-task.js';
export { CallTasks, TaskCancelled, taskOwner } from './core/call-task-store.js';
export { WorkspaceError } from './os/fs/workspace.js';
export { loadPlugins, PluginLoadError, type ToolportPlugin } from './assembly/plugins.js';
export { loadConfig, ConfigError, type Config } from './config/config.js';
export { createLogger } from './infra/logger.js';
export { Type, type Static } from 'typebox';
