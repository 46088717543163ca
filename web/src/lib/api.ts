// The one fetch wrapper for /api/v1. Every failure becomes an ApiError with a readable message;
// a 401 also notifies the listener registered with onUnauthorized (the layout shows a sign-in page).
import type {
	ApprovalDecision,
	ApprovalRequest,
	AgentInfo,
	AgentNode,
	ForkDiff,
	LogRecord,
	MergeResult,
	ModelList,
	NewSessionBody,
	Session,
	SpawnRequest
} from './types';
import type {
	ApprovalRequestList,
	AuditPage,
	Changes,
	CommentRequest,
	FileDiff,
	Me,
	MoveNodeRequest,
	NodePullRequest,
	NodePush,
	PullRequest,
	PushResult,
	NodeList,
	RecordPage,
	SecretInfo,
	SecretInfoList,
	SessionList,
	SignalRequest,
	StoredMemoryList
} from './openapi/generated';

export class ApiError extends Error {
	readonly status: number;
	readonly code: string;
	readonly field?: string;
	constructor(status: number, code: string, message: string, field?: string) {
		super(message);
		this.name = 'ApiError';
		this.status = status;
		this.code = code;
		this.field = field;
	}
}

/** errorMessage turns anything thrown by the API layer into one line a person can read. */
export function errorMessage(err: unknown): string {
	if (err instanceof ApiError) return err.field ? `${err.message} (${err.field})` : err.message;
	if (err instanceof Error) return err.message;
	return String(err);
}

let unauthorized: ((err: ApiError) => void) | undefined;
/** onUnauthorized registers the single handler called whenever the API answers 401. */
export function onUnauthorized(fn: ((err: ApiError) => void) | undefined) {
	unauthorized = fn;
}

export const base = '/api/v1';

/** errorFromBody turns an error answer's status and text into an ApiError. */
export function errorFromBody(status: number, statusText: string, text: string): ApiError {
	let code = 'http_' + status;
	let message = `${status} ${statusText || 'request failed'}`.trim();
	let field: string | undefined;
	try {
		const body = JSON.parse(text);
		if (body && typeof body.error === 'object' && body.error) {
			code = body.error.code ?? code;
			message = body.error.message ?? message;
			field = body.error.field || undefined;
		}
	} catch {
		if (text && text.length < 300) message = `${message}: ${text.trim()}`;
	}
	return new ApiError(status, code, message, field);
}

async function toError(res: Response): Promise<ApiError> {
	const text = await res.text().catch(() => '');
	return errorFromBody(res.status, res.statusText, text);
}

type Opts = {
	method?: string;
	body?: unknown;
	signal?: AbortSignal;
	text?: boolean;
	/** headers are extra request headers (e.g. If-Match). */
	headers?: Record<string, string>;
	/** raw is sent as-is with Content-Type application/octet-stream (uploads); body is ignored. */
	raw?: Blob | ArrayBuffer | Uint8Array;
};

/** request performs one API call and returns the decoded body (undefined for 204). */
export async function request<T>(path: string, opts: Opts = {}): Promise<T> {
	const init: RequestInit = {
		method: opts.method ?? 'GET',
		credentials: 'same-origin',
		headers: { Accept: opts.text ? 'text/plain' : 'application/json', ...opts.headers },
		signal: opts.signal
	};
	if (opts.raw !== undefined) {
		(init.headers as Record<string, string>)['Content-Type'] = 'application/octet-stream';
		init.body = opts.raw as BodyInit;
	} else if (opts.body !== undefined) {
		(init.headers as Record<string, string>)['Content-Type'] = 'application/json';
		init.body = JSON.stringify(opts.body);
	}
	let res: Response;
	try {
		res = await fetch(base + path, init);
	} catch (e) {
		if ((e as Error)?.name === 'AbortError') throw e;
		throw new ApiError(0, 'network', 'cannot reach the filepath server; check that it is running');
	}
	if (!res.ok) {
		const err = await toError(res);
		if (res.status === 401) unauthorized?.(err);
		throw err;
	}
	if (res.status === 204) return undefined as T;
	if (opts.text) return (await res.text()) as T;
	const text = await res.text();
	if (!text) return undefined as T;
	try {
		return JSON.parse(text) as T;
	} catch {
		throw new ApiError(res.status, 'bad_response', `the server sent a response that is not JSON (${path})`);
	}
}

const enc = encodeURIComponent;
const s = (id: string) => `/sessions/${enc(id)}`;
const n = (id: string, node: string) => `${s(id)}/nodes/${enc(node)}`;

