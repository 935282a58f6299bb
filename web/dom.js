// Small helpers the teaching views share: numbers as they show them, bytes in hex, elements.
// Short, readable numbers; the full value is in the title and in data-value.
export function num(v, digits = 3) {
  if (v === null || v === undefined) return '–';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e-3 && a < 1e4) {
    // one digit more when that spells the value exactly (0.1875, not 0.188)
    let s = Math.fround(Number(v.toPrecision(digits + 1))) === Math.fround(v) ? v.toPrecision(digits + 1) : v.toPrecision(digits);
    if (s.includes('.') && !s.includes('e')) s = s.replace(/0+$/, '').replace(/\.$/, '');
    return s;
  }
  return v.toExponential(digits - 1).replace(/\.?0+e/, 'e');
}
export function hex2(b) { return b.toString(16).toUpperCase().padStart(2, '0'); }
// An element with properties and children.
export function el(tag, props = {}, ...kids) {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
}
