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
		expect(onsend).toHaveBeenCalledWith('hello agent');
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
		expect(onsend).toHaveBeenCalledWith('x');
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
});
