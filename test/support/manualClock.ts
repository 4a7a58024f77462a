import type { Clock, ClockTimer } from '../../src/domain/clock.js'

/** A clock that moves only when the test says so; its timers fire as it passes their instant. */
export class ManualClock implements Clock {
  private timers: Array<{ at: number; fn: () => void }> = []

  constructor(private current = Date.parse('2030-01-01T00:00:00Z')) {}

  now(): number {
    return this.current
  }

  at(at: number, fn: () => void): ClockTimer {
    const timer = { at, fn }
    this.timers.push(timer)
    if (at <= this.current) queueMicrotask(() => this.fireDue())
    return { cancel: () => void (this.timers = this.timers.filter((t) => t !== timer)) }
  }

  /** Moves the clock forward and fires every timer whose instant it passed, soonest first. */
  advance(ms: number): void {
    this.current += ms
    this.fireDue()
  }

  /** Timers still waiting. */
  get pending(): number {
    return this.timers.length
  }

  private fireDue(): void {
    const due = this.timers.filter((t) => t.at <= this.current).sort((a, b) => a.at - b.at)
    this.timers = this.timers.filter((t) => t.at > this.current)
    for (const timer of due) timer.fn()
  }
}
