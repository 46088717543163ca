import { sveltekit } from '@sveltejs/kit/vite';
import { svelteTesting } from '@testing-library/svelte/vite';
import { defineConfig } from 'vitest/config';

// FILEPATH_API points the dev server at a running `filepath serve` (or scripts/mock-server.mjs).
const api = process.env.FILEPATH_API ?? 'http://127.0.0.1:8080';

export default defineConfig({
	plugins: [sveltekit(), svelteTesting()],
	server: {
		proxy: {
			'/api': { target: api, ws: true, changeOrigin: false },
			'/login': { target: api },
			'/healthz': { target: api }
		}
	},
	test: {
		environment: 'jsdom',
		include: ['src/**/*.test.ts'],
		setupFiles: ['./src/test-setup.ts'],
		// Page tests render whole routes in jsdom: ~1.5 s alone, over the
		// default 5 s on a loaded 2-core CI machine.
		testTimeout: 20_000
	}
});
