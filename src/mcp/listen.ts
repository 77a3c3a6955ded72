import { isRecord } from '../core/json.js';
import type { DispatchContext, DispatchOutcome } from './dispatcher.js';
import { SUBSCRIPTION_ID_KEY } from './era.js';
import { resultResponse, RpcCodes, type JsonRpcNotification, type JsonRpcRequest } from '../core/json-rpc.js';
import { methodError } from './rpc-errors.js';

/** What `subscriptions/listen` needs from the dispatcher that runs it. */
export interface ListenDeps {
  /** The server announces `tools.listChanged`; without it, no filter is honored. */
  listChanged: boolean;
  /** The `_meta` of stateless-revision results (the server's identity). */
  resultMeta: Record<string, unknown>;
}

/** The part of 2026-07-28's SubscriptionFilter this server can honor: it offers tools only. */
interface Honored {
  toolsListChanged?: true;
}

const BOOLEAN_FIELDS = ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const;

/**
 * One `subscriptions/listen` (2026-07-28): the client names the notifications it wants
 * (`params.notifications`); the server acknowledges with the subset it will send
 * (`notifications/subscriptions/acknowledged`, always the stream's first message), then sends a
 * `notifications/tools/list_changed` at each change of the tool list (at most one a second, the
 * last change always told: see `SubscriptionHub`), each stamped with the listen request's id in
 * `_meta`, until the client goes away or cancels (no response then) or the server ends it
 * (shutdown: the empty result, the spec's graceful close). A filter that asks
 * for nothing this server sends is acknowledged as `{}` and closed at once. Notifications go
 * through the transport's `notify` (bounded: a reader that does not read gets the latest change,
 * not a queue of them); the subscription is opened through the transport's `subscriptions`,
 * which bounds how many a caller may hold.
 */
export async function subscriptionsListen<Caller>(deps: ListenDeps, request: JsonRpcRequest, context: DispatchContext<Caller>): Promise<DispatchOutcome> {
  const filter = filterOf(request.params?.['notifications']);
  if (typeof filter === 'string') return methodError(request, RpcCodes.INVALID_PARAMS, filter);
  const { notify, subscriptions } = context;
  if (notify === undefined) {
    return methodError(request, RpcCodes.INVALID_REQUEST, 'Invalid Request: subscriptions/listen needs a transport that streams notifications');
  }
  const id = request.id;
  const stamp = { [SUBSCRIPTION_ID_KEY]: id };
  const honored: Honored = filter.toolsListChanged === true && deps.listChanged && subscriptions !== undefined ? { toolsListChanged: true } : {};
  const ack: JsonRpcNotification = { jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications: honored, _meta: stamp } };
  const closed: DispatchOutcome = { reply: resultResponse(id, { resultType: 'complete', _meta: { ...stamp, ...deps.resultMeta } }), status: 200 };
  if (honored.toolsListChanged !== true || subscriptions === undefined) {
    notify(ack);
    return closed;
  }

  const changed: JsonRpcNotification = { jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { _meta: stamp } };
  let end!: (how: 'ended' | 'gone') => void;
  const over = new Promise<'ended' | 'gone'>((resolve) => (end = resolve));
  const subscription = subscriptions.open({ changed: () => notify(changed), ended: () => end('ended') });
  if ('refused' in subscription) return methodError(request, RpcCodes.INTERNAL_ERROR, subscription.refused);
  notify(ack);

  // Ended by the transport (the connection closed, shutdown of stdio) or by the client's
  // notifications/cancelled naming the listen request.
  const cancellable = context.calls?.add(id);
  const gone = (): void => end('gone');
  const signals = [context.signal, cancellable?.signal].filter((signal) => signal !== undefined);
  for (const signal of signals) {
    if (signal.aborted) gone();
    else signal.addEventListener('abort', gone, { once: true });
  }
  const how = await over;
  subscription.close();
  for (const signal of signals) signal.removeEventListener('abort', gone);
  if (cancellable) context.calls?.delete(id, cancellable);
  // A subscription the client ended gets no response, as a cancelled request does not.
  return how === 'ended' ? closed : { reply: undefined, status: 202 };
}

/** The filter, or why it is refused: an object whose known fields have their types (unknown fields are left for later revisions). */
function filterOf(value: unknown): Record<string, unknown> | string {
  if (!isRecord(value)) return 'Invalid params: params.notifications must be an object (a SubscriptionFilter)';
  for (const field of BOOLEAN_FIELDS) {
    if (value[field] !== undefined && typeof value[field] !== 'boolean') return `Invalid params: params.notifications.${field} must be a boolean`;
  }
  const uris = value['resourceSubscriptions'];
  if (uris !== undefined && !(Array.isArray(uris) && uris.every((uri) => typeof uri === 'string'))) {
    return 'Invalid params: params.notifications.resourceSubscriptions must be an array of strings';
  }
  return value;
}
