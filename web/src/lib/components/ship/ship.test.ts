import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import PushDialog from './PushDialog.svelte';
import { ApiError } from '$lib/api';
import type { PushResult } from '$lib/openapi/generated';

const pushed: PushResult = {
	remote_url: 'ssh://git@h/r.git',
	branch: 'filepath/fixer',
	commit: '0123456789abcdef0123',
	status: 'created',
	credential: 'deploy',
};

describe('PushDialog', () => {
	it('pushes the default branch, trusts a new SSH host only when asked, then opens a pull request', async () => {
		const fp = 'SHA256:abcDEF123+/xyz';
		const push = vi
			.fn()
			.mockRejectedValueOnce(
				new ApiError(
					412,
					'precondition_failed',
					`h:22 is a new SSH host: it presents the ssh-ed25519 key ${fp}. Check it`,
					'trust_host_key',
				),
			)
			.mockResolvedValueOnce(pushed);
		const pullRequest = vi
			.fn()
			.mockResolvedValue({
				forge: 'github',
				url: 'https://github.com/o/r/pull/7',
				number: 7,
				updated: false,
				branch: 'filepath/fixer',
				base: 'main',
			});
		render(PushDialog, {
			nodeName: 'fixer',
			push,
			pullRequest,
			onclose: () => {},
		});

		await fireEvent.click(screen.getByRole('button', { name: 'Push' }));
		expect(push).toHaveBeenLastCalledWith({
			branch: 'filepath/fixer',
			remote_url: undefined,
			credential: undefined,
			trust_host_key: undefined,
		});
		expect((await screen.findByTestId('host-key')).textContent).toContain(fp);

		await fireEvent.click(
			screen.getByRole('button', { name: 'Trust and push' }),
		);
		await waitFor(() => expect(push).toHaveBeenCalledTimes(2));
		expect(push.mock.calls[1][0].trust_host_key).toBe(fp);
		expect((await screen.findByTestId('pushed')).textContent).toContain(
			'0123456789ab',
		);

		// GitHub Enterprise (or a forge on another address): its API root, typed
		await fireEvent.input(screen.getByLabelText(/^Forge API/), {
			target: { value: ' https://ghe.example.com/api/v3 ' },
		});
		await fireEvent.click(
			screen.getByRole('button', { name: 'Open pull request' }),
		);
		expect((await screen.findByTestId('pr')).textContent).toContain(
			'https://github.com/o/r/pull/7',
		);
		expect(pullRequest).toHaveBeenCalledWith({
			branch: 'filepath/fixer',
			remote_url: undefined,
			title: undefined,
			body: undefined,
			api_base: 'https://ghe.example.com/api/v3',
		});
	});

	it('reports a failed pull request after a push as exactly that', async () => {
		const push = vi.fn().mockResolvedValue(pushed);
		const pullRequest = vi
			.fn()
			.mockRejectedValue(
				new ApiError(503, 'unavailable', 'the forge is unreachable'),
			);
		render(PushDialog, {
			nodeName: 'fixer',
			push,
			pullRequest,
			onclose: () => {},
		});
		await fireEvent.click(screen.getByRole('button', { name: 'Push' }));
		await fireEvent.click(
			await screen.findByRole('button', { name: 'Open pull request' }),
		);
		expect((await screen.findByRole('alert')).textContent).toMatch(
			/push succeeded; the pull request failed.*unreachable/,
		);
		expect(
			screen.getByRole('button', { name: 'Open pull request' }),
		).toBeTruthy();
	});
});
