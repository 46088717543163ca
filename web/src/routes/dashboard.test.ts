import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { Session } from '$lib/types';
import { injectStyles } from '$lib/test/css';

const goto = vi.fn();
vi.mock('$app/navigation', () => ({ goto: (...a: unknown[]) => goto(...a) }));
const fake = {
	sessions: vi.fn(),
	stopSession: vi.fn(),
	startSession: vi.fn(),
	deleteSession: vi.fn(),
	createSession: vi.fn()
};
vi.mock('$lib/api', async (orig) => ({ ...(await orig<typeof import('$lib/api')>()), api: fake }));

const { default: Page } = await import('./+page.svelte');
const { ApiError } = await import('$lib/api');

function session(id: string, name: string, status: Session['status'], extra: Partial<Session> = {}): Session {
	return {
		id, user_id: 'u', name, git_repo_url: null, status, root_node_id: 'r', started_at: null,
		created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z', node_count: 3,
		last_activity: new Date().toISOString(), checks: [], tokens_used: 0, cost_usd: 0, budget_tokens: null, budget_usd: null, ...extra
	};
}

describe('dashboard', () => {
	beforeEach(() => {
		vi.clearAllMocks();
		fake.sessions.mockResolvedValue([session('s1', 'brave-42', 'running', { git_repo_url: 'https://github.com/a/b.git', tokens_used: 125_000 }), session('s2', 'quiet-7', 'stopped')]);
	});

	it('lists sessions with status, node count and last activity', async () => {
		render(Page);
		expect(await screen.findByText('brave-42')).toBeTruthy();
		expect(screen.getByText('Running')).toBeTruthy();
		expect(screen.getByText('github.com/a/b.git')).toBeTruthy();
		expect(screen.getAllByText('3')).toHaveLength(2);
		expect(screen.getAllByText('just now')).toHaveLength(2);
		expect(screen.getAllByTestId('tokens').map((t) => t.textContent)).toEqual(['125k', '0']);
	});

	it('deletes only after confirmation, and removes the row', async () => {
		fake.deleteSession.mockResolvedValue(undefined);
		render(Page);
		await fireEvent.click(await screen.findByRole('button', { name: 'Delete brave-42' }));
		expect(fake.deleteSession).not.toHaveBeenCalled();
		expect(screen.getByText(/Delete “brave-42” and all its agents\?/)).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: 'Delete' }));
		await vi.waitFor(() => expect(screen.queryByText('brave-42')).toBeNull());
		expect(fake.deleteSession).toHaveBeenCalledWith('s1');
	});

	it('a refused stop shows the API error and keeps the status', async () => {
		fake.stopSession.mockRejectedValue(new ApiError(409, 'conflict', 'session is already stopping'));
		render(Page);
		await fireEvent.click(await screen.findByRole('button', { name: /stop/i }));
		expect((await screen.findByRole('alert')).textContent).toContain('session is already stopping');
		expect(screen.getByText('Running')).toBeTruthy();
	});

	it('a session whose root failed to start shows Error in red, and offers Start (a retry) and Delete', async () => {
		fake.sessions.mockResolvedValue([session('s3', 'broken-1', 'error')]);
		fake.startSession.mockResolvedValue(session('s3', 'broken-1', 'running'));
		render(Page);
		const badge = await screen.findByTestId('status');
		expect(badge.textContent).toBe('Error');
		expect(badge.classList.contains('error')).toBe(true);
		expect(badge.title).toMatch(/failed to start/);
		expect(screen.getByRole('button', { name: 'Delete broken-1' })).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: /start/i }));
		await vi.waitFor(() => expect(fake.startSession).toHaveBeenCalledWith('s3'));
		expect(await screen.findByText('Running')).toBeTruthy();
	});

	it('"New session" stays on one line beside the heading', async () => {
		const remove = injectStyles('src/routes/+page.svelte');
		try {
			render(Page);
			await screen.findByText('brave-42');
			const btn = screen.getByRole('button', { name: /new session/i });
			expect(getComputedStyle(btn).whiteSpace).toBe('nowrap');
			expect(getComputedStyle(btn).flexShrink).toBe('0');
			expect(getComputedStyle(screen.getByRole('heading', { name: 'Sessions' }).parentElement!).minWidth).toBe('0px');
		} finally {
			remove();
		}
	});

	it('New session creates and opens the session with the spawn modal', async () => {
		fake.createSession.mockResolvedValue(session('s9', 'x', 'draft'));
		render(Page);
		await fireEvent.click((await screen.findAllByRole('button', { name: /new session/i }))[0]);
		const name = screen.getByLabelText('Session name') as HTMLInputElement;
		expect(name.value).toMatch(/^[a-z]+-\d+$/);
		await fireEvent.input(screen.getByLabelText(/Git repository URL/), { target: { value: 'https://g/r.git' } });
		await fireEvent.click(screen.getByRole('button', { name: 'Create and spawn agent' }));
		await vi.waitFor(() => expect(goto).toHaveBeenCalledWith('/session/s9?spawn=1'));
		expect(fake.createSession).toHaveBeenCalledWith({ name: name.value, git_repo_url: 'https://g/r.git' });
	});

	it('New session takes health checks, one command per line', async () => {
		fake.createSession.mockResolvedValue(session('s9', 'x', 'draft'));
		render(Page);
		await fireEvent.click((await screen.findAllByRole('button', { name: /new session/i }))[0]);
		const name = screen.getByLabelText('Session name') as HTMLInputElement;
		await fireEvent.input(screen.getByLabelText(/Health checks/), { target: { value: 'go vet ./...\n\n  make test  \n' } });
		await fireEvent.click(screen.getByRole('button', { name: 'Create and spawn agent' }));
		await vi.waitFor(() => expect(fake.createSession).toHaveBeenCalled());
		expect(fake.createSession).toHaveBeenCalledWith({ name: name.value, checks: [{ command: 'go vet ./...' }, { command: 'make test' }] });
	});

	it('a failed create stays in the modal with the reason', async () => {
		fake.createSession.mockRejectedValue(new ApiError(422, 'invalid', 'git_repo_url must be https', 'git_repo_url'));
		render(Page);
		await fireEvent.click((await screen.findAllByRole('button', { name: /new session/i }))[0]);
		await fireEvent.click(screen.getByRole('button', { name: 'Create and spawn agent' }));
		expect((await screen.findByRole('alert')).textContent).toContain('git_repo_url must be https (git_repo_url)');
		expect(goto).not.toHaveBeenCalled();
	});

	it('shows a readable error when the list cannot load', async () => {
		fake.sessions.mockRejectedValue(new ApiError(0, 'network', 'cannot reach the filepath server; check that it is running'));
		render(Page);
		expect((await screen.findByRole('alert')).textContent).toContain('cannot reach the filepath server');
	});
});
