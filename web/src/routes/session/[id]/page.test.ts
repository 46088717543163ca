import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { node, ev, nodeRec } from '$lib/test/fixtures';
import type { LogRecord } from '$lib/types';

class FakeWS {
	static all: FakeWS[] = [];
	onopen: ((e: unknown) => void) | null = null;
	onmessage: ((e: { data: unknown }) => void) | null = null;
	onclose: ((e: unknown) => void) | null = null;
	onerror: ((e: unknown) => void) | null = null;
	constructor(public url: string) {
		FakeWS.all.push(this);
		queueMicrotask(() => this.onopen?.({}));
	}
	close() {}
	send(...recs: LogRecord[]) {
		for (const r of recs) this.onmessage?.({ data: JSON.stringify(r) });
	}
}

// The router: goto changes the (reactive) address as SvelteKit does; `back` stands for the
// browser's back button.
vi.mock('$app/state', async () => ({ page: (await import('$lib/test/page.svelte')).page }));
vi.mock('$app/navigation', async () => {
	const r = await import('$lib/test/page.svelte');
	return { afterNavigate: r.afterNavigate, goto: vi.fn(async (u: URL | string) => r.navigate(u)) };
});
const router = await import('$lib/test/page.svelte');
const nodes = [node('root', null, 'root', 'running'), node('kid', 'root', 'kid', 'idle', { agent_type: 'codex', model: 'gpt-5' })];
const fake = {
	session: vi.fn(),
	tree: vi.fn(),
	agents: vi.fn(),
	models: vi.fn(),
	createNode: vi.fn(),
	secrets: vi.fn(),
	setSecret: vi.fn(),
	sendMessage: vi.fn(),
	logs: vi.fn(),
	// no agent here works on a fork: the diff answers 404
	diff: vi.fn(() => Promise.reject(new Error('not forked'))),
	merge: vi.fn()
};
vi.mock('$lib/api', async (orig) => ({ ...(await orig<typeof import('$lib/api')>()), api: fake }));
const { default: Page } = await import('./+page.svelte');

