import adapter from '@sveltejs/adapter-static';
import { vitePreprocess } from '@sveltejs/vite-plugin-svelte';

/** @type {import('@sveltejs/kit').Config} */
const config = {
	preprocess: vitePreprocess(),
	compilerOptions: { runes: true },
	kit: {
		// SPA: the Go server serves index.html for every unknown path.
		adapter: adapter({ pages: 'build', assets: 'build', fallback: 'index.html', strict: true }),
		output: { bundleStrategy: 'single' }
	}
};

export default config;
