import { randomUUID } from 'node:crypto'
import { readFileSync, readlinkSync } from 'node:fs'
import { hostname } from 'node:os'

/**
 * Who holds the embedded store's lock, as written beside it: a random id
 * (what the holder checks to know the lock is still its own) and, where
 * Linux tells, where the process runs and which process it is. A process id
 * alone names nothing across containers (two can both be PID 1), so the
 * machine (host name and boot id) and the PID namespace go with it, and the
 * process's start time tells a reused id from the holder.
 */
export interface LockOwner {
  id: string
  host: string
  /** This boot of the kernel (/proc/sys/kernel/random/boot_id). */
  boot: string | null
  /** The PID namespace (/proc/self/ns/pid's link, `pid:[inode]`). */
  pidNamespace: string | null
  pid: number
  /** Clock ticks after boot at which the process started (/proc/<pid>/stat, field 22). */
  started: string | null
}

function readOrNull(read: () => string): string | null {
  try {
    return read().trim()
  } catch {
    return null
  }
}

/** The 22nd field of /proc/<pid>/stat; the second field (the command's name, in parentheses) may hold spaces, so count after its `)`. */
function startTime(pid: number | 'self'): string | null {
  const stat = readOrNull(() => readFileSync(`/proc/${pid}/stat`, 'utf8'))
  if (stat === null) return null
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
}

export function currentLockOwner(): LockOwner {
  return {
    id: randomUUID(),
    host: hostname(),
    boot: readOrNull(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8')),
    pidNamespace: readOrNull(() => readlinkSync('/proc/self/ns/pid')),
    pid: process.pid,
    started: startTime('self'),
  }
}

export function parseLockOwner(text: string): LockOwner | null {
  try {
    const value = JSON.parse(text) as Partial<LockOwner>
    if (typeof value.id !== 'string' || typeof value.host !== 'string' || typeof value.pid !== 'number') return null
    return {
      id: value.id,
      host: value.host,
      boot: value.boot ?? null,
      pidNamespace: value.pidNamespace ?? null,
      pid: value.pid,
      started: value.started ?? null,
    }
  } catch {
    return null
  }
}

/**
 * Whether the process that wrote `owner` has certainly stopped: it ran on
 * this machine, in this boot and in this PID namespace (so its id means here
 * what it meant there), and no process has that id now, or the one that has
 * it started at another time. Anything unknown (another host or container,
 * a missing /proc) answers false: the lock then goes stale the slow way.
 */
export function lockOwnerIsGone(owner: LockOwner, here: LockOwner = currentLockOwner()): boolean {
  if (owner.host !== here.host || owner.boot === null || owner.boot !== here.boot) return false
  if (owner.pidNamespace === null || owner.pidNamespace !== here.pidNamespace || owner.started === null) return false
  if (owner.pid === here.pid) return owner.started !== here.started
  try {
    process.kill(owner.pid, 0)
  } catch (error) {
    // EPERM: a process of another user has the id, alive: compare its start time below.
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return true
  }
  const started = startTime(owner.pid)
  return started !== null && started !== owner.started
}
