// The core's tables, as the worker's init returns them (Converter.catalog): quant types (names,
// block geometry, family, colour), output formats (ids, extensions, menu entries) and the
// files of a checkpoint folder the core reads. The page draws from these instead of knowing
// any type or format by name.
export const catalog = { quant_types: [], formats: [], checkpoint_files: [], shard_extension: '.safetensors' };

export function setCatalog(c) { Object.assign(catalog, c); }

export const typeByName = (name) => catalog.quant_types.find((t) => t.name === name);
// The type of a family ("q4": the 4-bit packing the nibble view lays open).
export const typeOfFamily = (family) => catalog.quant_types.find((t) => t.family === family);
export const colorOf = (name) => (typeByName(name) || {}).color || '#999';
// "Q8" for Q8_per_channel: short names for narrow table cells.
export const shortOf = (name) => { const t = typeByName(name); return t ? t.short.toUpperCase() : name; };
// The types a GGUF-lite scheme may name, by short name.
export const schemeNames = () => catalog.quant_types.filter((t) => t.gguf_lite).map((t) => t.short);
export const formatById = (id) => catalog.formats.find((f) => f.id === id);
// Every menu entry of every format, with its format.
export const menuEntries = () => catalog.formats.flatMap((f) => f.menu.map((m) => ({ ...m, format: f })));
export const wantedFile = (name) => name.endsWith(catalog.shard_extension) || catalog.checkpoint_files.includes(name);
