// The files this page keeps in the browser: "Convert" writes into the origin private file system
// (OPFS, folder leapconv-output), and the finished file stays there so it can be downloaded again.
// A file being written is "<name>.partial" (worker.js) and takes its name only when complete;
// partial files left by a reload or a closed tab mid-conversion are removed at start-up, unless
// another tab is writing them (it holds the Web Lock "leapconv-write:<name>").
export const OUT_DIR = 'leapconv-output';
export const PARTIAL = '.partial';

async function outDir(create = false) {
  if (!navigator.storage || !navigator.storage.getDirectory) return null;
  try {
    const root = await navigator.storage.getDirectory();
    return await root.getDirectoryHandle(OUT_DIR, { create });
  } catch {
    return null;  // nothing kept yet, or no OPFS here (WebKit in a private session: capabilities.js)
  }
}

// Runs f once nobody holds the write lock of `name`: at once after a reload (the old page's lock
// goes with it), or when another tab's conversion ends (by then its file has its final name, or
// is gone, and f finds nothing).
async function whenNotWritten(name, f) {
  if (!navigator.locks) return f();
  return navigator.locks.request('leapconv-write:' + name, () => f());
}

// Removes the partial outputs nobody is writing; returns their names. A file still open by a
// worker of the page being replaced (a reload) cannot be removed at once: a few tries.
export async function removePartials({ tries = 10, waitMs = 300 } = {}) {
  const dir = await outDir();
  if (!dir) return [];
  const removed = [];
  for await (const [name, h] of dir.entries()) {
    if (h.kind !== 'file' || !name.endsWith(PARTIAL)) continue;
    await whenNotWritten(name, async () => {
      for (let i = 0; i < tries; i++) {
        try {
          await dir.removeEntry(name);
          removed.push(name);
          return;
        } catch (e) {
          if (e && e.name === 'NotFoundError') return;
          await new Promise((r) => setTimeout(r, waitMs));
        }
      }
    });
  }
  return removed;
}

// The finished files: [{ name, size, lastModified }], newest first.
export async function keptFiles() {
  const dir = await outDir();
  if (!dir) return [];
  const out = [];
  for await (const [name, h] of dir.entries()) {
    if (h.kind !== 'file' || name.endsWith(PARTIAL)) continue;
    const f = await h.getFile();
    out.push({ name, size: f.size, lastModified: f.lastModified });
  }
  return out.sort((a, b) => b.lastModified - a.lastModified || a.name.localeCompare(b.name));
}

export async function keptFile(name) {
  const dir = await outDir();
  if (!dir) throw new Error(`${name} is no longer kept in this browser`);
  return (await dir.getFileHandle(name)).getFile();
}

export async function removeKept(name) {
  const dir = await outDir();
  if (dir) await dir.removeEntry(name).catch((e) => { if (e.name !== 'NotFoundError') throw e; });
}

export async function removeAllKept() {
  for (const f of await keptFiles()) await removeKept(f.name);
}

// What the browser lets this page keep: { usage, quota } in bytes, or null.
export async function estimate() {
  try {
    return navigator.storage && navigator.storage.estimate ? await navigator.storage.estimate() : null;
  } catch {
    return null;
  }
}
