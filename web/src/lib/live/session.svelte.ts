// LiveSession is the one live connection of the UI: it holds a session's nodes and per-node
// records, fed by GET /tree and the WebSocket record stream, and applies records strictly in seq
// order (see docs at the bottom of this file for the choices made).
import type { AgentNode, LogRecord } from '$lib/types';

export type LiveState = 'connecting' | 'live' | 'reconnecting' | 'closed';

type WSLike = {
	onopen: ((ev: unknown) => void) | null;
	onmessage: ((ev: { data: unknown }) => void) | null;
	onclose: ((ev: unknown) => void) | null;
	onerror: ((ev: unknown) => void) | null;
	close(code?: number, reason?: string): void;
};

export interface LiveOptions {
	sessionId: string;
	/** url builds the stream address for `after`. */
	url: (after: number) => string;
	/** loadTree returns the session's nodes (GET /tree). */
	loadTree: () => Promise<AgentNode[]>;
	/** probe is called after a connection failed before opening; throwing stops reconnects
	 * when the error has a status of 401, 403 or 404. */
	probe?: () => Promise<unknown>;
	WebSocket?: new (url: string) => WSLike;
	random?: () => number;
	/** batchMs groups records arriving close together into one UI update (the replay at start). */
	batchMs?: number;
	onRecord?: (r: LogRecord) => void;
	onNodesChanged?: () => void;
}

const EMPTY: readonly LogRecord[] = Object.freeze([]);
/** Close codes of the stream (orchestrator/api/stream.go). */
const CLOSE_SESSION_DELETED = 4404;
const CLOSE_AFTER_BEYOND_LAST = 4422;
const BASE_DELAY = 500;
const MAX_DELAY = 15_000;

export class LiveSession {
	#nodes = $state.raw<ReadonlyMap<string, AgentNode>>(new Map());
	#records = $state.raw<ReadonlyMap<string, readonly LogRecord[]>>(new Map());
	#state = $state.raw<LiveState>('connecting');
	#error = $state.raw<string | null>(null);
	#loaded = $state.raw(false);
	#lastSeq = 0; // last seq accepted (applied or queued for the next flush)

	#opts: LiveOptions;
	#ws: WSLike | null = null;
	#attempt = 0;
	#timer: ReturnType<typeof setTimeout> | null = null;
	#flushTimer: ReturnType<typeof setTimeout> | null = null;
	#pending: LogRecord[] = [];
	#gapAt = 0; // seq that caused the last gap reconnect; accepted if the server sends it again
	#closed = false;
	#reconnects = 0;

	constructor(opts: LiveOptions) {
		this.#opts = opts;
	}

	get nodes(): ReadonlyMap<string, AgentNode> {
		return this.#nodes;
	}
	get state(): LiveState {
		return this.#state;
	}
	get error(): string | null {
		return this.#error;
	}
	get loaded(): boolean {
		return this.#loaded;
	}
	get lastSeq(): number {
		return this.#lastSeq;
	}
	/** reconnects counts connections opened after the first (for tests and the indicator). */
	get reconnects(): number {
		return this.#reconnects;
	}
	/** records returns the records of one node ("" = session-level) in seq order. */
	records(nodeId: string): readonly LogRecord[] {
		return this.#records.get(nodeId) ?? EMPTY;
	}

