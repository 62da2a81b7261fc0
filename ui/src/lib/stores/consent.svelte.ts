/** Pending consent questions, oldest first; the dialog shows the first and counts the rest. */
import type { ConsentRequest, UiEvent } from '../backend';

export interface PendingConsent {
  request: ConsentRequest;
  receivedAt: number;
  /** When the backend will deny it by itself (receivedAt + expiresInMs). */
  deadline: number;
}

export class ConsentQueue {
  items = $state<PendingConsent[]>([]);
  #clock: () => number;

  constructor(clock: () => number = Date.now) {
    this.#clock = clock;
  }

  get current(): PendingConsent | undefined {
    return this.items[0];
  }

  get size(): number {
    return this.items.length;
  }

  load(requests: ConsentRequest[]): void {
    this.items = [];
    for (const r of requests) this.#add(r);
  }

  #add(request: ConsentRequest): void {
    if (this.items.some((p) => p.request.consentId === request.consentId)) return;
    const receivedAt = this.#clock();
    this.items.push({ request, receivedAt, deadline: receivedAt + Math.max(0, request.expiresInMs) });
  }

  remove(consentId: string): PendingConsent | undefined {
    const i = this.items.findIndex((p) => p.request.consentId === consentId);
    if (i < 0) return undefined;
    const [removed] = this.items.splice(i, 1);
    return removed;
  }

  apply(event: UiEvent): void {
    if (event.type === 'consent_request') this.#add(event.data);
    else if (event.type === 'consent_withdrawn') this.remove(event.data.consentId);
  }
}