export const api = {
	me: () => request<Me>('/me'),
	agents: () => request<AgentInfo[]>('/agents'),
	models: () => request<ModelList>('/models'),

	sessions: async () => (await request<SessionList>('/sessions')).data ?? [],
	session: (id: string) => request<Session>(s(id)),
	createSession: (body: NewSessionBody) => request<Session>('/sessions', { method: 'POST', body }),
	deleteSession: (id: string) => request<void>(s(id), { method: 'DELETE' }),
	logout: () => request<void>('/logout', { method: 'POST' }),
	/** The names of the session's secrets (vendor keys); values are never answered. */
	secrets: async (id: string) =>
		((await request<SecretInfoList>(`${s(id)}/secrets`)).data ?? []).map((x) => x.name),
	setSecret: (id: string, name: string, value: string) =>
		request<SecretInfo>(`${s(id)}/secrets/${enc(name)}`, { method: 'PUT', body: { value } }),
	/** Push a node's commits from the server with one of the user's credentials. */
	push: (id: string, node: string, body: NodePush) =>
		request<PushResult>(`${s(id)}/nodes/${enc(node)}/push`, { method: 'POST', body }),
	/** Open (or update) the pull request of a node's pushed branch. */
	pullRequest: (id: string, node: string, body: NodePullRequest) =>
		request<PullRequest>(`${s(id)}/nodes/${enc(node)}/pull-request`, { method: 'POST', body }),
	startSession: (id: string) => request<Session>(`${s(id)}/start`, { method: 'POST' }),
	stopSession: (id: string) => request<Session>(`${s(id)}/stop`, { method: 'POST' }),

	tree: async (id: string) => (await request<NodeList>(`${s(id)}/tree`)).data ?? [],
	createNode: (id: string, body: SpawnRequest) =>
		request<AgentNode>(`${s(id)}/nodes`, { method: 'POST', body }),
	messages: (id: string, node: string, after = 0, limit = 500) =>
		request<RecordPage>(`${n(id, node)}/messages?after=${after}&limit=${limit}`),
	/** sendMessage sends content, handing the agent the files at attachments (paths in the node's workspace). */
	sendMessage: (id: string, node: string, content: string, attachments?: string[]) =>
		request<LogRecord>(`${n(id, node)}/messages`, { method: 'POST', body: attachments?.length ? { content, attachments } : { content } }),
	signal: (id: string, node: string, action: SignalRequest['action']) =>
		request<LogRecord>(`${n(id, node)}/signal`, { method: 'POST', body: { action } }),
	deleteNode: (id: string, node: string) => request<void>(n(id, node), { method: 'DELETE' }),
	moveNode: (id: string, node: string, body: MoveNodeRequest) =>
		request<AgentNode>(`${n(id, node)}/move`, { method: 'POST', body }),
	diff: (id: string, node: string) => request<ForkDiff>(`${n(id, node)}/diff`),
	changes: (id: string, node: string, base = '', text = true) =>
		request<Changes>(`${n(id, node)}/changes${query({ base, text: text ? '' : 'false' })}`),
	changeFile: (id: string, node: string, base: string, section: 'uncommitted' | 'committed', path: string) =>
		request<FileDiff>(`${n(id, node)}/changes/file${query({ base, section, path })}`),
	comment: (id: string, node: string, body: CommentRequest) =>
		request<LogRecord>(`${n(id, node)}/comments`, { method: 'POST', body }),
	merge: (id: string, node: string) => request<MergeResult>(`${n(id, node)}/merge`, { method: 'POST' }),
	logs: (id: string, node: string, tail = 500) =>
		request<string>(`${n(id, node)}/logs?tail=${tail}`, { text: true }),

	approvals: async (id: string, status?: ApprovalRequest['status']) =>
		(await request<ApprovalRequestList>(`${s(id)}/approvals${status ? `?status=${status}` : ''}`)).data ?? [],
	answerApproval: (id: string, approval: string, decision: ApprovalDecision) =>
		request<ApprovalRequest>(`${s(id)}/approvals/${enc(approval)}`, { method: 'POST', body: { decision } }),
	audit: (id: string, node: string, before = 0, limit = 100) =>
		request<AuditPage>(`${n(id, node)}/audit?limit=${limit}${before ? `&before=${before}` : ''}`),
	memories: async (limit = 500) => (await request<StoredMemoryList>(`/memories?limit=${limit}`)).data ?? [],
	deleteMemory: (memory: string) => request<void>(`/memories/${enc(memory)}`, { method: 'DELETE' })
};

/** query is "?a=1&b=2" of the parameters that are not empty ("" for none). */
function query(params: Record<string, string>): string {
	const q = new URLSearchParams();
	for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
	const s = q.toString();
	return s ? `?${s}` : '';
}

/** changesDownloadURL is a same-origin address (cookie auth) of a node's download: its changes
 * (tar.gz, zip, bundle or patch) or its workspace (tar.gz or zip). */
export function changesDownloadURL(sessionId: string, nodeId: string, what: 'changes' | 'workspace', format: string, base = ''): string {
	const path = what === 'changes' ? '/changes/download' : '/download';
	return `/api/v1${n(sessionId, nodeId)}${path}${query({ format, base: what === 'changes' ? base : '' })}`;
}

/** streamURL is the WebSocket address of a session's record stream. */
export function streamURL(sessionId: string, after: number, loc: Location = window.location): string {
	const proto = loc.protocol === 'https:' ? 'wss:' : 'ws:';
	return `${proto}//${loc.host}${base}${s(sessionId)}/stream?after=${after}`;
}
