import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import { afterEach, describe, expect, it, vi } from 'vitest';
import TopBar from './TopBar.svelte';
import { THEME_KEY } from '$lib/theme';

describe('TopBar', () => {
	afterEach(() => {
		document.documentElement.classList.remove('dark');
		localStorage.clear();
	});

	it('renders the logo and toggles .dark on <html>, remembering the choice', async () => {
		render(TopBar);
		expect(screen.getByText('filepath')).toBeTruthy();
		const toggle = screen.getByRole('button', { name: /dark theme/i });
		await fireEvent.click(toggle);
		expect(document.documentElement.classList.contains('dark')).toBe(true);
		expect(localStorage.getItem(THEME_KEY)).toBe('dark');
		await fireEvent.click(screen.getByRole('button', { name: /light theme/i }));
		expect(document.documentElement.classList.contains('dark')).toBe(false);
		expect(localStorage.getItem(THEME_KEY)).toBe('light');
	});

	it('CSS variables follow the class', async () => {
		const style = document.createElement('style');
		style.textContent = ':root{--bg:#ffffff}.dark{--bg:#09090b}';
		document.head.appendChild(style);
		render(TopBar);
		const bg = () => getComputedStyle(document.documentElement).getPropertyValue('--bg').trim();
		expect(bg()).toBe('#ffffff');
		await fireEvent.click(screen.getByRole('button', { name: /dark theme/i }));
		expect(bg()).toBe('#09090b');
		style.remove();
	});

	it('shows the menu button only when given a handler', async () => {
		const onmenu = vi.fn();
		render(TopBar, { onmenu });
		await fireEvent.click(screen.getByRole('button', { name: 'Show agents' }));
		expect(onmenu).toHaveBeenCalled();
	});

	it('Sign out ends the sign-in; a refusal shows and the page stays', async () => {
		const signOut = vi.fn().mockRejectedValueOnce(new Error('cannot reach the filepath server')).mockResolvedValue(undefined);
		render(TopBar, { signOut });
		await fireEvent.click(screen.getByRole('button', { name: 'Sign out' }));
		expect((await screen.findByRole('alert')).textContent).toBe('Could not sign out: cannot reach the filepath server');
		await fireEvent.click(screen.getByRole('button', { name: 'Sign out' }));
		expect(signOut).toHaveBeenCalledTimes(2);
		await waitFor(() => expect(screen.queryByRole('alert')).toBeNull());
	});
});
