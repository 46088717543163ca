// toItems turns a node's records into chat items in one pass: status events are dropped (they drive
// the dot), consecutive commits are grouped, and a tool/command "start" is replaced in place by its
// matching "done"/"error" so one block shows the whole call. System records (blocks filepath adds:
// health checks, memories, a continuation after a handoff, an approval request and its answer, in
// one block) become their own items; a commit that
// links to the tool/command record it was made during (its ref) knows that block's key.
import type { Approval, LogRecord, ErrorData, SystemData } from '$lib/types';
import type {
	CommandEvent,
	CommitEvent,
	DoneEvent,
	HandoffEvent,
	SpawnEvent,
	ToolEvent,
	Worker
} from '$lib/protocol';
import type { MessageInput } from '$lib/protocol/generated';

/** DiffComment is what a user's message comments on: lines of a file in the node's changes. */
export type DiffComment = NonNullable<MessageInput['comment']>;

/** Attachment is a file the user attached to a message (in the node's workspace). */
export type Attachment = NonNullable<MessageInput['attachments']>[number];

/** ChatFile is a file the agent created, changed or deleted, as its last record says. */
export type ChatFile = { path: string; op: 'created' | 'modified' | 'deleted'; size: number };

export type ChatItem =
	| { kind: 'user'; key: number; content: string; comment?: DiffComment; attachments?: Attachment[] }
	| { kind: 'files'; key: number; files: ChatFile[] }
	| { kind: 'note'; key: number; from: string; content: string }
	| { kind: 'text'; key: number; content: string }
	| { kind: 'tool'; key: number; ev: ToolEvent }
	| { kind: 'command'; key: number; ev: CommandEvent }
	| { kind: 'commits'; key: number; commits: ChatCommit[] }
	| { kind: 'spawn'; key: number; ev: SpawnEvent }
	| { kind: 'workers'; key: number; workers: Worker[] }
	| { kind: 'handoff'; key: number; ev: HandoffEvent }
	/** repeats: the done's summary is the agent's last text, already shown just above. */
	| { kind: 'done'; key: number; ev: DoneEvent; repeats: boolean }
	| { kind: 'error'; key: number; err: ErrorData }
	| { kind: 'check'; key: number; d: SystemData }
	| { kind: 'memory'; key: number; d: SystemData }
	| { kind: 'continuation'; key: number; generation: number; summary: string }
	| { kind: 'approval'; key: number; a: Approval }
	| { kind: 'system'; key: number; d: SystemData };

/** ChatCommit is a commit with the key of the tool or command block it was made during, if known. */
export type ChatCommit = CommitEvent & { target?: number };

/** lastText is the agent's last text of the current turn (none after a message to it). */
function lastText(items: ChatItem[]): { content: string } | undefined {
	for (let i = items.length - 1; i >= 0; i--) {
		const it = items[i];
		if (it.kind === 'text') return it;
		if (it.kind === 'user' || it.kind === 'note' || it.kind === 'done') return undefined;
	}
	return undefined;
}

/** hiddenFile: files the chat does not show as cards (git's own, installed dependencies, caches). */
export function hiddenFile(path: string): boolean {
	return /(^|\/)(\.git|node_modules|\.cache|__pycache__|\.venv)(\/|$)/.test(path);
}

/** ownWords is a message's content without the list of attached files filepath adds for the agent. */
export function ownWords(content: string): string {
	const at = content.search(/(^|\n\n)Attached files? \(in your workspace\):/);
	return at < 0 ? content : content.slice(0, at);
}

