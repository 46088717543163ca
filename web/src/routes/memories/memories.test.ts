import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import Page from './+page.svelte';

const mem = (id: string, repo: string, key: string) => ({ id, repo, key, text: `about ${key}`, created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' });

describe('Memory page', () => {
	it('lists memories by repository, filters, and deletes one', async () => {
		const load = vi.fn().mockResolvedValue([mem('1', 'github.com/o/r', 'tests'), mem('2', '', 'notes'), mem('3', 'github.com/o/r', 'build')]);
		const remove = vi.fn().mockResolvedValue(undefined);
		render(Page, { load, remove });
		await waitFor(() => expect(screen.getAllByTestId('memory-item')).toHaveLength(3));
		const repos = screen.getAllByTestId('memory-repo').map((r) => r.querySelector('h2')!.textContent);
		expect(repos).toEqual(['sessions without a repository', 'github.com/o/r']);
		await fireEvent.input(screen.getByRole('searchbox', { name: 'Filter memories' }), { target: { value: 'build' } });
		await waitFor(() => expect(screen.getAllByTestId('memory-item')).toHaveLength(1));
		await fireEvent.click(screen.getByRole('button', { name: 'Delete build' }));
		expect(remove).toHaveBeenCalledWith('3');
		await waitFor(() => expect(screen.queryAllByTestId('memory-item')).toHaveLength(0));
	});
});
