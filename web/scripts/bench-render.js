// Evaluated in the page by scripts/shot.mjs (dev only) against `MOCK_BIG=1 node scripts/mock-server.mjs`:
// times until the 500-node tree and the root's full replay (last record: "commit 1999") are on
// screen, then the switch to a small node and back to the root.
(async () => {
	const t00 = performance.now();
	const until = async (f) => {
		while (!f()) {
			if (performance.now() - t00 > 20000) throw new Error('bench timeout: ' + JSON.stringify({ tree: document.querySelectorAll('[role=treeitem]').length, items: document.querySelectorAll('.list > .item').length, h1: document.querySelector('h1.name')?.textContent, last: last(), text: document.querySelector('.list')?.textContent.slice(-200) }));
			await new Promise((r) => setTimeout(r, 5));
		}
		return performance.now();
	};
	const last = () => [...document.querySelectorAll('.message')].some((e) => e.textContent === 'commit 1999');
	const tree = await until(() => document.querySelectorAll('[role=treeitem]').length === 500);
	const chat = await until(last);
	const items = document.querySelectorAll('.list > .item').length;
	const t1 = performance.now();
	document.querySelector('[data-node-id="b7"] .select').click();
	const sw = await until(() => document.querySelector('h1.name')?.textContent === 'agent-7' && document.querySelectorAll('.list > .item').length > 0 && !last());
	const t2 = performance.now();
	document.querySelector('[data-node-id="b0"] .select').click();
	const back = await until(last);
	console.error(JSON.stringify({ navToTree: Math.round(tree), navToRootChat: Math.round(chat), mountedItems: items, switchSmall: Math.round(sw - t1), switchRoot: Math.round(back - t2) }));
})();
