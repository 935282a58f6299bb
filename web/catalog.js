// The core's tables, as the worker's init returns them (Converter.catalog): quant types (names,
// block geometry, family, colour), output formats (ids, extensions, menu entries, the types their
// rules take) and the files of a checkpoint folder the core reads. The page draws from these
// instead of knowing any type or format by name.
export const catalog = { quant_types: [], formats: [], checkpoint_files: [], shard_extension: '.safetensors', imatrix_name_hints: [] };

export function setCatalog(c) { Object.assign(catalog, c); }

export const typeByName = (name) => catalog.quant_types.find((t) => t.name === name);
// "q8_0" -> the Q8_0 row: scheme rules and menu options name types by their short name.
export const typeByShort = (short) => catalog.quant_types.find((t) => t.short === short);
// The 4-bit packing the nibble view lays open: the Q4 type of GGUF-lite (the core's group view
// reads GGUF-lite's Q4_per_group_64 only).
export const nibbleType = () => catalog.quant_types.find((t) => t.family === 'q4' && t.gguf_lite);
export const colorOf = (name) => (typeByName(name) || {}).color || '#999';
// "Q8" for Q8_per_channel, "Q8_0" for Q8_0: short names for narrow table cells.
export const shortOf = (name) => { const t = typeByName(name); return t ? t.short.toUpperCase() : name; };
export const formatById = (id) => catalog.formats.find((f) => f.id === id);
// The types a format's default scheme may be (one per menu entry) and the types its per-tensor
// rules may name (its rule_types), by short name.
export const fileTypesOf = (f) => [...new Set(f.menu.map((m) => m.options && m.options.scheme).filter(Boolean))];
export const ruleTypesOf = (f) => f.rule_types || [];
// Every menu entry of every format, with its format.
export const menuEntries = () => catalog.formats.flatMap((f) => f.menu.map((m) => ({ ...m, format: f })));
export const wantedFile = (name) => name.endsWith(catalog.shard_extension) || catalog.checkpoint_files.includes(name);
// A file beside the checkpoint worth offering to the core as an importance matrix (by the core's hints).
export const maybeImatrix = (name) => catalog.imatrix_name_hints.some((h) => name.toLowerCase().includes(h));

// What a written file is for and how to run it, from the core's format table.
export function useOf(f) {
  return { runs_in: f.runs_in || '', run_command: f.run_command || '' };
}
