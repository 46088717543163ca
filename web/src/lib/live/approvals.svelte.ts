// ApprovalInbox is the session's approvals inbox as the live stream builds it: every system record
// of type approval (a request, pending, then its answer with the same id) updates one entry, so the
// top bar's badge and list follow the log with no request of their own.
import type { Approval, LogRecord } from '$lib/types';

export interface InboxEntry extends Approval {
	nodeId: string;
	/** seq of the request's record (the order of the list). */
	seq: number;
}

export class ApprovalInbox {
	#entries = $state.raw<ReadonlyMap<string, InboxEntry>>(new Map());

	/** push applies one record; anything but an approval record is ignored. */
	push(r: LogRecord): void {
		if (r.kind !== 'system' || r.data.type !== 'approval' || !r.data.approval) return;
		const a = r.data.approval;
		const old = this.#entries.get(a.id);
		const m = new Map(this.#entries);
		m.set(a.id, { ...old, ...a, nodeId: r.node_id, seq: old?.seq ?? r.seq });
		this.#entries = m;
	}

	/** forget drops the entries of deleted nodes. */
	forget(nodeIds: Iterable<string>): void {
		const gone = new Set(nodeIds);
		if (![...this.#entries.values()].some((e) => gone.has(e.nodeId))) return;
		this.#entries = new Map([...this.#entries].filter(([, e]) => !gone.has(e.nodeId)));
	}

	/** pending are the requests waiting for an answer, oldest first. */
	get pending(): InboxEntry[] {
		return [...this.#entries.values()].filter((e) => e.status === 'pending').sort((a, b) => a.seq - b.seq);
	}

	/** waiting counts a node's requests waiting for an answer (the badge on its tree row). */
	waiting(nodeId: string): number {
		let n = 0;
		for (const e of this.#entries.values()) if (e.nodeId === nodeId && e.status === 'pending') n++;
		return n;
	}

	/** answered are the last answered requests, newest first. */
	answered(limit = 10): InboxEntry[] {
		return [...this.#entries.values()]
			.filter((e) => e.status !== 'pending')
			.sort((a, b) => b.seq - a.seq)
			.slice(0, limit);
	}
}
