// toItems turns a node's records into chat items in one pass: status events are dropped (they drive
// the dot), consecutive commits are grouped, and a tool/command "start" is replaced in place by its
// matching "done"/"error" so one block shows the whole call.
import type { LogRecord, ErrorData } from '$lib/types';
import type {
	CommandEvent,
	CommitEvent,
	DoneEvent,
	HandoffEvent,
	SpawnEvent,
	ToolEvent,
	Worker
} from '$lib/protocol';

export type ChatItem =
	| { kind: 'user'; key: number; content: string }
	| { kind: 'note'; key: number; from: string; content: string }
	| { kind: 'text'; key: number; content: string }
	| { kind: 'tool'; key: number; ev: ToolEvent }
	| { kind: 'command'; key: number; ev: CommandEvent }
	| { kind: 'commits'; key: number; commits: CommitEvent[] }
	| { kind: 'spawn'; key: number; ev: SpawnEvent }
	| { kind: 'workers'; key: number; workers: Worker[] }
	| { kind: 'handoff'; key: number; ev: HandoffEvent }
	| { kind: 'done'; key: number; ev: DoneEvent }
	| { kind: 'error'; key: number; err: ErrorData };

export function toItems(records: readonly LogRecord[]): ChatItem[] {
	const items: ChatItem[] = [];
	const openTools = new Map<string, number>();
	const openCmds = new Map<string, number>();
	for (const r of records) {
		const key = r.seq;
		if (r.kind === 'input') {
			const d = r.data;
			if (d.type === 'message') {
				if (d.from === 'user') items.push({ kind: 'user', key, content: d.content });
				else items.push({ kind: 'note', key, from: d.from, content: d.content });
			} else if (d.type === 'signal') {
				items.push({ kind: 'note', key, from: 'signal', content: d.action });
			}
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
					openTools.delete(id);
				} else {
					if (ev.status === 'start') openTools.set(id, items.length);
					items.push({ kind: 'tool', key, ev });
				}
				break;
			}
			case 'command': {
				const at = openCmds.get(ev.cmd);
				if (ev.status !== 'start' && at !== undefined) {
					items[at] = { kind: 'command', key: items[at].key, ev };
					openCmds.delete(ev.cmd);
				} else {
					if (ev.status === 'start') openCmds.set(ev.cmd, items.length);
					items.push({ kind: 'command', key, ev });
				}
				break;
			}
			case 'commit': {
				const last = items[items.length - 1];
				if (last?.kind === 'commits') last.commits.push(ev);
				else items.push({ kind: 'commits', key, commits: [ev] });
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
			case 'done':
				items.push({ kind: 'done', key, ev });
				break;
			// status: not a message; it drives the node's dot.
		}
	}
	return items;
}
