// What this browser can do, found by trying each feature (never by its name), and the one plain
// sentence the page shows for each that is missing. The page adapts to these, not to a browser.
//
//   folderPicker   showDirectoryPicker: "Choose folder…" opens the system's folder picker
//                  (without it: <input webkitdirectory>, which every engine has)
//   savePicker     showSaveFilePicker: "Convert and save to…" streams into a file the user picks
//   dropHandles    DataTransferItem.getAsFileSystemHandle (without it: webkitGetAsEntry's reader)
//   opfs           the origin-private file system opens (WebKit in a private or automated
//                  session has the API but refuses to open it)
//   threads        SharedArrayBuffer on a cross-origin-isolated page: WebAssembly threads
//   simd           WebAssembly SIMD (the converter's build needs it)
//   memory64       WebAssembly memory64 (wllama's build for Try it needs it)
//   jspi           WebAssembly.Suspending (JS promise integration)
//   streamSave     a service worker can answer a download with a stream (web/stream_save.js):
//                  where the page keeps no files, a large one goes to the downloads as it is written

// The smallest modules that use each feature: a memory of flags 0x04 (64-bit index), and a
// function that returns a v128.const.
const MEMORY64 = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 3, 1, 4, 1]);
const SIMD = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 22, 1, 20, 0, 253, 12,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11]);
const validates = (bytes) => {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(bytes);
  } catch {
    return false;
  }
};

async function opfsOpens() {
  try {
    if (!navigator.storage?.getDirectory) return false;
    await navigator.storage.getDirectory();
    return true;
  } catch {
    return false;
  }
}

// All but opfs, known at once (a click that opens a picker must not wait for anything).
export function detectNow() {
  const item = globalThis.DataTransferItem?.prototype;
  return {
    folderPicker: typeof globalThis.showDirectoryPicker === 'function',
    savePicker: typeof globalThis.showSaveFilePicker === 'function',
    dropHandles: !!item && 'getAsFileSystemHandle' in item,
    threads: globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function',
    simd: validates(SIMD),
    memory64: validates(MEMORY64),
    jspi: typeof globalThis.WebAssembly?.Suspending === 'function',
    streamSave: 'serviceWorker' in (globalThis.navigator ?? {}) && typeof ReadableStream === 'function' &&
      typeof ByteLengthQueuingStrategy === 'function',
  };
}

// { folderPicker, savePicker, dropHandles, opfs, threads, simd, memory64, jspi, streamSave }: booleans.
export async function detect() {
  return { ...detectNow(), opfs: await opfsOpens() };
}

// Where the page keeps no files (no OPFS), a file larger than this is streamed to the downloads
// (streamSave) rather than built in the tab's memory, which keeps verify and Try it at hand.
export const STREAM_ABOVE_BYTES = 512 * 2 ** 20;

// The sentence for no memory64, which "Try it" (web/try_model.js) shows in its own section too.
export const NO_MEMORY64 = 'Try it cannot run here: llama.cpp\'s WebAssembly build (wllama) needs 64-bit WebAssembly memory, ' +
  'which this browser lacks. Converting, opening and verifying work.';

// What a missing capability changes for the user, one sentence each ([] when nothing is
// missing). Threads are said in the status line (with the thread count), not here.
export function limits(caps) {
  const out = [];
  if (!caps.simd) out.push('This browser has no WebAssembly SIMD, which the converter needs: use a current Chrome, Edge, Firefox or Safari.');
  if (!caps.folderPicker) out.push('This browser has no folder picker: “Choose folder…” opens its file dialog for a folder upload, which reads the same files.');
  if (!caps.savePicker && caps.opfs) out.push('This browser cannot save straight to a file or folder you choose: the file is kept in the browser and downloaded when done.');
  if (!caps.opfs) {
    out.push('This browser does not let the page keep files (its private storage is off, as in a private window): ' + (caps.streamSave
      ? `a file up to ${STREAM_ABOVE_BYTES / 2 ** 20} MiB is built in this tab's memory and downloaded when done; a larger one goes to your downloads as it is written (open it from there to verify or try it).`
      : 'the file is built in this tab\'s memory and downloaded when done, so it must fit there.'));
  }
  if (!caps.memory64) out.push(NO_MEMORY64);
  return out;
}
