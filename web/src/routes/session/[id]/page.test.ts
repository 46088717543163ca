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

const url = new URL('http://x/session/s1?spawn=1');
vi.mock('$app/state', () => ({ page: { params: { id: 's1' }, get url() { return url; } } }));
vi.mock('$app/navigation', () => ({ afterNavigate: (cb: () => void) => queueMicrotask(cb), replaceState: vi.fn() }));
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
		expect(screen.getByText('kid', { selector: 'strong' })).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() => expect(fake.createNode).toHaveBeenCalled());
		expect(fake.createNode.mock.calls[0][0]).toBe('s1');
		expect(fake.createNode.mock.calls[0][1]).toMatchObject({ agent_type: 'pi', model: 'm1', parent_id: 'kid' });
		expect(await screen.findByRole('heading', { name: 'quick-5' })).toBeTruthy();
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
		await vi.waitFor(() => expect(fake.sendMessage).toHaveBeenCalledWith('s1', 'root', 'hello'));
	});

	it('shows the agent named in ?node= after a reload, and keeps the shown agent in the address', async () => {
		const nav = await import('$app/navigation');
		url.search = '?node=kid';
		render(Page);
		expect(await screen.findByRole('heading', { name: 'kid' })).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: 'Running root 0/1' }));
		expect(await screen.findByRole('heading', { name: 'root' })).toBeTruthy();
		const calls = (nav.replaceState as unknown as { mock: { calls: [URL][] } }).mock.calls;
		expect(calls.some(([u]) => new URL(u).searchParams.get('node') === 'root')).toBe(true);
	});

	// SvelteKit's replaceState does not update page.url, so the mock leaves `url` alone too.
	const written = async () => {
		const nav = await import('$app/navigation');
		return (nav.replaceState as unknown as { mock: { calls: [URL][] } }).mock.calls.map(([u]) => new URL(u));
	};

	it('drops ?spawn=1 from the address once the modal opened, and never writes it back', async () => {
		url.search = '?spawn=1';
		render(Page);
		expect(await screen.findByRole('dialog', { name: 'Spawn agent' })).toBeTruthy();
		await vi.waitFor(async () => expect((await written()).some((u) => u.searchParams.get('node') === 'root')).toBe(true));
		const urls = await written();
		expect(urls.length).toBeGreaterThan(0);
		for (const u of urls) expect(u.searchParams.has('spawn')).toBe(false);
		expect(urls.at(-1)!.searchParams.get('node')).toBe('root');
	});

	it('when the shown agent is deleted, the selection and ?node= move to the root', async () => {
		url.search = '?node=kid';
		render(Page);
		expect(await screen.findByRole('heading', { name: 'kid' })).toBeTruthy();
		FakeWS.all[0].send(nodeRec('deleted', nodes[1], 1, ['kid']));
		expect(await screen.findByRole('heading', { name: 'root' })).toBeTruthy();
		await vi.waitFor(async () => expect((await written()).at(-1)?.searchParams.get('node')).toBe('root'));
	});
});
