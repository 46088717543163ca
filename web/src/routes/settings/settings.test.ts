import { fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import Page, { type SettingsClient } from './+page.svelte';
import TopBar from '$lib/components/session/TopBar.svelte';
import type { SecretInfo, SetSecretRequest } from '$lib/openapi/generated';

const at = '2026-01-01T00:00:00Z';
const info = (name: string, kind: SecretInfo['kind'], extra: Partial<SecretInfo> = {}): SecretInfo => ({ name, kind, scope: 'user', created_at: at, updated_at: at, ...extra });

// fakeServer keeps secrets as the API does: values go in and never come out.
function fakeServer(mine: SecretInfo[], perSession: Record<string, SecretInfo[]> = {}) {
	const values = new Map<string, string>();
	const put = vi.fn(async (name: string, body: SetSecretRequest, sid?: string) => {
		const list = sid ? (perSession[sid] ??= []) : mine;
		const s = info(name, body.kind ?? 'vendor', { host: body.host, username: body.username, scope: sid ? 'session' : 'user', session_id: sid, updated_at: '2026-02-01T00:00:00Z' });
		const i = list.findIndex((x) => x.name === name);
		if (i >= 0) list[i] = { ...s, created_at: list[i].created_at };
		else list.push(s);
		values.set(`${sid ?? ''}/${name}`, body.value);
		return s;
	});
	const remove = vi.fn(async (name: string, sid?: string) => {
		const list = sid ? perSession[sid] : mine;
		list.splice(
			list.findIndex((x) => x.name === name),
			1
		);
	});
	const client: SettingsClient = {
		secrets: vi.fn(async (sid?: string) => structuredClone(sid ? [...(perSession[sid] ?? []), ...mine] : mine)),
		put,
		remove,
		sessions: async () => [{ id: 's1', name: 'fix-bug' } as never, { id: 's2', name: 'docs' } as never],
		agents: async () => [{ type: 'amp', vendor_key: 'AMP_API_KEY' } as never, { type: 'shelley' } as never, { type: 'cursor', vendor_key: 'CURSOR_API_KEY' } as never],
		knownHosts: async () => [],
		forgetHost: vi.fn(async () => {})
	};
	return { client, put, remove, values };
}

const rows = () => screen.queryAllByTestId('secret').map((r) => r.dataset.name);

describe('Settings page', () => {
	it('lists your secrets with kind, host and dates, and never a value', async () => {
		const { client } = fakeServer([info('github', 'github_token', { host: 'github.com', used_at: at }), info('AMP_API_KEY', 'vendor')]);
		render(Page, { client });
		await waitFor(() => expect(rows()).toEqual(['github', 'AMP_API_KEY']));
		const gh = screen.getAllByTestId('secret')[0];
		expect(gh.textContent).toContain('GitHub token');
		expect(gh.textContent).toContain('github.com');
		expect(screen.getAllByTestId('secret')[1].textContent).toContain('never'); // never used
		expect([...document.querySelectorAll('input, textarea')].map((e) => (e as HTMLInputElement).value).filter(Boolean)).toEqual([]);
	});

	it('adds a GitHub token: kind, host and value are sent, the value is not shown', async () => {
		const { client, put } = fakeServer([]);
		render(Page, { client });
		await screen.findByText(/No secrets yet/);
		await fireEvent.click(screen.getByRole('button', { name: 'Add secret' }));
		const dlg = screen.getByRole('dialog', { name: 'Add a secret' });
		expect((within(dlg).getByLabelText('Kind') as HTMLSelectElement).value).toBe('github_token');
		const add = within(dlg).getByRole('button', { name: 'Add' }) as HTMLButtonElement;
		expect(add.disabled).toBe(true); // a name and a value first
		await fireEvent.input(within(dlg).getByLabelText('Name'), { target: { value: 'github' } });
		await fireEvent.input(within(dlg).getByLabelText(/^Host/), { target: { value: ' github.com ' } });
		const value = within(dlg).getByLabelText(/^Value/) as HTMLInputElement;
		expect(value.type).toBe('password');
		await fireEvent.input(value, { target: { value: 'ghp_SECRET1' } });
		await fireEvent.click(add);
		expect(put).toHaveBeenCalledWith('github', { kind: 'github_token', value: 'ghp_SECRET1', host: 'github.com' }, undefined);
		await waitFor(() => expect(rows()).toEqual(['github']));
		expect(screen.queryByRole('dialog')).toBeNull();
		expect(document.body.textContent).not.toContain('ghp_SECRET1');
	});

	it("a vendor key's name is one an agent needs; an SSH key is pasted in a text area", async () => {
		const { client, put } = fakeServer([]);
		render(Page, { client });
		await screen.findByText(/No secrets yet/);
		await fireEvent.click(screen.getByRole('button', { name: 'Add secret' }));
		let dlg = screen.getByRole('dialog', { name: 'Add a secret' });
		await fireEvent.change(within(dlg).getByLabelText('Kind'), { target: { value: 'vendor' } });
		const name = within(dlg).getByLabelText('Name') as HTMLSelectElement;
		await waitFor(() => expect([...name.options].map((o) => o.value)).toEqual(['AMP_API_KEY', 'CURSOR_API_KEY']));
		expect(within(dlg).queryByLabelText(/^Host/)).toBeNull();
		await fireEvent.change(name, { target: { value: 'CURSOR_API_KEY' } });
		await fireEvent.input(within(dlg).getByLabelText(/^Value/), { target: { value: 'cur-1' } });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Add' }));
		expect(put).toHaveBeenLastCalledWith('CURSOR_API_KEY', { kind: 'vendor', value: 'cur-1' }, undefined);

		await waitFor(() => expect(rows()).toEqual(['CURSOR_API_KEY']));
		await fireEvent.click(screen.getByRole('button', { name: 'Add secret' }));
		dlg = screen.getByRole('dialog', { name: 'Add a secret' });
		await fireEvent.change(within(dlg).getByLabelText('Kind'), { target: { value: 'git_ssh' } });
		expect(within(dlg).getByLabelText(/^Private key/).tagName).toBe('TEXTAREA');
		expect(within(dlg).queryByLabelText(/^User name/)).toBeNull();
	});

	it('rotates a secret: the same name and kind, a new value; a refused value says why in the dialog', async () => {
		const { client, put, values } = fakeServer([info('corp', 'git_https', { host: 'git.corp', username: 'alice' })]);
		render(Page, { client });
		await fireEvent.click(await screen.findByRole('button', { name: 'Rotate corp' }));
		const dlg = screen.getByRole('dialog', { name: 'Rotate corp' });
		expect(within(dlg).queryByLabelText('Kind')).toBeNull();
		expect((within(dlg).getByLabelText(/^Host/) as HTMLInputElement).value).toBe('git.corp');
		expect((within(dlg).getByLabelText(/^Value/) as HTMLInputElement).value).toBe(''); // write-only
		put.mockRejectedValueOnce(new Error('the value of corp must be one line'));
		await fireEvent.input(within(dlg).getByLabelText(/^Value/), { target: { value: 'new-PASS' } });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Rotate' }));
		expect((await within(dlg).findByRole('alert')).textContent).toContain('must be one line');
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Rotate' }));
		await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
		expect(put).toHaveBeenLastCalledWith('corp', { kind: 'git_https', value: 'new-PASS', host: 'git.corp', username: 'alice' }, undefined);
		expect(values.get('/corp')).toBe('new-PASS');
		// the list is read again: its Changed date is the rotation's
		await waitFor(() => expect(screen.getByTestId('secret').querySelector('td[title="2026-02-01T00:00:00Z"]')).toBeTruthy());
	});

	it('deletes a secret after asking', async () => {
		const { client, remove } = fakeServer([info('github', 'github_token'), info('gitlab', 'gitlab_token')]);
		render(Page, { client });
		await fireEvent.click(await screen.findByRole('button', { name: 'Delete gitlab' }));
		const dlg = screen.getByRole('dialog', { name: 'Delete secret' });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Cancel' }));
		expect(remove).not.toHaveBeenCalled();
		await fireEvent.click(screen.getByRole('button', { name: 'Delete gitlab' }));
		await fireEvent.click(within(screen.getByRole('dialog', { name: 'Delete secret' })).getByRole('button', { name: 'Delete' }));
		expect(remove).toHaveBeenCalledWith('gitlab', undefined);
		await waitFor(() => expect(rows()).toEqual(['github']));
	});

	it("a session's own secrets: listed apart from yours, added, rotated and deleted on that session", async () => {
		const { client, put, remove } = fakeServer([info('github', 'github_token')], { s1: [info('github', 'github_token', { scope: 'session', session_id: 's1' })] });
		render(Page, { client });
		await waitFor(() => expect(rows()).toEqual(['github']));
		const pick = screen.getByLabelText('Session') as HTMLSelectElement;
		await waitFor(() => expect(pick.options).toHaveLength(3));
		await fireEvent.change(pick, { target: { value: 's2' } });
		await screen.findByText('docs uses your secrets: it has none of its own.');
		await fireEvent.change(pick, { target: { value: 's1' } });
		await waitFor(() => expect(rows()).toEqual(['github', 'github'])); // yours, then the session's own
		await fireEvent.click(screen.getByRole('button', { name: 'Add to fix-bug' }));
		const dlg = screen.getByRole('dialog', { name: 'Add a secret' });
		expect(dlg.textContent).toContain('A secret of the session fix-bug only.');
		await fireEvent.input(within(dlg).getByLabelText('Name'), { target: { value: 'deploy' } });
		await fireEvent.input(within(dlg).getByLabelText(/^Value/), { target: { value: 'tok' } });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Add' }));
		expect(put).toHaveBeenLastCalledWith('deploy', { kind: 'github_token', value: 'tok' }, 's1');
		await waitFor(() => expect(rows()).toEqual(['github', 'github', 'deploy']));
		const session = screen.getAllByTestId('secrets')[1];
		await fireEvent.click(within(session).getByRole('button', { name: 'Delete github' }));
		await fireEvent.click(within(screen.getByRole('dialog', { name: 'Delete secret' })).getByRole('button', { name: 'Delete' }));
		expect(remove).toHaveBeenCalledWith('github', 's1');
		await waitFor(() => expect(rows()).toEqual(['github', 'deploy']));
	});

	it('is reachable from the top bar', () => {
		render(TopBar);
		expect(screen.getByRole('link', { name: 'Settings' }).getAttribute('href')).toBe('/settings');
	});
});
