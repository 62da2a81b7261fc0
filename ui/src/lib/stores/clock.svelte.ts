/** A ticking "now" for elapsed times and countdowns; tests drive it with fake timers. */
export class Clock {
  now = $state(Date.now());
  #timer: ReturnType<typeof setInterval> | undefined;

  start(intervalMs = 250): void {
    if (this.#timer !== undefined) return;
    this.tick();
    this.#timer = setInterval(() => this.tick(), intervalMs);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  tick(): void {
    this.now = Date.now();
  }
}