describe('session page', () => {
	beforeEach(() => {
		vi.clearAllMocks();
		router.reset('http://x/session/s1?spawn=1');
		FakeWS.all = [];
		vi.stubGlobal('WebSocket', FakeWS);
		fake.session.mockResolvedValue({ id: 's1', name: 'brave-42', root_node_id: 'root', status: 'running' });
		fake.tree.mockResolvedValue(nodes);
		fake.agents.mockResolvedValue([{ type: 'pi', name: 'pi', description: '', icon: '', default_model: 'm1', image: '' }]);
		fake.models.mockResolvedValue({ providers: [{ name: 'p', models: [{ id: 'm1', name: 'M1' }] }] });
		fake.secrets.mockResolvedValue([]);
	});

	it('opens the spawn modal from ?spawn=1, selects the root, streams from after=0, and tree selection drives the panel', async () => {
		render(Page);
		expect(await screen.findByRole('dialog', { name: 'Spawn agent' })).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
		expect(await screen.findByRole('heading', { name: 'root' })).toBeTruthy();
		expect(FakeWS.all[0].url).toMatch(/\/api\/v1\/sessions\/s1\/stream\?after=0$/);
		FakeWS.all[0].send(ev('root', { type: 'text', content: 'root talks' }, 1), ev('kid', { type: 'text', content: 'kid talks' }, 2));
		expect(await screen.findByText('root talks')).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: 'Idle kid' }));
		expect(screen.getByRole('heading', { name: 'kid' })).toBeTruthy();
		expect(screen.getByTestId('agent-tag').textContent).toBe('codex');
		expect(await screen.findByText('kid talks')).toBeTruthy();
		expect(screen.queryByText('root talks')).toBeNull();
	});

	it('spawns as a child of the selected node and selects the new node', async () => {
		const created = node('new', 'kid', 'quick-5', 'idle', { agent_type: 'pi', model: 'm1' });
		fake.createNode.mockResolvedValue(created);
		render(Page);
		await screen.findByRole('dialog');
		await fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
		await fireEvent.click(await screen.findByRole('button', { name: 'Idle kid' }));
		await fireEvent.click(screen.getByRole('button', { name: /^spawn$/i }));
		await screen.findByRole('button', { name: 'pi' });
		expect((screen.getByLabelText('Parent') as HTMLSelectElement).value).toBe('kid');
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() => expect(fake.createNode).toHaveBeenCalled());
		expect(fake.createNode.mock.calls[0][0]).toBe('s1');
		expect(fake.createNode.mock.calls[0][1]).toMatchObject({ agent_type: 'pi', model: 'm1', parent_id: 'kid' });
		expect(await screen.findByRole('heading', { name: 'quick-5' })).toBeTruthy();
	});

	it('issue 27.7: spawns a second top-level agent; the tree shows both at the top', async () => {
		const created = node('top2', null, 'second', 'idle', { agent_type: 'pi', model: 'm1', sort_order: 1 });
		fake.createNode.mockResolvedValue(created);
		render(Page);
		await screen.findByRole('dialog');
		await fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
		await screen.findByRole('heading', { name: 'root' });
		await fireEvent.click(screen.getByRole('button', { name: /^spawn$/i }));
		await screen.findByRole('button', { name: 'pi' });
		const parent = screen.getByLabelText('Parent') as HTMLSelectElement;
		expect(parent.value).toBe('root');
		await fireEvent.change(parent, { target: { value: '' } });
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() => expect(fake.createNode).toHaveBeenCalled());
		expect(fake.createNode.mock.calls[0][1].parent_id).toBeUndefined();
		expect(await screen.findByRole('heading', { name: 'second' })).toBeTruthy();
		const tops = [...document.querySelectorAll('ul[role=tree] > li[role=treeitem] > .row .name')].map((e) => e.textContent);
		expect(tops).toEqual(['root', 'second']);
	});

	it('sends a message to the selected node', async () => {
		fake.sendMessage.mockResolvedValue({});
		render(Page);
		await screen.findByRole('dialog');
		await fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
		await screen.findByRole('heading', { name: 'root' });
		const area = screen.getByLabelText('Message');
		await fireEvent.input(area, { target: { value: 'hello' } });
		await fireEvent.keyDown(area, { key: 'Enter' });
		await vi.waitFor(() => expect(fake.sendMessage).toHaveBeenCalledWith('s1', 'root', 'hello', []));
	});

	it('shows the agent named in ?node= after a reload, and keeps the shown agent in the address', async () => {
		router.reset('http://x/session/s1?node=kid');
		render(Page);
		expect(await screen.findByRole('heading', { name: 'kid' })).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: 'Running root 0/1' }));
		expect(await screen.findByRole('heading', { name: 'root' })).toBeTruthy();
		await vi.waitFor(() => expect(router.page.url.searchParams.get('node')).toBe('root'));
		expect((await written()).every((u) => u.pathname === '/session/s1')).toBe(true);
	});

	it('issue 27.5: the address is the truth: back to ?node=X (from another page) shows X', async () => {
		router.reset('http://x/session/s1?node=root');
		render(Page);
		expect(await screen.findByRole('heading', { name: 'root' })).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: 'Idle kid' }));
		await vi.waitFor(() => expect(router.page.url.searchParams.get('node')).toBe('kid'));
		// the browser goes back to an entry naming root (the agent shown when the page loaded)
		router.navigate('http://x/session/s1?node=root');
		expect(await screen.findByRole('heading', { name: 'root' })).toBeTruthy();
		router.navigate('http://x/session/s1?node=kid');
		expect(await screen.findByRole('heading', { name: 'kid' })).toBeTruthy();
		expect(router.page.url.searchParams.get('node')).toBe('kid');
	});

	// Every address the page wrote (goto with replaceState: a real navigation, page.url follows).
	const written = async () => {
		const nav = await import('$app/navigation');
		const calls = (nav.goto as unknown as { mock: { calls: [URL | string, { replaceState?: boolean }][] } }).mock.calls;
		for (const [, o] of calls) expect(o?.replaceState).toBe(true);
		return calls.map(([u]) => new URL(String(u), 'http://x'));
	};

	it('drops ?spawn=1 from the address once the modal opened, and never writes it back', async () => {
		router.reset('http://x/session/s1?spawn=1');
		render(Page);
		expect(await screen.findByRole('dialog', { name: 'Spawn agent' })).toBeTruthy();
		await vi.waitFor(async () => expect((await written()).some((u) => u.searchParams.get('node') === 'root')).toBe(true));
		const urls = await written();
		expect(urls.length).toBeGreaterThan(0);
		for (const u of urls) expect(u.searchParams.has('spawn')).toBe(false);
		expect(urls.at(-1)!.searchParams.get('node')).toBe('root');
	});

	it('when the shown agent is deleted, the selection and ?node= move to the root', async () => {
		router.reset('http://x/session/s1?node=kid');
		render(Page);
		expect(await screen.findByRole('heading', { name: 'kid' })).toBeTruthy();
		FakeWS.all[0].send(nodeRec('deleted', nodes[1], 1, ['kid']));
		expect(await screen.findByRole('heading', { name: 'root' })).toBeTruthy();
		await vi.waitFor(async () => expect((await written()).at(-1)?.searchParams.get('node')).toBe('root'));
	});
});
