// The page's nibble-packing view and block view, driven and read as a user sees them (shared by the
// tests that check them: teach.test.mjs, and hub.test.mjs on a model read from the Hub).
import assert from 'node:assert/strict';

// ---- the nibble view, as shown ----
export async function waitView(page, want = {}) {
  try {
    await page.waitForFunction((w) => {
      const v = document.getElementById('nv-view').dataset;
      if (v.state === 'error') return true;
      return v.state === 'ready' && Object.entries(w).every(([k, x]) => v[k] === String(x));
    }, want, { timeout: 30000 });
  } catch (e) {  // say what the view shows instead of only that it timed out
    const shown = await page.evaluate(() => ({
      view: { ...document.getElementById('nv-view').dataset }, status: document.getElementById('nv-status').textContent,
      source: document.getElementById('nv-source').value, tensor: document.getElementById('nv-tensor').value,
      fileOption: document.querySelector('#nv-source option[value="file"]').disabled ? 'disabled' : 'enabled' }));
    throw new Error(`${e.message}: waiting for ${JSON.stringify(want)}, the view shows ${JSON.stringify(shown)}`);
  }
  const st = await page.evaluate(() => document.getElementById('nv-view').dataset.state);
  assert.equal(st, 'ready', await page.textContent('#nv-status'));
}

export const readView = (page) => page.evaluate(() => {
  const v = document.getElementById('nv-view').dataset;
  const byIndex = (sel, key, f) => [...document.querySelectorAll(sel)]
    .sort((a, b) => a.dataset[key] - b.dataset[key]).map(f);
  const val = (e) => (e.dataset.value === undefined ? null : Number(e.dataset.value));
  const file = document.getElementById('nv-file');
  return {
    source: v.source, tensor: v.tensor, row: Number(v.row), group: Number(v.group),
    scaleHex: document.getElementById('nv-scale-hex').textContent,
    scale: Number(document.getElementById('nv-scale').dataset.value),
    bytes: byIndex('#nv-grid .nv-byte', 'byte', (e) => parseInt(e.textContent, 16)),
    q: byIndex('#nv-grid td.nv-q', 'weight', (e) => Number(e.textContent)),
    nib: byIndex('#nv-grid td.nv-nib', 'weight', (e) => e.textContent),
    w: byIndex('#nv-grid td.nv-w', 'weight', val),
    deq: byIndex('#nv-grid td.nv-deq', 'weight', val),
    err: byIndex('#nv-grid td.nv-err', 'weight', val),
    offsets: file.hidden ? null : { scale: Number(file.dataset.scaleOffset), packed: Number(file.dataset.packedOffset) },
  };
});

export async function showGroup(page, { source, tensor, row, group }) {
  if (await page.inputValue('#nv-source') !== source) await page.selectOption('#nv-source', source);
  if (tensor && await page.inputValue('#nv-tensor') !== tensor) {
    await page.selectOption('#nv-tensor', tensor);
    await waitView(page, { tensor });
  }
  for (const [id, v] of [['#nv-row', row], ['#nv-group', group]]) {
    await page.fill(id, String(v + 1));  // typed as people count, from 1 (the field has focus), then committed
    await page.$eval(id, (e) => e.dispatchEvent(new Event('change')));
  }
  await waitView(page, { source, row, group, ...(tensor ? { tensor } : {}) });
  return readView(page);
}

export async function waitBlock(page, want = {}) {
  try {
    await page.waitForFunction((w) => {
      const v = document.getElementById('bv-view').dataset;
      return v.state === 'error' || (v.state === 'ready' && Object.entries(w).every(([k, x]) => v[k] === String(x)));
    }, want, { timeout: 30000 });
  } catch (e) {
    const shown = await page.evaluate(() => ({ ...document.getElementById('bv-view').dataset, status: document.getElementById('bv-status').textContent }));
    throw new Error(`${e.message}: waiting for ${JSON.stringify(want)}, the block view shows ${JSON.stringify(shown)}`);
  }
  assert.equal(await page.evaluate(() => document.getElementById('bv-view').dataset.state), 'ready', await page.textContent('#bv-status'));
}
export const readBlock = (page) => page.evaluate(() => {
  const v = document.getElementById('bv-view').dataset;
  const cells = (kind) => Object.fromEntries([...document.querySelectorAll(`#bv-grid td.bv-${kind}`)].map((e) => [e.dataset.elem, Number(e.dataset.value)]));
  return {
    type: v.type, tensor: v.tensor, row: Number(v.row), block: Number(v.block), page: Number(v.page),
    pieces: v.pieces ? JSON.parse(v.pieces) : null,
    bytes: [...document.querySelectorAll('#bv-bytes .bv-byte')].sort((a, b) => a.dataset.byte - b.dataset.byte).map((e) => Number(e.dataset.value)),
    deq: cells('deq'), q: cells('q'), w: cells('w'), err: cells('err'),
  };
});
export async function showBlock(page, { source, type, tensor, row, block }) {
  if (await page.inputValue('#bv-source') !== source) {
    await page.selectOption('#bv-source', source);
    await waitBlock(page, { source });
  }
  if (type && await page.inputValue('#bv-type') !== type) {
    await page.selectOption('#bv-type', type);
    await waitBlock(page, { type });
  }
  if (tensor && await page.inputValue('#bv-tensor') !== tensor) {
    await page.selectOption('#bv-tensor', tensor);
    await waitBlock(page, { tensor });
  }
  for (const [id, v] of [['#bv-row', row], ['#bv-block', block]]) {
    await page.fill(id, String(v + 1));
    await page.$eval(id, (e) => e.dispatchEvent(new Event('change')));
  }
  await waitBlock(page, { source, row, block });
  return readBlock(page);
}
// Every value of the block on show, page after page (→ moves through the pages of a block).
export async function blockValues(page, n) {
  await page.focus('#bv-view');
  const all = {};
  let v = await readBlock(page);
  const at = { row: v.row, block: v.block };
  for (;;) {
    for (const k of ['deq', 'q', 'w', 'err']) all[k] = { ...all[k], ...v[k] };
    if (Object.keys(all.deq).length >= n) break;
    await page.keyboard.press('ArrowRight');
    await waitBlock(page, { ...at, page: v.page + 1 });
    v = await readBlock(page);
  }
  const list = (o) => Array.from({ length: n }, (_, i) => o[i]);
  return { ...v, deq: list(all.deq), w: list(all.w), err: list(all.err) };
}
