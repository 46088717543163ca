import { fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import { afterEach, describe, expect, it, vi } from 'vitest';
import AgentPanel from './AgentPanel.svelte';
import { ev, node } from '$lib/test/fixtures';
import { createFileFeed } from '$lib/files';

describe('AgentPanel Files tab', () => {
	afterEach(() => vi.unstubAllGlobals());
	it('switches between Chat and Files; the Files tab stays mounted and gets file records', async () => {
		const fetch = vi.fn(async (url: string) =>
			new Response(JSON.stringify({ data: [{ path: '/x.txt', name: 'x.txt', is_directory: false, is_readonly: false, size_bytes: 1, created_at: '', updated_at: '' }] }), { status: 200 })
		);
		vi.stubGlobal('fetch', fetch);
		const feed = createFileFeed();
		const a = node('a', null, 'alpha', 'running');
		render(AgentPanel, { node: a, records: [ev('a', { type: 'text', content: 'hi' })], onsend: vi.fn(), sessionId: 's1', fileFeed: feed });
		const tabs = screen.getByRole('tablist');
		expect(screen.getByText('hi')).toBeTruthy();
		expect(screen.queryByRole('region', { name: 'Files' })).toBeNull();
		await fireEvent.click(within(tabs).getByRole('tab', { name: 'Files' }));
		expect(await screen.findByRole('button', { name: /^x.txt/ })).toBeTruthy();
		expect(screen.queryByText('hi')).toBeNull();
		expect(fetch.mock.calls[0][0]).toBe('/api/v1/sessions/s1/fs');
		await fireEvent.click(within(tabs).getByRole('tab', { name: 'Chat' }));
		expect(screen.getByText('hi')).toBeTruthy();
		expect(screen.getByRole('region', { name: 'Files', hidden: true })).toBeTruthy();
		feed.push({ seq: 1, kind: 'file', node_id: 'a', at: '', data: { op: 'created', path: '/y', size: 0 } });
		await waitFor(() => expect(fetch).toHaveBeenCalledTimes(2), { timeout: 2000 });
	});
});
