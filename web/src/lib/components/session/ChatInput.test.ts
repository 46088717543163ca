import { fireEvent, render, screen } from '@testing-library/svelte';
import { tick } from 'svelte';
import { describe, expect, it, vi } from 'vitest';
import ChatInput from './ChatInput.svelte';
import { ApiError } from '$lib/api';

async function type(text: string) {
	const area = screen.getByLabelText('Message') as HTMLTextAreaElement;
	await fireEvent.input(area, { target: { value: text } });
	return area;
}

describe('ChatInput', () => {
	it('Enter sends the content and clears', async () => {
		const onsend = vi.fn().mockResolvedValue(undefined);
		render(ChatInput, { onsend });
		const area = await type('hello agent');
		await fireEvent.keyDown(area, { key: 'Enter' });
		await tick();
		await tick();
		expect(onsend).toHaveBeenCalledWith('hello agent', []);
		expect(area.value).toBe('');
	});

	it('Shift+Enter does not send', async () => {
		const onsend = vi.fn();
		render(ChatInput, { onsend });
		const area = await type('line one');
		await fireEvent.keyDown(area, { key: 'Enter', shiftKey: true });
		expect(onsend).not.toHaveBeenCalled();
	});

	it('the send button sends; empty text cannot be sent', async () => {
		const onsend = vi.fn().mockResolvedValue(undefined);
		render(ChatInput, { onsend });
		const btn = screen.getByRole('button', { name: 'Send' }) as HTMLButtonElement;
		expect(btn.disabled).toBe(true);
		await type('x');
		expect(btn.disabled).toBe(false);
		await fireEvent.click(btn);
		expect(onsend).toHaveBeenCalledWith('x', []);
	});

	it('is disabled while sending; a failure shows the API error and keeps the text', async () => {
		let reject!: (e: unknown) => void;
		const onsend = vi.fn(() => new Promise((_, r) => (reject = r)));
		render(ChatInput, { onsend });
		const area = await type('keep me');
		await fireEvent.keyDown(area, { key: 'Enter' });
		await tick();
		expect(area.disabled).toBe(true);
		reject(new ApiError(409, 'conflict', 'agent is not running'));
		await vi.waitFor(() => expect(screen.getByRole('alert').textContent).toContain('agent is not running'));
		expect(area.value).toBe('keep me');
		expect(area.disabled).toBe(false);
	});

	it('attaches files: uploads at once with progress, waits for them, sends their paths', async () => {
		const onsend = vi.fn().mockResolvedValue(undefined);
		const pending: { resolve: (p: string) => void; progress: (f: number) => void; file: File }[] = [];
		const upload = vi.fn(
			(file: File, progress: (f: number) => void) => new Promise<string>((resolve) => pending.push({ resolve, progress, file }))
		);
		render(ChatInput, { onsend, upload });
		const input = screen.getByTestId('attach-input') as HTMLInputElement;
		const sheet = new File(['a,b\n1,2\n'], 'sales.csv', { type: 'text/csv' });
		await fireEvent.change(input, { target: { files: [sheet] } });
		expect(upload).toHaveBeenCalledTimes(1);
		expect(pending[0].file.name).toBe('sales.csv');
		pending[0].progress(0.5);
		await tick();
		const bar = screen.getByRole('progressbar', { name: 'Uploading sales.csv' });
		expect(bar.getAttribute('aria-valuenow')).toBe('50');
		await type('sum column b');
		const btn = screen.getByRole('button', { name: 'Send' }) as HTMLButtonElement;
		expect(btn.disabled).toBe(true); // the upload is not done
		pending[0].resolve('/uploads/sales.csv');
		await vi.waitFor(() => expect(btn.disabled).toBe(false));
		expect(screen.queryByRole('progressbar')).toBeNull();
		await fireEvent.click(btn);
		await vi.waitFor(() => expect(onsend).toHaveBeenCalledWith('sum column b', ['/uploads/sales.csv']));
		await vi.waitFor(() => expect(screen.queryAllByTestId('attachment')).toHaveLength(0));
	});

	it('a file alone can be sent; a removed or failed one is not sent, and the failure says why', async () => {
		const onsend = vi.fn().mockResolvedValue(undefined);
		const upload = vi.fn(async (file: File) => {
			if (file.name === 'big.bin') throw new ApiError(413, 'too_large', 'big.bin is over the 50 MB file limit');
			return '/uploads/' + file.name;
		});
		render(ChatInput, { onsend, upload });
		const input = screen.getByTestId('attach-input') as HTMLInputElement;
		const files = ['a.png', 'b.pdf', 'big.bin'].map((n) => new File(['x'], n));
		await fireEvent.change(input, { target: { files } });
		await vi.waitFor(() => expect(screen.getByText(/big.bin was not uploaded: big.bin is over the 50 MB file limit/)).toBeTruthy());
		await fireEvent.click(screen.getByRole('button', { name: 'Remove b.pdf' }));
		const btn = screen.getByRole('button', { name: 'Send' }) as HTMLButtonElement;
		await vi.waitFor(() => expect(btn.disabled).toBe(false));
		await fireEvent.click(btn);
		await vi.waitFor(() => expect(onsend).toHaveBeenCalledWith('', ['/uploads/a.png']));
	});

	it('offers no attach button without an upload', () => {
		render(ChatInput, { onsend: vi.fn() });
		expect(screen.queryByRole('button', { name: 'Attach files' })).toBeNull();
	});
});
