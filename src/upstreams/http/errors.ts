/** The upstream answered a status outside 2xx (a redirect too: none is followed). */
export class UpstreamHttpError extends Error {
  override readonly name = 'UpstreamHttpError';
  readonly status: number;

  constructor(status: number) {
    super(`the upstream answered HTTP ${status}`);
    this.status = status;
  }
}

/** The upstream answered what the transport cannot take: a body past the bound or cut short, neither JSON nor an event stream, not JSON-RPC. */
export class UpstreamContentError extends Error {
  override readonly name = 'UpstreamContentError';
}

/** The upstream ended the event stream of a request without answering it, and it could not be resumed. */
export class UpstreamStreamEndedError extends Error {
  override readonly name = 'UpstreamStreamEndedError';
}