	/** start loads the tree, then opens the stream from seq 0 (the server replays the log). */
	async start(): Promise<void> {
		try {
			const nodes = await this.#opts.loadTree();
			if (this.#closed) return;
			const m = new Map<string, AgentNode>();
			for (const n of nodes) m.set(n.id, n);
			this.#nodes = m;
			this.#loaded = true;
			this.#opts.onNodesChanged?.();
		} catch (e) {
			if (this.#closed) return;
			this.#error = (e as Error).message;
			this.#state = 'closed';
			return;
		}
		this.#connect();
	}

	/** close stops the connection for good. */
	close(): void {
		this.#closed = true;
		this.#state = 'closed';
		if (this.#timer) clearTimeout(this.#timer);
		if (this.#flushTimer) clearTimeout(this.#flushTimer);
		this.#timer = this.#flushTimer = null;
		this.flush();
		const ws = this.#ws;
		this.#ws = null;
		if (ws) {
			ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
			ws.close(1000, 'closed');
		}
	}

	/** upsertNode applies a node the UI got from an API answer (e.g. POST /nodes) before its record. */
	upsertNode(n: AgentNode): void {
		const m = new Map(this.#nodes);
		m.set(n.id, { ...m.get(n.id), ...n });
		this.#nodes = m;
		this.#opts.onNodesChanged?.();
	}

	#connect(): void {
		if (this.#closed) return;
		const Impl = this.#opts.WebSocket ?? (globalThis.WebSocket as unknown as LiveOptions['WebSocket'])!;
		let opened = false;
		const ws = new Impl(this.#opts.url(this.#lastSeq));
		this.#ws = ws;
		ws.onopen = () => {
			opened = true;
			this.#attempt = 0;
			this.#error = null;
			this.#state = 'live';
		};
		ws.onmessage = (ev) => {
			if (this.#ws !== ws) return;
			this.#receive(ev.data);
		};
		ws.onerror = () => {};
		ws.onclose = (ev) => {
			if (this.#ws !== ws) return;
			this.#ws = null;
			if (this.#closed) return;
			const code = (ev as { code?: number } | null)?.code;
			if (code === CLOSE_SESSION_DELETED) {
				this.#error = 'this session was deleted';
				this.#state = 'closed';
				this.#closed = true;
				return;
			}
			if (code === CLOSE_AFTER_BEYOND_LAST) {
				this.#resync();
				return;
			}
			if (!opened && this.#opts.probe) {
				this.#opts.probe().then(
					() => this.#scheduleReconnect(),
					(e: { status?: number; message?: string }) => {
						if (e?.status === 401 || e?.status === 403 || e?.status === 404) {
							this.#error = e.message ?? 'the session stream was refused';
							this.#state = 'closed';
							this.#closed = true;
						} else this.#scheduleReconnect();
					}
				);
				return;
			}
			this.#scheduleReconnect();
		};
	}

	/** resync drops what was received and loads the session again from the whole log: the server
	 * has not got the records this client saw (another database, restored from a backup). */
	#resync(): void {
		if (this.#flushTimer) clearTimeout(this.#flushTimer);
		this.#flushTimer = null;
		this.#pending = [];
		this.#records = new Map();
		this.#lastSeq = 0;
		this.#gapAt = 0;
		this.#state = 'reconnecting';
		this.#reconnects++;
		void this.start();
	}

	#scheduleReconnect(delay?: number): void {
		if (this.#closed) return;
		this.#state = 'reconnecting';
		const rnd = this.#opts.random ?? Math.random;
		const d = delay ?? Math.min(MAX_DELAY, BASE_DELAY * 2 ** this.#attempt) * (0.5 + rnd() * 0.5);
		this.#attempt++;
		if (this.#timer) clearTimeout(this.#timer);
		this.#timer = setTimeout(() => {
			this.#timer = null;
			this.#reconnects++;
			this.#connect();
		}, d);
	}

	#receive(raw: unknown): void {
		let r: LogRecord;
		try {
			r = JSON.parse(String(raw));
		} catch {
			return; // not a record; the server only sends records
		}
		if (typeof r?.seq !== 'number') return;
		if (r.seq <= this.#lastSeq) return; // duplicate after a reconnect
		if (r.seq !== this.#lastSeq + 1 && r.seq !== this.#gapAt) {
			// A record is missing: start over from the last one we have. If the server sends
			// the same seq again, nothing exists in between and we accept it.
			this.#gapAt = r.seq;
			const ws = this.#ws;
			this.#ws = null;
			if (ws) {
				ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
				ws.close(4000, 'gap');
			}
			this.#scheduleReconnect(0);
			return;
		}
		this.#gapAt = 0;
		this.#lastSeq = r.seq;
		this.#pending.push(r);
		const ms = this.#opts.batchMs ?? 16;
		if (!this.#flushTimer) this.#flushTimer = setTimeout(() => this.flush(), ms);
	}

	/** flush applies queued records now (normally done by a short timer). */
	flush(): void {
		if (this.#flushTimer) clearTimeout(this.#flushTimer);
		this.#flushTimer = null;
		const batch = this.#pending;
		if (batch.length === 0) return;
		this.#pending = [];
		let nodes: Map<string, AgentNode> | null = null;
		const added = new Map<string, LogRecord[]>();
		const dropped = new Set<string>();
		const nodeMap = () => (nodes ??= new Map(this.#nodes));

		for (const r of batch) {
			switch (r.kind) {
				case 'node': {
					const d = r.data;
					const m = nodeMap();
					if (d.op === 'deleted') {
						for (const id of d.ids ?? [d.node.id]) {
							m.delete(id);
							dropped.add(id);
							added.delete(id);
						}
					} else if (d.node) {
						m.set(d.node.id, { ...m.get(d.node.id), ...d.node });
					}
					break;
				}
				case 'event': {
					const ev = r.data;
					if (ev.type === 'status' || ev.type === 'done') {
						const m = nodeMap();
						const n = m.get(r.node_id);
						// A paused node shows paused until a node record says otherwise (the server
						// decides; a line the agent wrote before it was frozen may come after).
						if (n && n.status !== 'paused') {
							m.set(
								n.id,
								ev.type === 'status'
									? { ...n, status: ev.state, context_pct: ev.context_pct ?? n.context_pct }
									: { ...n, status: 'done' }
							);
						}
					}
					break;
				}
			}
			if (r.kind !== 'node') {
				let list = added.get(r.node_id);
				if (!list) added.set(r.node_id, (list = []));
				list.push(r);
			}
		}

		if (added.size || dropped.size) {
			const recs = new Map(this.#records);
			for (const id of dropped) recs.delete(id);
			for (const [id, list] of added) {
				const old = recs.get(id);
				recs.set(id, old ? old.concat(list) : list);
			}
			this.#records = recs;
		}
		if (nodes) {
			this.#nodes = nodes;
			this.#opts.onNodesChanged?.();
		}
		if (this.#opts.onRecord) for (const r of batch) this.#opts.onRecord(r);
	}
}

/*
Choices:
- Initial load is GET /tree, then the stream with after=0: the server replays the whole log, so the
  client has one code path (records) for history and live updates. Replayed records arriving within
  batchMs of each other are applied in one update, so a 10,000-record session costs one re-render.
- Records are accepted strictly in order: seq <= last is a duplicate (dropped); seq > last+1 is a
  gap, and the client reconnects with after=last. If the server answers with the same seq again the
  gap is real (nothing in between) and the record is accepted, so a gappy seq can never loop.
- Reconnects back off exponentially (0.5 s doubling to 15 s) with 50-100 % jitter; a connection
  that fails before opening asks `probe` (GET /sessions/{id}) whether to give up (401/403/404).
*/
