// The UI is a single-page app served by the Go binary; nothing is rendered on the server.
export const ssr = false;
export const prerender = false;
