// Syntax highlighting of diff lines: highlight.js's core with the languages agents write most,
// bundled (no CDN). A line is highlighted alone (a diff shows pieces of a file), so a construct
// spanning lines, such as a block comment, is coloured line by line as far as each line shows it.
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import dockerfile from 'highlight.js/lib/languages/dockerfile';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import makefile from 'highlight.js/lib/languages/makefile';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import ruby from 'highlight.js/lib/languages/ruby';
import rust from 'highlight.js/lib/languages/rust';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import ini from 'highlight.js/lib/languages/ini';

const languages = { bash, c, cpp, css, diff, dockerfile, go, java, javascript, json, makefile, markdown, python, ruby, rust, sql, typescript, xml, yaml, ini };
for (const [name, lang] of Object.entries(languages)) hljs.registerLanguage(name, lang);

const byExt: Record<string, string> = {
	sh: 'bash', bash: 'bash', zsh: 'bash',
	c: 'c', h: 'c',
	cc: 'cpp', cpp: 'cpp', cxx: 'cpp', hpp: 'cpp', hh: 'cpp',
	css: 'css', scss: 'css',
	diff: 'diff', patch: 'diff',
	go: 'go',
	java: 'java', kt: 'java',
	js: 'javascript', mjs: 'javascript', cjs: 'javascript', jsx: 'javascript',
	json: 'json',
	md: 'markdown', markdown: 'markdown',
	py: 'python',
	rb: 'ruby',
	rs: 'rust',
	sql: 'sql',
	ts: 'typescript', tsx: 'typescript', mts: 'typescript',
	html: 'xml', htm: 'xml', xml: 'xml', svg: 'xml', svelte: 'xml', vue: 'xml',
	yml: 'yaml', yaml: 'yaml',
	toml: 'ini', ini: 'ini', cfg: 'ini'
};

/** languageOf names the highlighting language of a file by its name ('' for none). */
export function languageOf(path: string): string {
	const base = path.slice(path.lastIndexOf('/') + 1);
	if (base === 'Dockerfile' || base.startsWith('Dockerfile.')) return 'dockerfile';
	if (base === 'Makefile' || base === 'GNUmakefile') return 'makefile';
	const dot = base.lastIndexOf('.');
	return dot > 0 ? (byExt[base.slice(dot + 1).toLowerCase()] ?? '') : '';
}

const escapes: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** escapeHTML makes text safe to put in markup. */
export function escapeHTML(s: string): string {
	return s.replace(/[&<>"']/g, (ch) => escapes[ch]);
}

/** highlightLine returns the line as HTML: highlight.js's spans (their text escaped by it), or the
 * escaped text for an unknown language or a line it cannot read. */
export function highlightLine(text: string, lang: string): string {
	if (!lang || text.length > 2000) return escapeHTML(text);
	try {
		return hljs.highlight(text, { language: lang, ignoreIllegals: true }).value;
	} catch {
		return escapeHTML(text);
	}
}
