import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LiveSession } from './session.svelte';
import { ev, input, node, nodeRec, resetSeq } from '$lib/test/fixtures';
import type { LogRecord } from '$lib/types';

class FakeWS {
	static all: FakeWS[] = [];
	url: string;
	closed = false;
	onopen: ((e: unknown) => void) | null = null;
	onmessage: ((e: { data: unknown }) => void) | null = null;
	onclose: ((e: unknown) => void) | null = null;
	onerror: ((e: unknown) => void) | null = null;
	constructor(url: string) {
		this.url = url;
		FakeWS.all.push(this);
	}
	close() {
		this.closed = true;
	}
	open() {
		this.onopen?.({});
	}
	send(...recs: LogRecord[]) {
		for (const r of recs) this.onmessage?.({ data: JSON.stringify(r) });
	}
	drop(code?: number) {
		this.closed = true;
		this.onclose?.(code === undefined ? {} : { code });
	}
}
const last = () => FakeWS.all[FakeWS.all.length - 1];
const after = (ws: FakeWS) => Number(new URL(ws.url).searchParams.get('after'));

async function started(opts: Partial<ConstructorParameters<typeof LiveSession>[0]> = {}) {
	const live = new LiveSession({
		sessionId: 's1',
		url: (a) => `ws://x/api/v1/sessions/s1/stream?after=${a}`,
		loadTree: async () => [node('root', null, 'root', 'idle'), node('kid', 'root', 'kid', 'idle')],
		WebSocket: FakeWS,
		random: () => 0.5,
		...opts
	});
	await live.start();
	return live;
}

