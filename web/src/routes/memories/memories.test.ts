import { fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
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
		// issue 27.8: a delete asks first (it cannot be undone); Cancel keeps the memory
		let dlg = screen.getByRole('dialog', { name: 'Delete memory' });
		expect(dlg.textContent).toContain('Delete the memory build of github.com/o/r?');
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Cancel' }));
		expect(remove).not.toHaveBeenCalled();
		expect(screen.getAllByTestId('memory-item')).toHaveLength(1);
		await fireEvent.click(screen.getByRole('button', { name: 'Delete build' }));
		dlg = screen.getByRole('dialog', { name: 'Delete memory' });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Delete' }));
		expect(remove).toHaveBeenCalledWith('3');
		await waitFor(() => expect(screen.queryAllByTestId('memory-item')).toHaveLength(0));
	});

	it('a failed delete says why in the dialog and keeps the memory', async () => {
		const load = vi.fn().mockResolvedValue([mem('1', '', 'notes')]);
		const remove = vi.fn().mockRejectedValue(new Error('memory 1 not found'));
		render(Page, { load, remove });
		await fireEvent.click(await screen.findByRole('button', { name: 'Delete notes' }));
		await fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Delete' }));
		expect((await screen.findByRole('alert')).textContent).toContain('Could not delete “notes”: memory 1 not found');
		expect(screen.getAllByTestId('memory-item')).toHaveLength(1);
	});
});
