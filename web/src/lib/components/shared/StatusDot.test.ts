import { render } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import StatusDot from './StatusDot.svelte';

describe('StatusDot', () => {
	const cases = [
		{ name: 'idle is static', status: 'idle', pulse: false, color: 'var(--status-idle)' },
		{ name: 'thinking pulses', status: 'thinking', pulse: true, color: 'var(--status-thinking)' },
		{ name: 'running pulses', status: 'running', pulse: true, color: 'var(--status-running)' },
		{ name: 'done is static', status: 'done', pulse: false, color: 'var(--status-done)' },
		{ name: 'error is static', status: 'error', pulse: false, color: 'var(--status-error)' },
		{ name: 'paused is a static ring', status: 'paused', pulse: false, color: 'var(--status-paused)' },
		{ name: 'stopped is a static grey square', status: 'stopped', pulse: false, color: 'var(--status-stopped)' },
		{ name: 'lost is a static dashed ring', status: 'lost', pulse: false, color: 'var(--status-lost)' }
	];
	for (const c of cases) {
		it(c.name, () => {
			const { container } = render(StatusDot, { status: c.status, size: 10 });
			const dot = container.querySelector('.dot') as HTMLElement;
			expect(dot.dataset.status).toBe(c.status);
			expect(dot.classList.contains('pulse')).toBe(c.pulse);
			expect(dot.style.color).toBe(c.color);
			expect(dot.style.width).toBe('10px');
			expect(dot.getAttribute('aria-label')).toMatch(new RegExp(c.status, 'i'));
			expect(dot.classList.contains('ring')).toBe(c.status === 'paused');
			expect(dot.classList.contains('square')).toBe(c.status === 'stopped');
			expect(dot.classList.contains('dashed')).toBe(c.status === 'lost');
		});
	}

	it('issue 27.3: done, error, stopped and lost never look alike (colour and shape)', () => {
		const look = (status: string) => {
			const { container, unmount } = render(StatusDot, { status });
			const dot = container.querySelector('.dot') as HTMLElement;
			const l = `${dot.style.color}|${[...dot.classList].filter((c) => c !== 'dot' && !c.startsWith('svelte-')).sort().join(',')}|${dot.getAttribute('aria-label')}`;
			unmount();
			return l;
		};
		const looks = ['done', 'error', 'stopped', 'lost'].map(look);
		expect(new Set(looks).size).toBe(4);
	});
});