describe('LiveSession', () => {
	beforeEach(() => {
		FakeWS.all = [];
		resetSeq();
		vi.useFakeTimers();
	});
	afterEach(() => vi.useRealTimers());

	it('loads the tree, then opens the stream after=0', async () => {
		const live = await started();
		expect(live.loaded).toBe(true);
		expect([...live.nodes.keys()]).toEqual(['root', 'kid']);
		expect(FakeWS.all).toHaveLength(1);
		expect(after(last())).toBe(0);
		last().open();
		expect(live.state).toBe('live');
	});

	it('applies records in seq order per node and ignores duplicates', async () => {
		const live = await started();
		const ws = last();
		ws.open();
		const a = ev('root', { type: 'text', content: 'a' });
		const b = input('kid', { type: 'message', from: 'user', content: 'b' });
		const c = ev('root', { type: 'text', content: 'c' });
		ws.send(a, b, a, c, b);
		live.flush();
		expect(live.records('root').map((r) => r.seq)).toEqual([1, 3]);
		expect(live.records('kid').map((r) => r.seq)).toEqual([2]);
		expect(live.lastSeq).toBe(3);
	});

	it('on a gap reconnects with after=<last applied> and never duplicates', async () => {
		const live = await started();
		const ws1 = last();
		ws1.open();
		const r1 = ev('root', { type: 'text', content: '1' }, 1);
		const r2 = ev('root', { type: 'text', content: '2' }, 2);
		const r3 = ev('root', { type: 'text', content: '3' }, 3);
		const r4 = ev('root', { type: 'text', content: '4' }, 4);
		ws1.send(r1, r3); // 2 is missing
		expect(ws1.closed).toBe(true);
		vi.runOnlyPendingTimers();
		const ws2 = last();
		expect(ws2).not.toBe(ws1);
		expect(after(ws2)).toBe(1);
		ws2.open();
		ws2.send(r1, r2, r3, r4); // server replays from after=1; r1 is a duplicate anyway
		live.flush();
		expect(live.records('root').map((r) => r.seq)).toEqual([1, 2, 3, 4]);
	});

	it('accepts a gap the server confirms (same seq after reconnecting) so it cannot loop', async () => {
		const live = await started();
		last().open();
		last().send(ev('root', { type: 'text', content: '1' }, 1), ev('root', { type: 'text', content: '5' }, 5));
		vi.runOnlyPendingTimers();
		const ws2 = last();
		expect(after(ws2)).toBe(1);
		ws2.open();
		ws2.send(ev('root', { type: 'text', content: '5' }, 5), ev('root', { type: 'text', content: '6' }, 6));
		live.flush();
		expect(live.records('root').map((r) => r.seq)).toEqual([1, 5, 6]);
		expect(FakeWS.all).toHaveLength(2);
	});

	it('reconnects with exponential backoff and jitter after a drop, from the last seq', async () => {
		const live = await started();
		last().open();
		last().send(ev('root', { type: 'text', content: '1' }, 1));
		last().drop();
		expect(live.state).toBe('reconnecting');
		// random 0.5 → factor 0.75: 375 ms, then 750 ms, then 1500 ms
		vi.advanceTimersByTime(374);
		expect(FakeWS.all).toHaveLength(1);
		vi.advanceTimersByTime(1);
		expect(FakeWS.all).toHaveLength(2);
		expect(after(last())).toBe(1);
		last().drop();
		vi.advanceTimersByTime(749);
		expect(FakeWS.all).toHaveLength(2);
		vi.advanceTimersByTime(1);
		expect(FakeWS.all).toHaveLength(3);
		last().open();
		expect(live.state).toBe('live');
		expect(live.reconnects).toBe(2);
	});

	it('stops for good with a message when the session is deleted (close 4404)', async () => {
		const live = await started();
		last().open();
		last().drop(4404);
		expect(live.state).toBe('closed');
		expect(live.error).toBe('this session was deleted');
		await vi.advanceTimersByTimeAsync(60_000);
		expect(FakeWS.all).toHaveLength(1);
	});

	it('starts over from after=0 when the server has not got its records (close 4422)', async () => {
		const loadTree = vi.fn(async () => [node('root', null, 'root', 'idle')]);
		const live = await started({ loadTree });
		last().open();
		last().send(ev('root', { type: 'text', content: 'a' }), ev('root', { type: 'text', content: 'b' }));
		await vi.advanceTimersByTimeAsync(100);
		expect(live.lastSeq).toBeGreaterThan(0);
		last().drop(4422);
		await vi.advanceTimersByTimeAsync(0);
		expect(loadTree).toHaveBeenCalledTimes(2);
		expect(FakeWS.all).toHaveLength(2);
		expect(after(last())).toBe(0);
		expect(live.records('root')).toHaveLength(0);
		last().open();
		resetSeq();
		last().send(ev('root', { type: 'text', content: 'again' }));
		await vi.advanceTimersByTimeAsync(100);
		expect(live.records('root').map((r) => r.seq)).toEqual([1]);
		expect(live.state).toBe('live');
	});

	it('stops when the probe says the session is gone or the user signed out', async () => {
		const probe = vi.fn().mockRejectedValue(Object.assign(new Error('session not found'), { status: 404 }));
		const live = await started({ probe });
		last().drop(); // failed before opening
		await vi.waitFor(() => expect(live.state).toBe('closed'));
		expect(live.error).toBe('session not found');
		vi.runOnlyPendingTimers();
		expect(FakeWS.all).toHaveLength(1);
	});

	it('keeps nodes from node records and status events', async () => {
		const live = await started();
		last().open();
		const child = node('new', 'kid', 'new', 'idle');
		last().send(
			nodeRec('created', child),
			ev('new', { type: 'status', state: 'thinking', context_pct: 0.3 }),
			ev('root', { type: 'done' })
		);
		live.flush();
		expect(live.nodes.get('new')!.status).toBe('thinking');
		expect(live.nodes.get('new')!.context_pct).toBe(0.3);
		expect(live.nodes.get('root')!.status).toBe('done');
		last().send(nodeRec('updated', { ...child, name: 'renamed', status: 'running' }));
		live.flush();
		expect(live.nodes.get('new')!.name).toBe('renamed');
		last().send(nodeRec('deleted', child, undefined, ['kid', 'new']));
		live.flush();
		expect([...live.nodes.keys()]).toEqual(['root']);
		expect(live.records('new')).toHaveLength(0);
	});

	it('a paused node stays paused whatever its late events say, until a node record', async () => {
		// The server says paused (the node record of the pause, status "paused" whatever the agent
		// said last, "done" included); a status or done line the agent wrote before it was frozen
		// may come after and must not hide it, or the panel offers Pause instead of Resume.
		const live = await started({
			loadTree: async () => [node('root', null, 'root', 'done', { container_id: 'c1' }), node('kid', 'root', 'kid', 'idle', { container_id: 'k1' })]
		});
		last().open();
		const root = live.nodes.get('root')!;
		last().send(nodeRec('updated', { ...root, status: 'paused' }), ev('root', { type: 'status', state: 'idle' }), ev('root', { type: 'done' }));
		live.flush();
		expect(live.nodes.get('root')!.status).toBe('paused');
		last().send(ev('kid', { type: 'status', state: 'running' }));
		live.flush();
		expect(live.nodes.get('kid')!.status).toBe('running');
		last().send(nodeRec('updated', { ...root, status: 'done' }));
		live.flush();
		expect(live.nodes.get('root')!.status).toBe('done');
	});

	it('batches a burst into one update and keeps array identity per untouched node', async () => {
		const live = await started();
		last().open();
		last().send(ev('kid', { type: 'text', content: 'k' }));
		live.flush();
		const kid = live.records('kid');
		for (let i = 0; i < 1000; i++) last().send(ev('root', { type: 'text', content: String(i) }));
		expect(live.records('root')).toHaveLength(0); // not yet flushed
		vi.advanceTimersByTime(20);
		expect(live.records('root')).toHaveLength(1000);
		expect(live.records('kid')).toBe(kid);
	});

	it('close() stops reconnecting', async () => {
		const live = await started();
		const ws = last();
		ws.open();
		live.close();
		expect(ws.closed).toBe(true);
		vi.runOnlyPendingTimers();
		expect(FakeWS.all).toHaveLength(1);
		expect(live.state).toBe('closed');
	});
});
