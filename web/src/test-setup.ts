// Test environment: jsdom lacks a few browser APIs the components touch.
if (!('PointerEvent' in globalThis)) {
	class PointerEvent extends MouseEvent {
		pointerId: number;
		constructor(type: string, init: PointerEventInit = {}) {
			super(type, init);
			this.pointerId = init.pointerId ?? 1;
		}
	}
	(globalThis as unknown as { PointerEvent: typeof PointerEvent }).PointerEvent = PointerEvent;
}