export function toItems(records: readonly LogRecord[]): ChatItem[] {
	const items: ChatItem[] = [];
	const openTools = new Map<string, number>();
	const openCmds = new Map<string, number>();
	const blockOf = new Map<number, number>(); // tool/command record seq → its item's key
	const approvals = new Map<string, number>(); // approval id → its item's index
	for (const r of records) {
		const key = r.seq;
		if (r.kind === 'system') {
			const d = r.data;
			if (d.type === 'check') items.push({ kind: 'check', key, d });
			else if (d.type === 'memory') items.push({ kind: 'memory', key, d });
			else if (d.type === 'continuation') items.push({ kind: 'continuation', key, generation: d.generation ?? 0, summary: d.summary ?? '' });
			else if (d.type === 'approval' && d.approval) {
				// The answer replaces its request in place: one block per request.
				const at = approvals.get(d.approval.id);
				if (at !== undefined) items[at] = { kind: 'approval', key: items[at].key, a: d.approval };
				else {
					approvals.set(d.approval.id, items.length);
					items.push({ kind: 'approval', key, a: d.approval });
				}
			}
			else items.push({ kind: 'system', key, d });
			continue;
		}
		if (r.kind === 'input') {
			const d = r.data;
			if (d.type === 'message') {
				if (d.from === 'user') {
					const it: ChatItem = { kind: 'user', key, content: d.content };
					if (d.comment) it.comment = d.comment;
					if (d.attachments?.length) {
						it.attachments = d.attachments;
						it.content = ownWords(d.content);
					}
					items.push(it);
				}
				else items.push({ kind: 'note', key, from: d.from, content: d.content });
			} else if (d.type === 'signal') {
				items.push({ kind: 'note', key, from: 'signal', content: d.action });
			}
			continue;
		}
		if (r.kind === 'file') {
			const f = r.data;
			if (!f?.path || hiddenFile(f.path)) continue;
			const last = items[items.length - 1];
			const group = last?.kind === 'files' ? last : undefined;
			const entry: ChatFile = { path: f.path, op: f.op, size: f.size };
			if (!group) {
				items.push({ kind: 'files', key, files: [entry] });
				continue;
			}
			const at = group.files.findIndex((x) => x.path === f.path);
			if (at < 0) group.files.push(entry);
			// a file made and changed in one go stays "created"
			else group.files[at] = { ...entry, op: group.files[at].op === 'created' && f.op === 'modified' ? 'created' : f.op };
			continue;
		}
		if (r.kind === 'error') {
			items.push({ kind: 'error', key, err: r.data });
			continue;
		}
		if (r.kind !== 'event') continue;
		const ev = r.data;
		switch (ev.type) {
			case 'text':
				items.push({ kind: 'text', key, content: ev.content });
				break;
			case 'tool': {
				const id = ev.name + '\u0000' + (ev.path ?? '');
				const at = openTools.get(id);
				if (ev.status !== 'start' && at !== undefined) {
					items[at] = { kind: 'tool', key: items[at].key, ev };
					blockOf.set(key, items[at].key);
					openTools.delete(id);
				} else {
					if (ev.status === 'start') openTools.set(id, items.length);
					blockOf.set(key, key);
					items.push({ kind: 'tool', key, ev });
				}
				break;
			}
			case 'command': {
				const at = openCmds.get(ev.cmd);
				if (ev.status !== 'start' && at !== undefined) {
					items[at] = { kind: 'command', key: items[at].key, ev };
					blockOf.set(key, items[at].key);
					openCmds.delete(ev.cmd);
				} else {
					if (ev.status === 'start') openCmds.set(ev.cmd, items.length);
					blockOf.set(key, key);
					items.push({ kind: 'command', key, ev });
				}
				break;
			}
			case 'commit': {
				const c: ChatCommit = r.ref !== undefined && blockOf.has(r.ref) ? { ...ev, target: blockOf.get(r.ref) } : ev;
				const last = items[items.length - 1];
				if (last?.kind === 'commits') last.commits.push(c);
				else items.push({ kind: 'commits', key, commits: [c] });
				break;
			}
			case 'spawn':
				items.push({ kind: 'spawn', key, ev });
				break;
			case 'workers':
				items.push({ kind: 'workers', key, workers: ev.workers });
				break;
			case 'handoff':
				items.push({ kind: 'handoff', key, ev });
				break;
			case 'done': {
				const last = lastText(items);
				const repeats = !!ev.summary && !!last && last.content.trim() === ev.summary.trim();
				items.push({ kind: 'done', key, ev, repeats });
				break;
			}
			// status: not a message; it drives the node's dot.
		}
	}
	return items;
}
