import type { PolicyRecord } from './adapter.js'
import { PermissionEngine, type EngineState } from './engine.js'
import { modelId } from './model.js'

/**
 * The shadow model's engine beside the live one: loaded over the rows the
 * live load read, and given every change the live engine is given. It never
 * decides an answer, so a change it cannot apply sets it aside (with why)
 * instead of failing the live engine's change; the next full reload builds
 * it again.
 */
export class ShadowEngine {
  private failure: string | null = null
  readonly modelId: string

  private constructor(
    private current: PermissionEngine | null,
    readonly modelText: string,
    private readonly now: () => number,
    private readonly onSetAside: (why: string) => void,
  ) {
    this.modelId = modelId(modelText)
  }

  /** `onSetAside` is told why whenever the shadow stops following (the log's error line). */
  static async load(
    modelText: string,
    record: PolicyRecord,
    state: EngineState,
    now: () => number = Date.now,
    onSetAside: (why: string) => void = () => undefined,
  ): Promise<ShadowEngine> {
    return new ShadowEngine(await PermissionEngine.fromRecord(modelText, record, state, now), modelText, now, onSetAside)
  }

  /** The engine to ask; null while it is set aside. */
  get engine(): PermissionEngine | null {
    return this.current
  }

  /** Why the shadow stopped following the live policy; null while it follows. */
  get setAsideFor(): string | null {
    return this.failure
  }

  /** Applies to the shadow what was just applied to the live engine. */
  async follow(step: (engine: PermissionEngine) => unknown): Promise<void> {
    const engine = this.current
    if (engine === null) return
    try {
      await step(engine)
    } catch (error) {
      this.setAside(`applying a change to the shadow model failed: ${(error as Error).message}`)
    }
  }

  /** A full reload of the live engine: the shadow is built again over the rows that reload read. */
  async reload(record: PolicyRecord, state: EngineState): Promise<void> {
    try {
      this.current = await PermissionEngine.fromRecord(this.modelText, record, state, this.now)
      this.failure = null
    } catch (error) {
      this.setAside(`reloading the shadow model failed: ${(error as Error).message}`)
    }
  }

  private setAside(why: string): void {
    this.current = null
    this.failure = why
    this.onSetAside(why)
  }
}
